// plan()'s fast path for the common call: typed arrays and nothing but tokens. Runs of such calls
// are copied into the core back to back and linked in one call into it (ForestCore.stageCalls,
// commitStaged), where one call at a time would cost a small rollout more in crossings and
// bookkeeping than its linking does. Everything else — plain arrays, media, routes, versions, any
// call that is not well formed — goes through the one-call path (`one`), and so does the whole
// rollout again when a run holds a call that fails: its rejection is then the one-call path's, word
// for word.
import type { RolloutAssembler } from "./assembler.js";
import { isDetached, isRecord } from "./validate.js";
import { MAX_CALL_TOKENS, STAGED_CALL_INTS, STAGED_RESULT_INTS } from "../core/types.js";

/** A run holds calls of this many tokens at most (or one call), so staging stays small. */
export const RUN_TOKENS = 1 << 16;

interface PlainCall {
  id: string;
  agent: string;
  kept: boolean;
  prompt: Int32Array;
  generation: Int32Array;
  logprobs: Float32Array;
}

const absent = (value: unknown) => value === undefined || value === null;

/** A typed array that reads as empty because its buffer was detached is not plain: see validate.ts. */
const live = (array: Int32Array | Float32Array) => array.length > 0 || !isDetached(array);

/** The call if it is well formed with typed arrays and nothing but tokens (no media, routes, versions). */
function plainCall(call: unknown): PlainCall | null {
  if (!isRecord(call)) return null;
  const { id, agent, kept, prompt_token_ids: prompt, generation_token_ids: generation } = call;
  const logprobs = call.generation_log_probs;
  if (typeof id !== "string" || id === "") return null;
  if (agent !== undefined && typeof agent !== "string") return null;
  if (kept !== undefined && typeof kept !== "boolean") return null;
  if (!(prompt instanceof Int32Array && generation instanceof Int32Array && logprobs instanceof Float32Array))
    return null;
  if (logprobs.length !== generation.length || prompt.length + generation.length > MAX_CALL_TOKENS) return null;
  if (!live(prompt) || !live(generation) || !live(logprobs)) return null;
  if (!absent(call.media) || !absent(call.routed_experts) || !absent(call.weight_version)) return null;
  return { id, agent: agent ?? "", kept: kept !== false, prompt, generation, logprobs };
}

/**
 * Feeds every call to the assembler, runs of plain calls many at once and the others through
 * `one(i)`, which returns false once it rejected the rollout (then nothing more is fed).
 * "done": the assembler is ready to finish (with its rejection, if any). "replan": a run could
 * not be recorded (a call of it failed in the core, an agent not listed, an id used twice), so
 * the caller plans the rollout again, call by call, on a fresh assembler, for the one-call path's
 * rejection.
 */
export function assembleStaged(
  assembler: RolloutAssembler,
  calls: readonly unknown[],
  one: (index: number) => boolean,
): "done" | "replan" {
  const run: PlainCall[] = [];
  const agents: number[] = [];
  let i = 0;
  while (i < calls.length) {
    if (assembler.rejected) return "done";
    run.length = 0;
    agents.length = 0;
    let tokens = 0;
    let logprobs = 0;
    while (i < calls.length && assembler.takesPlainCalls) {
      const call = plainCall(calls[i]);
      if (call === null) break;
      const size = call.prompt.length + call.generation.length;
      if (run.length > 0 && tokens + size > RUN_TOKENS) break;
      // An agent not listed (or an id used before: see recordStaged): the one-call path says
      // which call and why.
      const agent = assembler.agentFor(call.agent);
      if (agent === null) return "replan";
      run.push(call);
      agents.push(agent);
      tokens += size;
      logprobs += call.generation.length;
      i++;
    }
    if (run.length === 0) {
      if (!one(i)) return "done";
      i++;
      continue;
    }
    if (!commitRun(assembler, run, agents, tokens, logprobs)) return "replan";
  }
  return "done";
}

/**
 * Call `k`'s row of a staged table (assembly/batch.ts B_CALL): its lengths, agent, and whether it
 * is linked (kept, with a generation: SPEC's eligible calls).
 */
export function writeStagedCall(
  table: Int32Array,
  k: number,
  promptLength: number,
  generationLength: number,
  agent: number,
  kept: boolean,
): void {
  const at = STAGED_CALL_INTS * k;
  table[at] = promptLength;
  table[at + 1] = generationLength;
  table[at + 2] = agent;
  table[at + 3] = kept && generationLength > 0 ? 1 : 0;
}

/** Stages a run, links it, and records its calls; false when a call of it failed. */
function commitRun(
  assembler: RolloutAssembler,
  run: PlainCall[],
  agents: number[],
  tokens: number,
  logprobs: number,
): boolean {
  const staged = assembler.stageCalls(run.length, tokens, logprobs);
  let t = 0;
  let l = 0;
  for (let k = 0; k < run.length; k++) {
    const { prompt, generation } = run[k];
    writeStagedCall(staged.table, k, prompt.length, generation.length, agents[k], run[k].kept);
    staged.tokens.set(prompt, t);
    staged.tokens.set(generation, t + prompt.length);
    staged.logprobs.set(run[k].logprobs, l);
    t += prompt.length + generation.length;
    l += generation.length;
  }
  const { failed, results } = assembler.commitStaged(run.length);
  if (failed >= 0) return false;
  for (let k = 0; k < run.length; k++) {
    const call = run[k]; // (its id, agent and kept are its CallIdentity: no media, routes or versions)
    if (!assembler.recordStaged(call, call.prompt.length, call.generation.length, results, STAGED_RESULT_INTS * k))
      return false;
  }
  return true;
}
