// Benchmark of `callforest explain`'s analysis (src/explain): finding near parents and causes, and
// planning the token-in/token-out version for the cost, against plan() itself, on rollouts with
// few breaks and on one where every call breaks. Medians from one run.
import { pathToFileURL } from "node:url";
import { Bench } from "tinybench";
import { init } from "callforest";
import { explainRollout } from "../src/explain/analyze.js";
import { tokenInTokenOut } from "../src/explain/tito.js";
import type { CanonicalCall, Rollout } from "../src/types.js";
import { eligibleTokens, generateDeepRollout } from "./generate.js";

/**
 * A leader whose every call drops the previous call's reasoning (its first `reasoning` generated
 * tokens) when it resends the history: each call is a root with a prefix break.
 */
export function generateBrokenRollout(calls = 100, reasoning = 40, generation = 200, tool = 300): Rollout {
  let next = 1;
  const tokens = (n: number) => Array.from({ length: n }, () => next++ % 150_000);
  let history = tokens(2000);
  const out: CanonicalCall[] = [];
  for (let i = 0; i < calls; i++) {
    const prompt = [...history, ...tokens(tool)];
    const generated = tokens(generation);
    out.push({
      id: `c${i}`,
      prompt_token_ids: Int32Array.from(prompt),
      generation_token_ids: Int32Array.from(generated),
      generation_log_probs: new Float32Array(generation).fill(-0.5),
    });
    history = [...prompt, ...generated.slice(reasoning)];
  }
  return { rollout_id: "broken", reward: 1, calls: out };
}

export interface ExplainBenchRow {
  workload: string;
  tokens: number;
  explained: number;
  planMs: number;
  explainMs: number;
  titoMs: number;
}

export async function runExplainBench(log: (line: string) => void): Promise<ExplainBenchRow[]> {
  const cf = await init();
  const workloads: [string, Rollout][] = [
    ["deep rollout, 1 M tokens", generateDeepRollout({ targetTokens: 1_000_000 })],
    ["deep rollout, 4 M tokens", generateDeepRollout({ targetTokens: 4_000_000 })],
    ["every call breaks, 100 calls", generateBrokenRollout(100)],
    ["every call breaks, 200 calls", generateBrokenRollout(200)],
  ];
  const rows: ExplainBenchRow[] = [];
  for (const [workload, rollout] of workloads) {
    const plan = cf.plan(rollout);
    const forest = plan.forest;
    const withAgents = plan.agents.length > 0;
    const explained = explainRollout(rollout, forest, withAgents);
    const tito = tokenInTokenOut(rollout, forest, explained);
    const bench = new Bench({ iterations: 5, time: 0, warmupIterations: 1, warmupTime: 0 });
    bench.add("plan", () => cf.plan(rollout).release());
    bench.add("explain", () => explainRollout(rollout, forest, withAgents));
    bench.add("tito", () => cf.plan(tokenInTokenOut(rollout, forest, explained)).release());
    await bench.run();
    plan.release();
    const ms = (name: string) => {
      const { result } = bench.tasks.find((task) => task.name === name)!;
      if (result.state !== "completed") throw new Error(`${workload} / ${name}: ${result.state}`);
      return result.latency.p50;
    };
    rows.push({
      workload,
      tokens: eligibleTokens(rollout),
      explained: explained.length,
      planMs: ms("plan"),
      explainMs: ms("explain"),
      titoMs: ms("tito"),
    });
    log(`${workload}: done (${tito.calls.length} calls)`);
  }
  return rows;
}

export function explainTable(rows: ExplainBenchRow[]): string {
  const out = [
    "| workload | tokens | explained | plan() | explain analysis | token-in/token-out plan | analysis per M tokens |",
    "|---|---:|---:|---:|---:|---:|---:|",
  ];
  for (const r of rows) {
    const perMillion = (r.explainMs / r.tokens) * 1e6;
    out.push(
      `| ${r.workload} | ${r.tokens.toLocaleString("en-US")} | ${r.explained} | ${r.planMs.toFixed(0)} ms | ` +
        `${r.explainMs.toFixed(0)} ms | ${r.titoMs.toFixed(0)} ms | ${perMillion.toFixed(0)} ms |`,
    );
  }
  return out.join("\n");
}

// `node build/bench-out/bench/explain.js` (after `npm run prebench`): this table alone.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const rows = await runExplainBench((line) => process.stderr.write(`${line}\n`));
  process.stdout.write(`${explainTable(rows)}\n`);
}
