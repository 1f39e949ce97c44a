// plan(): a canonical rollout object in, a Plan out. Checks the metadata, copies each call's
// arrays into the core (checking plain-array values as it copies) — or, on a core that reads them
// in place (the TS one), hands it the typed arrays — and lets the assembler link.
import { callLabel } from "../messages.js";
import { Rejection } from "./rejection.js";
import {
  checkCallShape,
  checkHeader,
  checkPlanOptions,
  isTokenArray,
  rolloutIdOf,
  type CallShape,
} from "./validate.js";
import {
  RolloutAssembler,
  type CallIdentity,
  invalidLogprob,
  invalidToken,
  isOutOfMemory,
  planOfRejection,
  tooLargeRejection,
} from "./assembler.js";
import { MAX_CALL_TOKENS, type CoreFactory, type SizeHints } from "../core/types.js";
import { assembleStaged } from "./staged-calls.js";
import { CoreMemoryError } from "../core/errors.js";
import type { Logprobs, Plan, PlanOptions, TokenIds } from "../types.js";

/** Copies token IDs into the core; returns the index of the first invalid plain-array value, or -1. */
function copyTokens(source: TokenIds, dest: Int32Array, at: number): number {
  if (source instanceof Int32Array) {
    dest.set(source, at); // negatives are found by the core
    return -1;
  }
  for (let i = 0; i < source.length; i++) {
    const value: unknown = source[i];
    // (v | 0) === v holds exactly for numbers that are integers in [-2^31, 2^31-1] (and `|`
    // would throw on a BigInt or a Symbol, hence the typeof first).
    if (typeof value !== "number" || (value | 0) !== value || value < 0) return i;
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

/** Sizes for the core to reserve up front, from the calls' token arrays (other values: none). */
function sizeHints(calls: unknown[]): SizeHints {
  let generated = 0;
  let longestCall = 0;
  let longestLinked = 0;
  let withArrays = 0; // (not calls.length: ten million nulls must not reserve room for as many calls)
  for (const call of calls) {
    const prompt = (call as { prompt_token_ids?: unknown } | null)?.prompt_token_ids;
    const generation = (call as { generation_token_ids?: unknown } | null)?.generation_token_ids;
    if (!isTokenArray(prompt) || !isTokenArray(generation)) continue;
    withArrays++;
    generated += generation.length;
    longestCall = Math.max(longestCall, prompt.length + generation.length);
    const kept = (call as { kept?: unknown }).kept !== false;
    if (kept && generation.length > 0) longestLinked = Math.max(longestLinked, prompt.length + generation.length);
  }
  return { calls: withArrays, generated, longestCall, longestLinked };
}

/** invalid_token for the combined index `index` into prompt ++ generation. */
function badToken(call: unknown, callIndex: number, shape: CallShape, index: number): Rejection {
  const promptLength = shape.prompt.length;
  const value = index < promptLength ? shape.prompt[index] : shape.generation[index - promptLength];
  return invalidToken(callLabel(call, callIndex), index, promptLength, value);
}

/** The first of two indices where -1 means none. */
function firstOf(a: number, b: number): number {
  return a < 0 ? b : b < 0 ? a : Math.min(a, b);
}

/** Feeds every call to the assembler, stopping at the first problem. */
function assembleCalls(assembler: RolloutAssembler, calls: unknown[]): void {
  for (let i = 0; i < calls.length; i++) if (!assembleCall(assembler, calls, i)) return;
}

/** Feeds calls[i] to the assembler; false at a problem (the rollout is rejected). */
function assembleCall(assembler: RolloutAssembler, calls: unknown[], i: number): boolean {
  const shape = checkCallShape(calls[i], i);
  if (shape instanceof Rejection) return rejectWith(assembler, shape);
  const agent = assembler.identify(shape.id, shape.agent);
  if (agent === null) return false;
  // Checked now, rejected after the values (SPEC's order): see rejectAfterValues.
  const { problem, media, routedExperts, weightVersion } = assembler.readExtras(
    shape.media,
    shape.routedExperts,
    shape.weightVersion,
    shape.kept,
    shape.prompt.length,
    shape.generation.length,
  );
  const identity: CallIdentity = {
    id: shape.id,
    agent: shape.agent,
    kept: shape.kept,
    media,
    routedExperts,
    weightVersion,
  };

  // A JS core reads typed arrays where they are (no copy); anything else is copied in (and so
  // is a call with bad media or experts: its values are checked first, on the staged copy).
  const { prompt, generation, logprobs } = shape;
  if (
    assembler.readsArrays &&
    problem === null &&
    prompt instanceof Int32Array &&
    generation instanceof Int32Array &&
    logprobs instanceof Float32Array &&
    logprobs.length === generation.length
  ) {
    return assembler.commitArrays(identity, agent, { prompt, generation, logprobs });
  }
  const promptLength = shape.prompt.length;
  const generationLength = shape.generation.length;
  const staged = assembler.stage(promptLength, generationLength);
  let bad = copyTokens(shape.prompt, staged.tokens, 0);
  if (bad < 0) {
    bad = copyTokens(shape.generation, staged.tokens, promptLength);
    // A typed prompt's negatives are not checked while copying: one of them comes first.
    if (bad >= 0)
      bad =
        shape.prompt instanceof Int32Array
          ? firstOf(assembler.checkStagedTokens(promptLength), promptLength + bad)
          : promptLength + bad;
  }
  if (bad >= 0) return rejectWith(assembler, badToken(calls[i], i, shape, bad));
  if (shape.logprobs.length !== generationLength) {
    // SPEC's order: a bad token outranks the count mismatch.
    bad = assembler.checkStagedTokens();
    if (bad >= 0) return rejectWith(assembler, badToken(calls[i], i, shape, bad));
    return rejectWith(
      assembler,
      new Rejection(
        "logprob_length_mismatch",
        `${callLabel(calls[i], i)}: ${shape.logprobs.length} generation_log_probs ` +
          `for ${generationLength} generated tokens`,
      ),
    );
  }
  bad = copyLogprobs(shape.logprobs, staged.logprobs);
  if (bad >= 0) {
    // SPEC's order: a bad token (in a typed array, found by the core) outranks a bad logprob.
    const badTokenAt = assembler.checkStagedTokens();
    if (badTokenAt >= 0) return rejectWith(assembler, badToken(calls[i], i, shape, badTokenAt));
    return rejectWith(assembler, invalidLogprob(callLabel(calls[i], i), bad, shape.logprobs[bad]));
  }
  if (problem !== null) {
    assembler.rejectAfterValues(shape.id, problem.code, problem.detail);
    return false;
  }
  return assembler.commit(identity, agent, shape);
}

function rejectWith(assembler: RolloutAssembler, rejection: Rejection): false {
  assembler.reject(rejection);
  return false;
}

/**
 * The plan by way of staging runs of calls at once, or null to plan again call by call: when a
 * staged call failed (its rejection is then the one-call path's, word for word), or when the core
 * ran out of memory, since staging holds a run's calls at once where the one-call path holds only
 * the longest call — whether a rollout fits must not depend on the path it took.
 */
function stagedPlan(assembler: RolloutAssembler, calls: unknown[], options: PlanOptions): Plan | null {
  try {
    if (assembleStaged(assembler, calls, (i) => assembleCall(assembler, calls, i)) === "replan") return null;
    return assembler.finish(calls.length, options);
  } catch (error) {
    if (isOutOfMemory(error)) return null;
    throw error;
  }
}

/** Plans one canonical rollout on a core from `makeCore`. Never throws for bad input. */
export function planRollout(makeCore: CoreFactory, input: unknown, options: PlanOptions | null = {}): Plan {
  options = checkPlanOptions(options, "plan()");
  const header = checkHeader(input);
  if (header instanceof Rejection) {
    const calls = (input as { calls?: unknown } | null)?.calls;
    return planOfRejection(rolloutIdOf(input), Array.isArray(calls) ? calls.length : 0, header, [], options);
  }
  const hints = sizeHints(header.calls);
  // Outside the try: no core to be had (too many live plans) is the caller's problem, not the rollout's.
  const core = makeCore();
  // A call too long for the core whatever else happens: refused before its arrays are copied in.
  const need = core.minimumBytes(hints);
  const limit = core.memoryLimit;
  if (hints.longestCall <= MAX_CALL_TOKENS && need > limit) {
    core.release();
    const why =
      `its longest call has ${hints.longestCall} tokens; ` +
      `its calls need at least ${need} bytes of core memory, more than its ${limit}`;
    return planOfRejection(
      header.rolloutId,
      header.calls.length,
      tooLargeRejection(new CoreMemoryError(why)),
      header.agents ?? [],
      options,
    );
  }
  let assembler: RolloutAssembler | null = null;
  try {
    assembler = new RolloutAssembler(core, header, hints);
    if (assembler.stagesMany) {
      const plan = stagedPlan(assembler, header.calls, options);
      if (plan !== null) return plan;
      assembler = new RolloutAssembler(core, header, hints); // from the start again, call by call
    }
    assembleCalls(assembler, header.calls);
    return assembler.finish(header.calls.length, options);
  } catch (error) {
    if (!isOutOfMemory(error)) {
      // A caller's getter or Proxy threw (JS code, never inside the core): the core is intact.
      core.release();
      throw error;
    }
    if (assembler) assembler.abandon();
    else core.release(false);
    return planOfRejection(
      header.rolloutId,
      header.calls.length,
      tooLargeRejection(error),
      header.agents ?? [],
      options,
    );
  }
}
