// `callforest agent-demo`: runs a short compacted episode of the grid-world agent against the
// built-in deterministic model server, then prints the rewrite boundaries the controller recorded
// and the training rows the core plans from the evidence, with a legend for every column.
import { readFileSync } from "node:fs";
import type { Command } from "../vendor.js";
import type { GuardConfig, Policy, ScheduleConfig } from "../../compaction/index.js";
import { loadFeature } from "../../optional-dependency.js";
import { init } from "../../index.js";
import { UsageError } from "../errors.js";
import { countOf } from "../../messages.js";
import { addBackendOption, parseBackend, parseInteger } from "../inputs.js";

const POLICIES = ["identity", "images", "reasoning", "combined"] as const;
const SCHEDULES = ["rolling", "chunked"] as const;
/** `--guards` takes Gym's guard names. */
const GUARDS: Record<string, keyof GuardConfig> = {
  max_total_tokens: "maxTotalTokens",
  reserved_generation_tokens: "reserveGenerationTokens",
  max_active_images: "maxActiveImages",
  max_vision_tokens: "maxVisionTokens",
  projected_vision_tokens_per_image: "projectedVisionTokensPerImage",
};

export interface AgentDemoOptions {
  turns: string;
  /** Default combined; not with --config. */
  policy?: string;
  /** Default chunked; not with --config. */
  schedule?: string;
  /** Chunked schedule only; default 3. */
  actionsPerChunk?: string;
  /** Image groups the recency policy keeps (default 2). */
  keepImages?: string;
  /** Turns of reasoning the recency policy keeps (default 2). */
  keepReasoning?: string;
  /** `name=N,…` with Gym's guard names. */
  guards?: string;
  /** A Gym `context_history` block (YAML or JSON), instead of the options above. */
  config?: string;
  seed: string;
  backend: string;
}

export function register(program: Command): void {
  const command = program
    .command("agent-demo")
    .description(
      "Run a short compacted grid-world episode against the built-in model server; " +
        "print its boundaries and rows, with a legend.",
    )
    .option("--turns <n>", "model calls at most", "10")
    .option("--policy <name>", `compaction policy: ${POLICIES.join(", ")} (default: combined)`)
    .option("--schedule <name>", `schedule: ${SCHEDULES.join(", ")} (default: chunked)`)
    .option("--actions-per-chunk <n>", "actions per chunk under the chunked schedule (default: 3)")
    .option("--keep-images <n>", "image groups the recency policy keeps, newest first (default: 2)")
    .option("--keep-reasoning <n>", "turns of reasoning the recency policy keeps (default: 2)")
    .option("--guards <list>", `context guards, Gym's names: ${Object.keys(GUARDS).join("=N,")}=N (comma-separated)`)
    .option(
      "--config <file>",
      "a Gym context_history block (YAML or JSON, alone or in a Gym agent config) " +
        "instead of --policy/--schedule/--keep-*/--guards",
    )
    .option("--seed <n>", "seed of the model server and of the grid world's walls", "0");
  addBackendOption(command).action(async (options: AgentDemoOptions) => {
    process.stdout.write(await agentDemo(options));
  });
}

/** The agent runtime: loaded when the command runs (its packages are optional, see optional-dependency.ts). */
type Runtime = typeof import("../../compaction/index.js");

