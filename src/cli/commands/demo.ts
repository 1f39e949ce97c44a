// `callforest demo`: `show` and a summary of `rows` on the built-in worked example.
import type { Command } from "../vendor.js";
import { init } from "../../index.js";
import { loadExample } from "../example.js";
import { maskToInts } from "../../output/jsonl.js";
import { renderPlan } from "../show.js";
import { addBackendOption, parseBackend } from "../inputs.js";

export function register(program: Command): void {
  const command = program
    .command("demo")
    .description("Plan SPEC's worked example (a leader, three subagents, twelve calls) and show the result.");
  addBackendOption(command).action(async (options: { backend: string }) => {
    const cf = await init({ backend: parseBackend(options.backend) });
    const plan = cf.plan(await loadExample());
    const out: string[] = [renderPlan(plan), `rows (${cf.backend}${cf.simd ? ", SIMD" : ""}): loss mask, 1 = trained`];
    for (const row of plan.rows) {
      const mask = maskToInts(row.lossMask, row.numTokens).join("");
      out.push(`  row ${row.index}  ${row.leaf.padEnd(4)} ${String(row.numTokens).padStart(3)} tokens  ${mask}`);
    }
    const r = plan.report;
    out.push(
      "",
      r.trained_tokens === r.captured_tokens
        ? `every generated token trained exactly once: ${r.trained_tokens} of ${r.captured_tokens}`
        : `MISMATCH: ${r.trained_tokens} trained of ${r.captured_tokens} generated`,
    );
    process.stdout.write(out.join("\n") + "\n");
    plan.release();
  });
}
