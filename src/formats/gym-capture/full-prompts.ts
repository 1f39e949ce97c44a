// Every entry's full prompt, checked against what Gym recorded: a v5 delta entry
// (`prompt_is_delta`) stores only the suffix after its parent's full sequence, so its prompt is
// rebuilt as full(parent) ++ suffix (parent by `parent_call_id`, walked back to a full prompt);
// then each entry's `cum_len` and token `digest`, which describe the full sequence, must hold.
import { FormatError } from "../values.js";
import { tokenDigest } from "./token-digest.js";
import type { TokenEntry } from "./token-entry.js";
import { q } from "../values.js";

/** Full prompts by call id, each entry checked; throws on the first entry that fails. */
export function fullPrompts(entries: readonly TokenEntry[], file: string): Map<string, ArrayLike<unknown>> {
  const byId = new Map(entries.map((entry) => [entry.id, entry]));
  const prompts = new Map<string, ArrayLike<unknown>>();
  for (const entry of entries) {
    if (prompts.has(entry.id)) continue;
    // The deltas waiting on this one, child first, up to an entry whose full prompt is known.
    const chain: TokenEntry[] = [];
    const onChain = new Set<string>();
    let base = entry;
    while (base.promptIsDelta && !prompts.has(base.id)) {
      chain.push(base);
      onChain.add(base.id);
      const parentId = base.parentCallId;
      const parent = parentId === null ? undefined : byId.get(parentId);
      if (parent === undefined) {
        const why =
          parentId === null ? "parent_call_id is null" : `parent_call_id ${q(parentId)} has no entry in ${file}`;
        throw brokenChain(entry, base, why);
      }
      if (onChain.has(parent.id))
        throw brokenChain(entry, base, `the delta chain loops back to call ${q(parent.id)} (${parent.where})`);
      base = parent;
    }
    if (!prompts.has(base.id)) {
      checkRecorded(base, base.storedPrompt);
      prompts.set(base.id, base.storedPrompt);
    }
    for (let i = chain.length - 1; i >= 0; i--) {
      const child = chain[i];
      const parent = i === chain.length - 1 ? base : chain[i + 1];
      const prompt = joined([prompts.get(parent.id)!, parent.generation, child.storedPrompt]);
      checkRecorded(child, prompt);
      prompts.set(child.id, prompt);
    }
  }
  return prompts;
}

/** `entry` is a delta whose chain cannot be followed at `at` (entry itself or an ancestor). */
function brokenChain(entry: TokenEntry, at: TokenEntry, why: string): FormatError {
  if (at === entry) return new FormatError("delta_parent_missing", `${entry.label}prompt_is_delta, but ${why}`);
  return new FormatError(
    "delta_parent_unreadable",
    `${entry.label}prompt_is_delta, but its parent ${q(entry.parentCallId)} cannot be rebuilt: ` +
      `at ${at.where} (call ${q(at.id)}) ${why}`,
  );
}

/** Gym's `cum_len` and `digest` describe prompt + generation: both must match the tokens. */
function checkRecorded(entry: TokenEntry, prompt: ArrayLike<unknown>): void {
  const rebuilt = entry.promptIsDelta ? " (rebuilt from its delta chain)" : "";
  const length = prompt.length + entry.generation.length;
  if (entry.cumLen !== null && entry.cumLen !== length) {
    throw new FormatError(
      "token_cum_len_mismatch",
      `${entry.label}cum_len is ${entry.cumLen}, but its prompt${rebuilt} and generation hold ${length} tokens`,
    );
  }
  if (entry.digest === null) return;
  // null: a token no digest covers (negative, fractional, past 2^53), which the planner names.
  const digest = tokenDigest([prompt, entry.generation]);
  if (digest !== null && digest !== entry.digest) {
    throw new FormatError(
      "token_digest_mismatch",
      `${entry.label}digest ${entry.digest} does not match its prompt${rebuilt} and generation ` +
        `(they hash to ${digest})`,
    );
  }
}

/** The parts end to end: an Int32Array when every token fits one (as valid ids do), else an array. */
function joined(parts: readonly ArrayLike<unknown>[]): ArrayLike<unknown> {
  let length = 0;
  for (const part of parts) length += part.length;
  const out = new Int32Array(length);
  let at = 0;
  for (const part of parts) {
    if (part instanceof Int32Array) {
      out.set(part, at);
      at += part.length;
      continue;
    }
    for (let i = 0; i < part.length; i++) {
      const token = part[i];
      // Not an id (negative, fractional, too big, not a number): keep the values as given, so
      // the planner's invalid_token names the one that is wrong.
      if (typeof token !== "number" || (token | 0) !== token || token < 0) return plainJoined(parts);
      out[at++] = token;
    }
  }
  return out;
}

function plainJoined(parts: readonly ArrayLike<unknown>[]): unknown[] {
  const out: unknown[] = [];
  for (const part of parts) for (let i = 0; i < part.length; i++) out.push(part[i]);
  return out;
}
