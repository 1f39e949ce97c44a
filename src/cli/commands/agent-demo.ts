// `callforest agent-demo`: runs a short compacted episode of the grid-world agent against the
// built-in deterministic model server, then prints the rewrite boundaries the controller recorded
// and the training rows the core plans from the evidence.
import type { Command } from "commander";
import { createModelClient, identityPolicy, recencyPolicy, rolling, runAgent, turnChunked, type Policy, type ScheduleConfig } from "../../compaction/index.js";
import { init } from "../../index.js";
import { UsageError } from "../errors.js";
import { addBackendOption, parseBackend, parseInteger } from "../inputs.js";

const POLICIES = ["identity", "images", "reasoning", "combined"] as const;
const SCHEDULES = ["rolling", "chunked"] as const;

export interface AgentDemoOptions {
  turns: string;
  policy: string;
  schedule: string;
  /** Chunked schedule only; default 3. */
  actionsPerChunk?: string;
  seed: string;
  backend: string;
}

export function register(program: Command): void {
  const command = program
    .command("agent-demo")
    .description("Run a short compacted grid-world episode against the built-in model server; print its boundaries and rows.")
    .option("--turns <n>", "model calls at most", "10")
    .option("--policy <name>", `compaction policy: ${POLICIES.join(", ")}`, "combined")
    .option("--schedule <name>", `schedule: ${SCHEDULES.join(", ")}`, "chunked")
    .option("--actions-per-chunk <n>", "actions per chunk under the chunked schedule (default: 3)")
    .option("--seed <n>", "seed of the model server and of the grid world's walls", "0");
  addBackendOption(command).action(async (options: AgentDemoOptions) => {
    process.stdout.write(await agentDemo(options));
  });
}

function policyFor(name: string): Policy {
  const images = { keepLastGroups: 2, protectInitialContext: true };
  const reasoning = { keepLastBlocks: 2, keepFirstBlock: false };
  switch (name) {
    case "identity":
      return identityPolicy();
    case "images":
      return recencyPolicy({ images });
    case "reasoning":
      return recencyPolicy({ reasoning });
    case "combined":
      return recencyPolicy({ images, reasoning });
    default:
      throw new UsageError(`unknown --policy '${name}': expected ${POLICIES.join(", ")}`);
  }
}

function pad(cells: (string | number)[], widths: number[]): string {
  return "  " + cells.map((c, i) => String(c).padEnd(widths[i])).join("  ").trimEnd() + "\n";
}

function ones(mask: Uint8Array): number {
  let n = 0;
  for (let b of mask) for (; b; b &= b - 1) n++;
  return n;
}

/** Runs the demo and returns what it prints. */
export async function agentDemo(options: AgentDemoOptions): Promise<string> {
  const turns = parseInteger("--turns", options.turns);
  const actionsPerChunk = options.actionsPerChunk === undefined ? 3 : parseInteger("--actions-per-chunk", options.actionsPerChunk);
  const seed = parseInteger("--seed", options.seed, { min: 0 });
  const policy = policyFor(options.policy);
  if (!(SCHEDULES as readonly string[]).includes(options.schedule)) throw new UsageError(`unknown --schedule '${options.schedule}': expected ${SCHEDULES.join(", ")}`);
  const backend = parseBackend(options.backend);
  if (options.schedule === "rolling" && options.actionsPerChunk !== undefined) {
    throw new UsageError("--actions-per-chunk applies to --schedule chunked only (rolling recomputes the view every call)");
  }
  const schedule: ScheduleConfig = options.schedule === "rolling" ? rolling() : turnChunked(actionsPerChunk);

  // The test bed carries a BPE tokenizer's tables: loaded only when this command runs.
  const { createGridWorld, startModelServer } = await import("../../compaction/testbed/index.js");
  const server = await startModelServer({ seed });
  let out = "";
  try {
    const model = createModelClient({ baseUrl: server.url, model: server.model, imagePlaceholderToken: server.imagePlaceholderToken });
    const result = await runAgent({ model, environment: createGridWorld({ seed }), compaction: { policy, schedule }, maxTurns: turns, rolloutId: `agent-demo-${seed}` });
    const e = result.evidence;
    const scheduleText = schedule.type === "rolling" ? "rolling" : `turn_chunked(${schedule.actionsPerChunk})`;
    const occurrences = e.calls.length ? e.calls[e.calls.length - 1].media.length : 0;
    out += `agent-demo: ${e.calls.length} calls, policy ${options.policy} (${policy.name}/${policy.version}), schedule ${scheduleText}, stop ${e.stop_reason}\n`;
    out += `media stored: ${e.media.length} images; the last request showed ${occurrences}\n\n`;
    out += `boundaries (${e.boundaries.length})\n`;
    const bw = [3, 12, 12, 18, 18, 8, 6, 12];
    out += pad(["#", "first call", "previous", "reason", "trigger", "items", "media", "omitted i/r"], bw);
    for (const b of e.boundaries) {
      out += pad([b.boundary, b.first_call, b.previous_call, b.reason, b.trigger, `${b.old_items}>${b.new_items}`, `${b.old_media}>${b.new_media}`, `${b.omitted.images}/${b.omitted.reasoning}`], bw);
    }
    const cf = await init({ backend });
    const plan = cf.plan(result.rollout);
    try {
      out += `\nrows (backend ${cf.backend})\n`;
      const rw = [4, 12, 26, 8, 8];
      out += pad(["row", "leaf", "calls", "tokens", "trained"], rw);
      for (const row of plan.rows) {
        const span = row.calls.length === 1 ? row.calls[0] : `${row.calls[0]} .. ${row.calls[row.calls.length - 1]} (${row.calls.length})`;
        out += pad([row.index, row.leaf, span, row.numTokens, ones(row.lossMask)], rw);
      }
      const r = plan.report;
      const roots = plan.forest.filter((c) => c.root).map((c) => c.id);
      out += `\nroots: ${roots.join(" ")}\n`;
      out += `report: ${r.status}${r.reason ? ` (${r.reason}: ${r.detail})` : ""}, calls ${r.calls}, roots ${r.roots}, rows ${r.rows}, captured ${r.captured_tokens}, trained ${r.trained_tokens}\n`;
    } finally {
      plan.release();
    }
  } finally {
    await server.close();
  }
  return out;
}
