// planBatch(): many rollouts from flat typed arrays (RolloutBatch), each planned on a pooled core
// and its rows copied into the batch's buffers (batch-output.ts). A rollout's calls lie back to
// back in the batch, as the WASM core stages them, so on that core they go in with one copy of
// its tokens and one of its logprobs and are linked in one call (batch-plain.ts); the TS core
// reads them where they are. Whatever that path does not take — a header or call that is not
// well formed, a rollout past one staging run, any call the core refuses — is planned by plan()'s
// own path from the rollout as an object (batch-input.ts rolloutOf), so every rollout's rows and
// report, rejections word for word, are plan()'s.
import { RolloutAssembler, isOutOfMemory, type CallIdentity } from "./assembler.js";
import { checkBatch, rolloutOf } from "./batch-input.js";
import { BatchRows, type BatchBufferPool, type PlannedRows } from "./batch-output.js";
import { plainHeader, planPlainCalls } from "./batch-plain.js";
import { planRollout } from "./plan-rollout.js";
import { Rejection } from "./rejection.js";
import { RUN_TOKENS } from "./staged-calls.js";
import { checkHeader } from "./validate.js";
import type { CoreFactory, SizeHints } from "../core/types.js";
import type { BatchPlan, RolloutBatch } from "../types.js";

const NO_CALLS: unknown[] = [];

export function planBatch(makeCore: CoreFactory, pool: BatchBufferPool, batch: RolloutBatch): BatchPlan {
  const logprobStarts = checkBatch(batch);
  // Rows are leaves' full sequences, so they never hold more tokens than the batch's calls; on deep
  // rollouts they hold far fewer, and buffers that size (zeroed, paged in) would cost more than
  // growing: a small start, doubled as needed.
  const out = new BatchRows(pool, Math.min(batch.tokens.length, 1 << 16));
  for (let r = 0; r < batch.rollouts.length; r++) {
    const plan =
      planFlat(makeCore, batch, logprobStarts, r) ?? planRollout(makeCore, rolloutOf(batch, logprobStarts, r), {});
    out.add(plan);
    plan.release();
  }
  return out.result((r) => planRollout(makeCore, rolloutOf(batch, logprobStarts, r), {}));
}

/** Rollout r's sizes for the core, or null when a call's id or agent is not well formed. */
function hintsOf(batch: RolloutBatch, r: number): SizeHints | null {
  const { tokenStarts, promptLengths, callIds, callAgents, kept } = batch;
  let generated = 0;
  let longestCall = 0;
  let longestLinked = 0;
  for (let c = batch.rolloutCalls[r]; c < batch.rolloutCalls[r + 1]; c++) {
    const id: unknown = callIds[c];
    const agent: unknown = callAgents?.[c];
    if (typeof id !== "string" || id === "" || (agent !== undefined && typeof agent !== "string")) return null;
    const size = tokenStarts[c + 1] - tokenStarts[c];
    const generation = size - promptLengths[c];
    generated += generation;
    longestCall = Math.max(longestCall, size);
    if (generation > 0 && kept?.[c] !== 0) longestLinked = Math.max(longestLinked, size);
  }
  return { calls: batch.rolloutCalls[r + 1] - batch.rolloutCalls[r], generated, longestCall, longestLinked };
}

/** Rollout r planned from the flat arrays, or null: plan()'s path is to plan it. */
function planFlat(
  makeCore: CoreFactory,
  batch: RolloutBatch,
  logprobStarts: Int32Array,
  r: number,
): PlannedRows | null {
  const first = batch.rolloutCalls[r];
  const end = batch.rolloutCalls[r + 1];
  if (first === end || batch.tokenStarts[end] - batch.tokenStarts[first] > RUN_TOKENS) return null;
  const hints = hintsOf(batch, r);
  if (hints === null) return null;
  const core = makeCore();
  if (core.minimumBytes(hints) > core.memoryLimit) {
    core.release();
    return null;
  }
  try {
    if (core.stageCalls !== undefined) {
      const header = plainHeader(batch.rollouts[r]);
      const planned = header && planPlainCalls(core, batch, logprobStarts, header, hints, first, end);
      if (planned !== null) return { report: planned.report, rows: planned.rows, release: () => core.release() };
      core.release();
      return null;
    }
    const { rollout_id, reward, group_id, agents } = batch.rollouts[r];
    const header = checkHeader({ rollout_id, reward, group_id, agents, calls: NO_CALLS });
    if (header instanceof Rejection) {
      core.release();
      return null;
    }
    const assembler = new RolloutAssembler(core, header, hints);
    // Rows as bare arrays: the batch copies them out and rows(r) plans the rollout again for the rest.
    if (linkInPlace(assembler, batch, logprobStarts, first, end)) return assembler.finish(end - first, {}, true);
    core.release();
    return null;
  } catch (error) {
    if (!isOutOfMemory(error)) {
      core.release();
      throw error;
    }
    core.release(false);
    return null;
  }
}

/** The TS core: each call's arrays read where they are, in the batch. */
function linkInPlace(
  assembler: RolloutAssembler,
  batch: RolloutBatch,
  logprobStarts: Int32Array,
  first: number,
  end: number,
): boolean {
  const { tokens, tokenStarts, promptLengths, logprobs } = batch;
  for (let c = first; c < end; c++) {
    const call: CallIdentity = {
      id: batch.callIds[c],
      agent: batch.callAgents?.[c] ?? "",
      kept: batch.kept?.[c] !== 0,
    };
    const agent = assembler.identify(call.id, call.agent);
    if (agent === null) return false;
    const split = tokenStarts[c] + promptLengths[c];
    const arrays = {
      prompt: tokens.subarray(tokenStarts[c], split),
      generation: tokens.subarray(split, tokenStarts[c + 1]),
      logprobs: logprobs.subarray(logprobStarts[c], logprobStarts[c + 1]),
    };
    if (!assembler.commitArrays(call, agent, arrays)) return false;
  }
  return true;
}
