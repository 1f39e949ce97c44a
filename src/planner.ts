// Plans one rollout on a core: checks the metadata, stages each call's arrays into the core
// (checking values as they are copied), and turns the core's forest into rows and a report.
// Shared by both backends, so they differ only in the core.
import { Rejection, callLabel, describeValue } from "./rejection.js";
import { checkCallShape, checkHeader, rolloutIdOf, type CallShape } from "./validate.js";
import { CoreMemoryError } from "./core/wasm-core.js";
import {
  AMBIGUOUS_PARENT,
  INVALID_LOGPROB,
  INVALID_TOKEN,
  type CoreFactory,
  type CoreForest,
  type ForestCore,
} from "./core/types.js";
import type { AgentInfo, Diagnostic, ForestCall, Logprobs, Plan, PlanOptions, Report, Row, TokenIds } from "./types.js";

/** Copies token IDs into a core; returns the index of the first invalid plain-array value, or -1. */
function copyTokens(source: TokenIds, dest: Int32Array, at: number): number {
  if (source instanceof Int32Array) {
    dest.set(source, at); // negatives are found by the core
    return -1;
  }
  for (let i = 0; i < source.length; i++) {
    const value = source[i];
    // (v | 0) === v holds exactly for numbers that are integers in [-2^31, 2^31-1].
    if ((value | 0) !== value || value < 0) return i;
    dest[at + i] = value;
  }
  return -1;
}

/** Copies logprobs (rounded to float32); returns the index of the first non-number, or -1. */
function copyLogprobs(source: Logprobs, dest: Float32Array): number {
  if (!Array.isArray(source)) {
    dest.set(source as Float32Array | Float64Array); // non-finite values are found by the core
    return -1;
  }
  for (let i = 0; i < source.length; i++) {
    const value = source[i];
    if (typeof value !== "number") return i;
    dest[i] = value;
  }
  return -1;
}

const TOKEN_RULE = "not an integer in [0, 2^31-1]";

function badToken(where: string, shape: CallShape, index: number): Rejection {
  const inPrompt = index < shape.prompt.length;
  const field = inPrompt ? "prompt_token_ids" : "generation_token_ids";
  const at = inPrompt ? index : index - shape.prompt.length;
  const value = (inPrompt ? shape.prompt : shape.generation)[at];
  return new Rejection("invalid_token", `${where}: ${field}[${at}] is ${describeValue(value)}, ${TOKEN_RULE}`);
}

function badLogprob(where: string, shape: CallShape, index: number): Rejection {
  const value = shape.logprobs[index];
  const why = typeof value === "number" && Number.isFinite(value) ? "overflows float32" : "is not a finite number";
  return new Rejection("invalid_logprob", `${where}: generation_log_probs[${index}] = ${describeValue(value)} ${why}`);
}

interface Staged {
  shapes: CallShape[];
  /** Call index (ledger position) of each eligible call. */
  eligible: number[];
  diagnostics: Diagnostic[];
}

