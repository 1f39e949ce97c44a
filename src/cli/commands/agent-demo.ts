// `callforest agent-demo`: runs a short compacted episode of the grid-world agent against the
// built-in deterministic model server, then prints the rewrite boundaries the controller recorded
// and the training rows the core plans from the evidence, with a legend for every column. With a
// Gym agent config that names a dataset, each dataset row runs as Gym's `/run` runs it, through
// the test bed's resources server, and its output envelope is read back as `rows --from
// gym-compaction` reads it.
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { Command } from "../vendor.js";
import type { GuardConfig, GymRunBody, Policy, RunAgentResult, ScheduleConfig } from "../../compaction/index.js";
import { loadFeature } from "../../optional-dependency.js";
import { fromGymCompaction } from "../../formats/gym-compaction.js";
import { init, type Callforest, type Rollout } from "../../index.js";
import { UsageError } from "../errors.js";
import { withSinks } from "../../ingest/sink.js";
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
  /** Model calls at most; when absent, the --config's `max_steps`, else 10. */
  turns?: string;
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
  /**
   * A Gym `context_history` block (YAML or JSON), instead of the options above; a whole Gym agent
   * config may also name a dataset (`datasets[].jsonl_fpath`), whose rows then run.
   */
  config?: string;
  /** Dataset mode: write each row's `/run` answer (its response the transport envelope) here, as JSONL. */
  envelope?: string;
  /** Dataset mode: write the runtime's own rollouts (callforest's canonical JSON) here, as JSONL. */
  rollouts?: string;
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
    .option("--turns <n>", "model calls at most (default: the --config agent's max_steps, else 10; --turns wins)")
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
    .option(
      "--envelope <file>",
      "with a --config that names a dataset: write each row's /run answer (Gym's envelope) as JSONL",
    )
    .option(
      "--rollouts <file>",
      "with a --config that names a dataset: write the runtime's own rollouts (canonical JSON) as JSONL",
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
  /** The --config agent's `max_steps` (null: none, or Gym's 0 for no limit). */
  maxSteps?: number | null;
  policy: Policy;
  schedule: ScheduleConfig;
  guards?: GuardConfig;
  /** The dataset a Gym agent config names (its first with a `jsonl_fpath`), resolved from the config's folder. */
  dataset?: string;
}

/** A dataset's rows: Gym run bodies, one JSON object a line; a bad line is a usage error naming it. */
function datasetRows(path: string): GymRunBody[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new UsageError(`dataset ${path}: cannot read it: ${(error as NodeJS.ErrnoException).code ?? error}`);
  }
  const rows: GymRunBody[] = [];
  text.split("\n").forEach((line, i) => {
    if (!line.trim()) return;
    let row: unknown;
    try {
      row = JSON.parse(line);
    } catch {
      throw new UsageError(`dataset ${path}:${i + 1}: not JSON`);
    }
    const params = (row as { responses_create_params?: unknown } | null)?.responses_create_params;
    if (typeof params !== "object" || params === null || Array.isArray(params))
      throw new UsageError(`dataset ${path}:${i + 1}: a row needs a responses_create_params object`);
    rows.push(row as GymRunBody);
  });
  if (!rows.length) throw new UsageError(`dataset ${path}: no rows`);
  return rows;
}