function policyFor(
  { identityPolicy, recencyPolicy }: Runtime,
  name: string,
  keepImages: number,
  keepReasoning: number,
): Policy {
  const images = { keepLastGroups: keepImages, protectInitialContext: true };
  const reasoning = { keepLastBlocks: keepReasoning, keepFirstBlock: false };
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

function parseGuards(text: string): GuardConfig {
  const guards: GuardConfig = {};
  for (const part of text.split(",")) {
    const [name, value, ...rest] = part.split("=");
    const key = GUARDS[name?.trim() ?? ""];
    if (!key || value === undefined || rest.length)
      throw new UsageError(`--guards: '${part}' is not NAME=N with NAME one of ${Object.keys(GUARDS).join(", ")}`);
    guards[key] = parseInteger(`--guards ${name}`, value.trim(), { min: 0 });
  }
  return guards;
}

interface Setup {
  label: string;
  policy: Policy;
  schedule: ScheduleConfig;
  guards?: GuardConfig;
}

function setupFrom(runtime: Runtime, options: AgentDemoOptions): Setup {
  const { parseContextHistory, rolling, turnChunked } = runtime;
  if (options.config !== undefined) {
    const others = (["policy", "schedule", "actionsPerChunk", "keepImages", "keepReasoning", "guards"] as const).filter(
      (k) => options[k] !== undefined,
    );
    if (others.length)
      throw new UsageError(
        `--config sets the whole context_history: drop --${others[0].replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`,
      );
    let text: string;
    try {
      text = readFileSync(options.config, "utf8");
    } catch (error) {
      throw new UsageError(
        `--config: cannot read ${options.config}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
      );
    }
    let parsed: ReturnType<typeof parseContextHistory>;
    try {
      parsed = parseContextHistory(text);
    } catch (error) {
      throw new UsageError(`--config ${options.config}: ${(error as Error).message}`);
    }
    const c = parsed.compaction;
    if (c === false)
      throw new UsageError(
        `--config ${options.config}: context_history.enabled is false (compaction off): set enabled: true`,
      );
    return { label: `from ${options.config}`, policy: c.policy, schedule: c.schedule, guards: c.guards };
  }
  const name = options.policy ?? "combined";
  const scheduleName = options.schedule ?? "chunked";
  const keepImages =
    options.keepImages === undefined ? 2 : parseInteger("--keep-images", options.keepImages, { min: 0 });
  const keepReasoning =
    options.keepReasoning === undefined ? 2 : parseInteger("--keep-reasoning", options.keepReasoning, { min: 0 });
  const policy = policyFor(runtime, name, keepImages, keepReasoning);
  if (!(SCHEDULES as readonly string[]).includes(scheduleName))
    throw new UsageError(`unknown --schedule '${scheduleName}': expected ${SCHEDULES.join(", ")}`);
  if (scheduleName === "rolling" && options.actionsPerChunk !== undefined) {
    throw new UsageError(
      "--actions-per-chunk applies to --schedule chunked only (rolling recomputes the view every call)",
    );
  }
  const actionsPerChunk =
    options.actionsPerChunk === undefined ? 3 : parseInteger("--actions-per-chunk", options.actionsPerChunk);
  const schedule = scheduleName === "rolling" ? rolling() : turnChunked(actionsPerChunk);
  return {
    label: name,
    policy,
    schedule,
    guards: options.guards === undefined ? undefined : parseGuards(options.guards),
  };
}

function pad(cells: (string | number)[], widths: number[]): string {
  return (
    "  " +
    cells
      .map((c, i) => String(c).padEnd(widths[i]))
      .join("  ")
      .trimEnd() +
    "\n"
  );
}

function ones(mask: Uint8Array): number {
  let n = 0;
  for (let b of mask) for (; b; b &= b - 1) n++;
  return n;
}

const BOUNDARY_LEGEND = [
  "#: boundary number; first call: the call sent with the rewritten context; previous: the call before it",
  "reason: why the context is not a continuation (history_rewritten: an image or reasoning was dropped or replaced)",
  "trigger: what recomputed the view (chunk_opened: a new chunk's base; rolling: every call; " +
    "guard_recompaction: a guard closed the chunk)",
  "items, media: request items and images shown, before > after; " +
    "omitted i/r: images / reasoning blocks the new view leaves out",
];
const ROW_LEGEND = [
  "row: training row; leaf: its last call; calls: the calls its tokens come from, root first",
  "tokens: the row's length; trained: its tokens with loss mask 1, the sampled tokens of the calls it trains",
  "(a call's tokens are trained in exactly one row; earlier calls of the path are context there, loss mask 0)",
];

/** Runs the demo and returns what it prints. */
export async function agentDemo(options: AgentDemoOptions): Promise<string> {
  const turns = parseInteger("--turns", options.turns);
  const seed = parseInteger("--seed", options.seed, { min: 0 });
  const backend = parseBackend(options.backend);
  const [runtime, { createGridWorld, startModelServer }] = await loadFeature(
    "the compaction test bed (callforest/compaction/testbed)",
    () => Promise.all([import("../../compaction/index.js"), import("../../compaction/testbed/index.js")]),
  );
  const { createModelClient, runAgent } = runtime;
  const { label, policy, schedule, guards } = setupFrom(runtime, options);

  const server = await startModelServer({ seed });
  let out = "";
  try {
    const model = createModelClient({
      baseUrl: server.url,
      model: server.model,
      imagePlaceholderToken: server.imagePlaceholderToken,
    });
    const compaction = { policy, schedule, ...(guards ? { guards } : {}) };
    const result = await runAgent({
      model,
      environment: createGridWorld({ seed }),
      compaction,
      maxTurns: turns,
      rolloutId: `agent-demo-${seed}`,
    });
    const e = result.evidence;
    const scheduleText = schedule.type === "rolling" ? "rolling" : `turn_chunked(${schedule.actionsPerChunk})`;
    const gymName = (key: string) => Object.keys(GUARDS).find((name) => GUARDS[name] === key) ?? key;
    const guardText = guards
      ? `, guards ${Object.entries(guards)
          .map(([k, v]) => `${gymName(k)}=${v}`)
          .join(",")}`
      : "";
    const last = e.calls[e.calls.length - 1];
    out +=
      `agent-demo: ${e.calls.length} calls, policy ${label} (${policy.name}/${policy.version}), ` +
      `schedule ${scheduleText}${guardText}, stop ${e.stop_reason}\n`;
    out +=
      `images: ${countOf(e.media.length, "distinct image")} stored, each once by content; ` +
      `the last request showed ${countOf(last?.media.length ?? 0, "image")} ` +
      `(a repeated image counts each time it is shown)\n\n`;
    out += `boundaries (${e.boundaries.length}): where a rewrite starts a new context\n`;
    const bw = [3, 12, 12, 18, 18, 8, 6, 12];
    out += pad(["#", "first call", "previous", "reason", "trigger", "items", "media", "omitted i/r"], bw);
    for (const b of e.boundaries) {
      out += pad(
        [
          b.boundary,
          b.first_call,
          b.previous_call,
          b.reason,
          b.trigger,
          `${b.old_items}>${b.new_items}`,
          `${b.old_media}>${b.new_media}`,
          `${b.omitted.images}/${b.omitted.reasoning}`,
        ],
        bw,
      );
    }
    if (e.boundaries.length) out += BOUNDARY_LEGEND.map((l) => `  ${l}\n`).join("");
    const rejected = e.guards.filter((g) => g.outcome !== "admit");
    if (rejected.length)
      out += `\nguards: ${rejected
        .map(
          (g) =>
            `${g.call_id} ${g.outcome} (${g.rounds[0].checks
              .filter((c) => !c.ok)
              .map((c) => `${c.guard} ${c.measured}>${c.limit}`)
              .join(", ")})`,
        )
        .join("; ")}\n`;
    const cf = await init({ backend });
    const plan = cf.plan(result.rollout);
    try {
      out += `\nrows (backend ${cf.backend})\n`;
      const rw = [4, 12, 26, 8, 8];
      out += pad(["row", "leaf", "calls", "tokens", "trained"], rw);
      for (const row of plan.rows) {
        const span =
          row.calls.length === 1
            ? row.calls[0]
            : `${row.calls[0]} .. ${row.calls[row.calls.length - 1]} (${row.calls.length})`;
        out += pad([row.index, row.leaf, span, row.numTokens, ones(row.lossMask)], rw);
      }
      out += ROW_LEGEND.map((l) => `  ${l}\n`).join("");
      const r = plan.report;
      const roots = plan.forest.filter((c) => c.root).map((c) => c.id);
      out += `\nroots: ${roots.join(" ")}\n`;
      out +=
        `report: ${r.status}${r.reason ? ` (${r.reason}: ${r.detail})` : ""}, ` +
        `calls ${r.calls}, roots ${r.roots}, rows ${r.rows}, ` +
        `captured ${r.captured_tokens}, trained ${r.trained_tokens}\n`;
      const once = r.status === "ok" && r.trained_tokens === r.captured_tokens;
      out +=
        `${once ? "every sampled token trained exactly once" : "NOT every sampled token trained exactly once"}: ` +
        `${r.trained_tokens} of ${r.captured_tokens}\n`;
    } finally {
      plan.release();
    }
  } finally {
    await server.close();
  }
  return out;
}