/** Stages and commits every call; returns what the core now holds, or the first problem. */
function stageCalls(core: ForestCore, calls: unknown[], agentOf: (shape: CallShape, where: string) => number | Rejection): Staged | Rejection {
  const shapes: CallShape[] = [];
  const eligible: number[] = [];
  const diagnostics: Diagnostic[] = [];
  const seen = new Map<string, number>();
  for (let i = 0; i < calls.length; i++) {
    const shape = checkCallShape(calls[i], i);
    if (shape instanceof Rejection) return shape;
    const where = callLabel(calls[i], i);
    const earlier = seen.get(shape.id);
    if (earlier !== undefined) return new Rejection("duplicate_call_id", `${where}: id already used by calls[${earlier}]`);
    seen.set(shape.id, i);
    const agent = agentOf(shape, where);
    if (agent instanceof Rejection) return agent;

    const prompt = shape.prompt.length;
    const generated = shape.generation.length;
    const staged = core.stage(prompt, generated);
    let bad = copyTokens(shape.prompt, staged.tokens, 0);
    if (bad >= 0) return badToken(where, shape, bad);
    bad = copyTokens(shape.generation, staged.tokens, prompt);
    if (bad >= 0) return badToken(where, shape, prompt + bad);
    if (shape.logprobs.length !== generated) {
      bad = core.checkStagedTokens(prompt + generated);
      if (bad >= 0) return badToken(where, shape, bad);
      return new Rejection(
        "logprob_length_mismatch",
        `${where}: ${shape.logprobs.length} generation_log_probs for ${generated} generated tokens`,
      );
    }
    bad = copyLogprobs(shape.logprobs, staged.logprobs);
    if (bad >= 0) return badLogprob(where, shape, bad);

    const isEligible = shape.kept && generated > 0;
    const result = core.commit(prompt, generated, agent, isEligible);
    if (result === INVALID_TOKEN) return badToken(where, shape, core.lastBadIndex());
    if (result === INVALID_LOGPROB) return badLogprob(where, shape, core.lastBadIndex());
    if (result === AMBIGUOUS_PARENT) {
      const tied = core.ambiguousCandidates().map((e) => JSON.stringify(shapes[eligible[e]].id));
      return new Rejection(
        "ambiguous_parent",
        `${where}: earlier calls ${tied.join(" and ")} have identical full sequences and neither is in its agent or its parent agent`,
      );
    }
    shapes.push(shape);
    if (isEligible) eligible.push(i);
    if (shape.kept && generated === 0) diagnostics.push({ code: "empty_generation", call: shape.id });
  }
  if (eligible.length === 0) {
    return new Rejection("no_trainable_calls", `none of the ${calls.length} calls is kept with generated tokens`);
  }
  return { shapes, eligible, diagnostics };
}

function emptyReport(rolloutId: string | null, calls: number, options: PlanOptions): Report {
  const report: Report = {
    rollout_id: rolloutId,
    status: "ok",
    calls,
    eligible: 0,
    roots: 0,
    leaves: 0,
    rows: 0,
    captured_tokens: 0,
    trained_tokens: 0,
    row_tokens: 0,
    unique_tokens: 0,
    diagnostics: [],
  };
  if (options.line !== undefined) report.line = options.line;
  return report;
}

function rejectedPlan(input: unknown, rejection: Rejection, agents: AgentInfo[], options: PlanOptions): Plan {
  const calls = (input as { calls?: unknown } | null)?.calls;
  const report = emptyReport(rolloutIdOf(input), Array.isArray(calls) ? calls.length : 0, options);
  report.status = "rejected";
  report.reason = rejection.code;
  report.detail = rejection.detail;
  return { report, rows: [], forest: [], agents, release() {} };
}

