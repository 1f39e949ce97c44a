// toRolloutBatch: canonical rollouts laid out as one RolloutBatch, for a pipeline that has objects
// and wants planBatch (or a test or bench that compares the two). A call the flat layout cannot
// carry (media, routed experts, weight versions, token values no Int32Array holds) throws: the
// batch would otherwise plan a different rollout than the object.
import type { CanonicalCall, Logprobs, Rollout, RolloutBatch, TokenIds } from "../types.js";

function refuse(rollout: number, call: number, why: string): never {
  throw new TypeError(`toRolloutBatch(): rollouts[${rollout}].calls[${call}] ${why}`);
}

function tokensFit(ids: TokenIds): boolean {
  if (ids instanceof Int32Array) return true;
  return ids.every((v) => typeof v === "number" && (v | 0) === v);
}

/** Numbers whose float32 rounding says what plan() would say of them (a finite one must not overflow). */
function logprobsFit(values: Logprobs): boolean {
  if (values instanceof Float32Array) return true;
  const fits = (v: unknown) => typeof v === "number" && (!Number.isFinite(v) || Number.isFinite(Math.fround(v)));
  return Array.prototype.every.call(values, fits);
}

function checkCall(call: CanonicalCall, r: number, c: number): void {
  const absent = (v: unknown) => v === undefined || v === null;
  if (!absent(call.media) || !absent(call.routed_experts) || !absent(call.weight_version))
    refuse(r, c, "has media, routed experts or a weight version, which a batch does not carry");
  if (typeof call.id !== "string") refuse(r, c, "has no string id");
  if (call.agent !== undefined && typeof call.agent !== "string") refuse(r, c, "has an agent that is not a string");
  if (call.kept !== undefined && typeof call.kept !== "boolean") refuse(r, c, "has a kept that is not a boolean");
  if (!tokensFit(call.prompt_token_ids) || !tokensFit(call.generation_token_ids))
    refuse(r, c, "has token ids that are not 32-bit integers");
  if (!logprobsFit(call.generation_log_probs)) refuse(r, c, "has logprobs that are not numbers or overflow float32");
  if (call.generation_log_probs.length !== call.generation_token_ids.length)
    refuse(r, c, "has not one logprob a generated token");
}

export function toRolloutBatch(rollouts: readonly Rollout[]): RolloutBatch {
  let calls = 0;
  let tokenCount = 0;
  let generated = 0;
  rollouts.forEach((rollout, r) =>
    rollout.calls.forEach((call, c) => {
      checkCall(call, r, c);
      calls++;
      tokenCount += call.prompt_token_ids.length + call.generation_token_ids.length;
      generated += call.generation_token_ids.length;
    }),
  );
  const batch: RolloutBatch = {
    rollouts: rollouts.map(({ rollout_id, reward, group_id, agents }) => ({ rollout_id, reward, group_id, agents })),
    rolloutCalls: new Int32Array(rollouts.length + 1),
    callIds: [],
    callAgents: [],
    kept: new Uint8Array(calls),
    tokens: new Int32Array(tokenCount),
    tokenStarts: new Int32Array(calls + 1),
    promptLengths: new Int32Array(calls),
    logprobs: new Float32Array(generated),
  };
  const callIds = batch.callIds as string[];
  const callAgents = batch.callAgents as (string | undefined)[];
  let c = 0;
  let t = 0;
  let l = 0;
  rollouts.forEach((rollout, r) => {
    for (const call of rollout.calls) {
      callIds.push(call.id);
      callAgents.push(call.agent);
      batch.kept![c] = call.kept === false ? 0 : 1;
      batch.promptLengths[c] = call.prompt_token_ids.length;
      batch.tokens.set(call.prompt_token_ids, t);
      batch.tokens.set(call.generation_token_ids, t + call.prompt_token_ids.length);
      batch.logprobs.set(call.generation_log_probs, l);
      t += call.prompt_token_ids.length + call.generation_token_ids.length;
      l += call.generation_token_ids.length;
      batch.tokenStarts[++c] = t;
    }
    batch.rolloutCalls[r + 1] = c;
  });
  return batch;
}