function setupFrom(runtime: Runtime, options: AgentDemoOptions): Setup {
  const { datasetPathOf, maxStepsOf, parseContextHistory, rolling, turnChunked } = runtime;
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
    const dataset = datasetPathOf(text);
    let maxSteps: number | null;
    try {
      maxSteps = maxStepsOf(text);
    } catch (error) {
      throw new UsageError(`--config ${options.config}: ${(error as Error).message}`);
    }
    return {
      label: `from ${options.config}`,
      maxSteps,
      policy: c.policy,
      schedule: c.schedule,
      guards: c.guards,
      ...(dataset !== undefined ? { dataset: resolve(dirname(options.config), dataset) } : {}),
    };
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

/** The episode's boundaries, guard trips, rows and the invariant, as the demo prints them. */
function describeEpisode(result: RunAgentResult, cf: Callforest): string {
  const e = result.evidence;
  let out = "";
  const last = e.calls[e.calls.length - 1];
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
  return out;
}

/** A rollout's rows as what training reads: tokens, logprobs, loss mask and reward (ids aside). */
function trainingRows(cf: Callforest, rollout: Rollout): string {
  const plan = cf.plan(rollout);
  try {
    return JSON.stringify(
      plan.rows.map((r) => [Array.from(r.tokenIds), Array.from(r.logprobs), Array.from(r.lossMask), r.reward]),
    );
  } finally {
    plan.release();
  }
}

function setupText(setup: Setup, stop: string): string {
  const { label, policy, schedule, guards } = setup;
  const scheduleText = schedule.type === "rolling" ? "rolling" : `turn_chunked(${schedule.actionsPerChunk})`;
  const gymName = (key: string) => Object.keys(GUARDS).find((name) => GUARDS[name] === key) ?? key;
  const guardText = guards
    ? `, guards ${Object.entries(guards)
        .map(([k, v]) => `${gymName(k)}=${v}`)
        .join(",")}`
    : "";
  return `policy ${label} (${policy.name}/${policy.version}), schedule ${scheduleText}${guardText}, stop ${stop}`;
}

/** Runs the demo and returns what it prints. */
export async function agentDemo(options: AgentDemoOptions): Promise<string> {
  const seed = parseInteger("--seed", options.seed, { min: 0 });
  const backend = parseBackend(options.backend);
  const [runtime, { createGridWorld, startGridWorldResources, startModelServer }] = await loadFeature(
    "the compaction test bed (callforest/compaction/testbed)",
    () => Promise.all([import("../../compaction/index.js"), import("../../compaction/testbed/index.js")]),
  );
  const { createModelClient, createResourcesServer, jsonObservation, runAgent } = runtime;
  const setup = setupFrom(runtime, options);
  // Gym's max_steps bounds the model calls as --turns does; a --turns given says otherwise.
  const turns = options.turns === undefined ? (setup.maxSteps ?? 10) : parseInteger("--turns", options.turns);
  if (setup.dataset === undefined)
    for (const flag of ["envelope", "rollouts"] as const)
      if (options[flag] !== undefined)
        throw new UsageError(`--${flag} needs a --config that names a dataset (datasets[].jsonl_fpath)`);
  const rows = setup.dataset === undefined ? null : datasetRows(setup.dataset);
  const { policy, schedule, guards } = setup;
  const compaction = { policy, schedule, ...(guards ? { guards } : {}) };

  const server = await startModelServer({ seed });
  const cf = await init({ backend });
  const model = createModelClient({
    baseUrl: server.url,
    model: server.model,
    imagePlaceholderToken: server.imagePlaceholderToken,
  });
  try {
    if (rows === null) {
      const result = await runAgent({
        model,
        environment: createGridWorld({ seed }),
        compaction,
        maxTurns: turns,
        rolloutId: `agent-demo-${seed}`,
      });
      const e = result.evidence;
      return `agent-demo: ${e.calls.length} calls, ${setupText(setup, e.stop_reason)}\n` + describeEpisode(result, cf);
    }
    // Each dataset row as Gym's /run: seed, tools, /verify, through the test bed's resources server.
    const resources = await startGridWorldResources();
    let out = `agent-demo: ${countOf(rows.length, "dataset row")} of ${setup.dataset}, ${setupText(setup, "per row")}\n`;
    const envelopes: string[] = [];
    const rollouts: string[] = [];
    try {
      for (const [i, row] of rows.entries()) {
        // Gym's collector stamps the task and rollout index on each row it runs.
        const runBody = { _ng_task_index: i, _ng_rollout_index: 0, ...row };
        const result = await runAgent({
          model,
          resources: { server: createResourcesServer({ baseUrl: resources.url }), runBody, observe: jsonObservation },
          compaction,
          maxTurns: turns,
        });
        const e = result.evidence;
        const input = row.responses_create_params.input;
        out +=
          `\nrow ${i}: rollout ${e.rollout_id}, ${countOf(Array.isArray(input) ? input.length : 1, "input item")}, ` +
          `${countOf(e.calls.length, "call")}, stop ${e.stop_reason}, reward ${e.reward}\n`;
        out += describeEpisode(result, cf);
        // What a trainer reading Gym's envelope gets: the same rows as the runtime's own rollout.
        const readBack = fromGymCompaction(JSON.parse(JSON.stringify(result.row)), {}).rollout;
        const same = trainingRows(cf, readBack) === trainingRows(cf, result.rollout);
        out += `envelope read back as rows --from gym-compaction reads it: ${same ? "the same rows" : "DIFFERENT rows"}\n`;
        envelopes.push(JSON.stringify(result.row));
        rollouts.push(JSON.stringify(result.rollout));
      }
    } finally {
      await resources.close();
    }
    // Written whole or not at all, both or neither, as `rows` writes its outputs.
    await withSinks([options.envelope ?? null, options.rollouts ?? null], async ([envelope, rollout]) => {
      await envelope?.write(envelopes.map((line) => `${line}\n`).join(""));
      await rollout?.write(rollouts.map((line) => `${line}\n`).join(""));
    });
    return out;
  } finally {
    await server.close();
  }
}