function buildPlan(
  header: { rolloutId: string; reward: number; agents: AgentInfo[] | null; calls: unknown[] },
  staged: Staged,
  forest: CoreForest,
  core: ForestCore,
  options: PlanOptions,
): Plan {
  const { shapes, eligible, diagnostics } = staged;
  const idOf = (e: number) => shapes[eligible[e]].id;
  const report = emptyReport(header.rolloutId, header.calls.length, options);
  report.eligible = eligible.length;
  report.diagnostics = diagnostics;

  const children: string[][] = eligible.map(() => []);
  for (let e = 0; e < eligible.length; e++) {
    const shape = shapes[eligible[e]];
    const p = forest.parents[e];
    const full = shape.prompt.length + shape.generation.length;
    report.captured_tokens += shape.generation.length;
    if (p < 0) {
      report.roots++;
      report.unique_tokens += full;
    } else {
      const parent = shapes[eligible[p]];
      report.unique_tokens += full - parent.prompt.length - parent.generation.length;
      children[p].push(shape.id);
    }
  }

  const rows: Row[] = forest.rows.map((core, index) => {
    const calls: string[] = [];
    const trained: string[] = [];
    const context: string[] = [];
    for (const e of core.path) {
      calls.push(idOf(e));
      if (forest.ownerRows[e] === index) {
        trained.push(idOf(e));
        report.trained_tokens += shapes[eligible[e]].generation.length;
      } else {
        context.push(idOf(e));
      }
    }
    report.row_tokens += core.tokenIds.length;
    const leaf = shapes[eligible[core.leaf]];
    return {
      index,
      rolloutId: header.rolloutId,
      leaf: leaf.id,
      agent: leaf.agent,
      calls,
      trained,
      context,
      reward: header.reward,
      numTokens: core.tokenIds.length,
      tokenIds: core.tokenIds,
      logprobs: core.logprobs,
      lossMask: core.lossMask,
    };
  });
  report.leaves = rows.length;
  report.rows = rows.length;

  const eligibleIndex = new Map<number, number>(eligible.map((callIndex, e) => [callIndex, e]));
  const forestCalls: ForestCall[] = shapes.map((shape, index) => {
    const e = eligibleIndex.get(index);
    const parent = e === undefined ? -1 : forest.parents[e];
    return {
      id: shape.id,
      agent: shape.agent,
      index,
      kept: shape.kept,
      eligible: e !== undefined,
      promptLength: shape.prompt.length,
      generationLength: shape.generation.length,
      parent: parent >= 0 ? idOf(parent) : null,
      children: e === undefined ? [] : children[e],
      root: e !== undefined && parent < 0,
      leaf: e !== undefined && children[e].length === 0,
      ownerRow: e === undefined ? -1 : forest.ownerRows[e],
    };
  });

  let released = false;
  return {
    report,
    rows,
    forest: forestCalls,
    agents: header.agents ?? [],
    release() {
      if (released) return;
      released = true;
      core.release();
    },
  };
}

function isOutOfMemory(error: unknown): boolean {
  return (
    error instanceof CoreMemoryError ||
    error instanceof RangeError ||
    (typeof WebAssembly !== "undefined" && error instanceof WebAssembly.RuntimeError)
  );
}

/** Plans one canonical rollout on a core from `makeCore`. Never throws for bad input. */
export function planRollout(makeCore: CoreFactory, input: unknown, options: PlanOptions = {}): Plan {
  const header = checkHeader(input);
  if (header instanceof Rejection) return rejectedPlan(input, header, [], options);
  const agents = header.agents ?? [];

  // Agent indices: the listed agents in order; without a list, each agent name on first sight.
  const agentIndex = new Map<string, number>(agents.map((a, i) => [a.id, i]));
  const agentParents = new Int32Array(header.agents ? agents.length : header.calls.length).fill(-1);
  agents.forEach((a, i) => {
    if (a.parent !== null) agentParents[i] = agentIndex.get(a.parent)!;
  });
  const agentOf = (shape: CallShape, where: string): number | Rejection => {
    const known = agentIndex.get(shape.agent);
    if (known !== undefined) return known;
    if (header.agents) {
      return new Rejection("unknown_agent", `${where}: agent ${JSON.stringify(shape.agent)} is not in agents`);
    }
    agentIndex.set(shape.agent, agentIndex.size);
    return agentIndex.size - 1;
  };

  let generatedHint = 0;
  for (const call of header.calls) {
    const generation = (call as { generation_token_ids?: { length?: unknown } } | null)?.generation_token_ids;
    if (typeof generation?.length === "number") generatedHint += generation.length;
  }

  const core = makeCore();
  try {
    core.begin(agentParents, header.calls.length, generatedHint);
    const staged = stageCalls(core, header.calls, agentOf);
    if (staged instanceof Rejection) {
      core.release();
      return rejectedPlan(input, staged, agents, options);
    }
    return buildPlan(header, staged, core.finish(), core, options);
  } catch (error) {
    if (!isOutOfMemory(error)) throw error;
    core.release(false);
    const message = error instanceof Error ? error.message : String(error);
    return rejectedPlan(
      input,
      new Rejection("rollout_too_large", `the rollout does not fit in one core's memory (${message})`),
      agents,
      options,
    );
  }
}
