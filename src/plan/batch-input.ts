// planBatch's input (RolloutBatch): whether its arrays fit together, where each call's logprobs
// are, and one rollout of it as the canonical object plan() reads. A batch that does not fit
// together is a misused API and throws; what is wrong inside a rollout (a negative token, a
// duplicate id, an unknown agent, a bad reward) is left to planning, which rejects that rollout.
import type { Rollout, RolloutBatch } from "../types.js";

function must(ok: boolean, what: string): void {
  if (!ok) fail(what);
}

/**
 * Throws for a batch that does not fit together. In loops it is called only on a misfit: a
 * message template made for every entry checked would cost more than the check.
 */
function fail(what: string): never {
  throw new TypeError(`planBatch(): ${what}`);
}

/** Offsets: `count + 1` entries from 0, never decreasing, ending at `end`. */
function checkStarts(starts: unknown, name: string, count: number, end: number, endName: string): void {
  must(starts instanceof Int32Array, `${name} must be an Int32Array`);
  const s = starts as Int32Array;
  must(s.length === count + 1, `${name} has ${s.length} entries, not ${count + 1}`);
  must(s[0] === 0 && s[count] === end, `${name} must run from 0 to ${endName} (${end})`);
  for (let i = 0; i < count; i++) if (s[i] > s[i + 1]) fail(`${name}[${i + 1}] is less than ${name}[${i}]`);
}

/**
 * Checks the batch's layout; returns where each call's logprobs start (callIds.length + 1
 * entries). Throws a TypeError naming the first misfit.
 */
export function checkBatch(batch: RolloutBatch): Int32Array {
  must(typeof batch === "object" && batch !== null, "takes a RolloutBatch object");
  const { rollouts, rolloutCalls, callIds, callAgents, kept, tokens, tokenStarts, promptLengths, logprobs } = batch;
  must(Array.isArray(rollouts), "rollouts must be an array of headers");
  must(Array.isArray(callIds), "callIds must be an array");
  const calls = callIds.length;
  checkStarts(rolloutCalls, "rolloutCalls", rollouts.length, calls, "callIds.length");
  must(tokens instanceof Int32Array, "tokens must be an Int32Array");
  checkStarts(tokenStarts, "tokenStarts", calls, tokens.length, "tokens.length");
  must(promptLengths instanceof Int32Array && promptLengths.length === calls, "promptLengths needs one Int32 a call");
  must(
    callAgents === undefined || (Array.isArray(callAgents) && callAgents.length === calls),
    "callAgents needs one entry a call",
  );
  must(kept === undefined || (kept instanceof Uint8Array && kept.length === calls), "kept needs one byte a call");
  must(logprobs instanceof Float32Array, "logprobs must be a Float32Array");
  for (const header of rollouts)
    if (typeof header !== "object" || header === null) fail("each rollout header must be an object");
  const logprobStarts = new Int32Array(calls + 1);
  for (let c = 0; c < calls; c++) {
    const length = tokenStarts[c + 1] - tokenStarts[c];
    const prompt = promptLengths[c];
    if (!(prompt >= 0 && prompt <= length))
      fail(`promptLengths[${c}] is ${prompt}, outside the call's ${length} tokens`);
    logprobStarts[c + 1] = logprobStarts[c] + length - prompt;
  }
  must(
    logprobStarts[calls] === logprobs.length,
    `logprobs has ${logprobs.length} values for ${logprobStarts[calls]} generated tokens`,
  );
  return logprobStarts;
}

/** Rollout `r` of a checked batch as a canonical rollout (its arrays: views of the batch's). */
export function rolloutOf(batch: RolloutBatch, logprobStarts: Int32Array, r: number): Rollout {
  const { rollout_id, reward, group_id, agents } = batch.rollouts[r];
  const calls: Rollout["calls"] = [];
  for (let c = batch.rolloutCalls[r]; c < batch.rolloutCalls[r + 1]; c++) {
    const start = batch.tokenStarts[c];
    const split = start + batch.promptLengths[c];
    const agent = batch.callAgents?.[c];
    calls.push({
      id: batch.callIds[c],
      ...(agent !== undefined && { agent }),
      ...(batch.kept !== undefined && { kept: batch.kept[c] !== 0 }),
      prompt_token_ids: batch.tokens.subarray(start, split),
      generation_token_ids: batch.tokens.subarray(split, batch.tokenStarts[c + 1]),
      generation_log_probs: batch.logprobs.subarray(logprobStarts[c], logprobStarts[c + 1]),
    });
  }
  const rollout = { rollout_id, reward, calls } as Rollout;
  if (group_id !== undefined) rollout.group_id = group_id;
  if (agents !== undefined) rollout.agents = agents;
  return rollout;
}
