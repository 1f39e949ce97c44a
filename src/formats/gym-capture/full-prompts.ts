// Every entry's full prompt, checked against what Gym recorded: a v5 delta entry
// (`prompt_is_delta`) stores only the suffix after its parent's full sequence, so its prompt is
// rebuilt as full(parent) ++ suffix (parent by `parent_call_id`, walked back to a full prompt);
// then each entry's `cum_len` and token `digest`, which describe the full sequence, must hold.
import { FormatError } from "../values.js";
import { tokenDigest } from "./token-digest.js";
import type { TokenEntry } from "./token-entry.js";
import { q } from "../values.js";

/**
 * The most tokens the full sequences of a token file's entries may add up to once delta prompts
 * are rebuilt (as many as 1 GiB holds as int32): planning reads every call's full sequence, so a
 * file of deltas is refused up front past it (rollout_too_large), before anything is rebuilt.
 */
export const MAX_EXPANDED_TOKENS = 2 ** 28;

/**
 * Full prompts by call id, each entry checked; throws on the first entry that fails. A rebuilt
 * prompt is a view into a buffer its delta chain shares: a child that continues its parent's
 * full sequence where the buffer ends appends to it, and only a second child (a fork) copies the
 * prefix, so a chain of deltas takes memory for the tokens its file holds, not for every prompt.
 */
export function fullPrompts(
  entries: readonly TokenEntry[],
  file: string,
  maxExpandedTokens = MAX_EXPANDED_TOKENS,
): Map<string, ArrayLike<unknown>> {
  const chains = deltaChains(entries, file);
  let expanded = 0;
  const promptLength = new Map<string, number>();
  for (const [entry, parent] of chains) {
    const length =
      parent === null
        ? entry.storedPrompt.length
        : promptLength.get(parent.id)! + parent.generation.length + entry.storedPrompt.length;
    promptLength.set(entry.id, length);
    expanded += length + entry.generation.length;
  }
  if (expanded > maxExpandedTokens) {
    throw new FormatError(
      "expanded_prompts_too_large",
      `${file}: its ${entries.length} entries' full sequences, delta prompts rebuilt, add up to ` +
        `${expanded} tokens, more than the ${maxExpandedTokens} one rollout may expand to`,
      "rollout_too_large",
    );
  }
  const prompts = new Map<string, ArrayLike<unknown>>();
  const sequences = new Map<string, Sequence>();
  for (const [entry, parent] of chains) {
    if (parent === null) {
      checkRecorded(entry, entry.storedPrompt);
      prompts.set(entry.id, entry.storedPrompt);
      continue;
    }
    const base = sequences.get(parent.id) ?? startSequence(parent, prompts.get(parent.id)!);
    sequences.set(parent.id, base);
    const { prompt, full } = extend(base, entry);
    checkRecorded(entry, prompt);
    prompts.set(entry.id, prompt);
    sequences.set(entry.id, full);
  }
  return prompts;
}

/**
 * Every entry with the parent its prompt continues (null when its prompt is stored whole), each
 * parent before its children: file order, a delta's chain walked up first. Throws for a delta
 * whose chain cannot be followed, named at the first entry (in file order) that needs it.
 */
function deltaChains(entries: readonly TokenEntry[], file: string): [TokenEntry, TokenEntry | null][] {
  const byId = new Map(entries.map((entry) => [entry.id, entry]));
  const done = new Set<string>();
  const order: [TokenEntry, TokenEntry | null][] = [];
  for (const entry of entries) {
    if (done.has(entry.id)) continue;
    // The deltas waiting on this one, child first, up to an entry whose full prompt is known.
    const chain: [TokenEntry, TokenEntry][] = [];
    const onChain = new Set<string>();
    let base = entry;
    while (base.promptIsDelta && !done.has(base.id)) {
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
      chain.push([base, parent]);
      base = parent;
    }
    if (!done.has(base.id)) {
      order.push([base, null]);
      done.add(base.id);
    }
    for (let i = chain.length - 1; i >= 0; i--) {
      order.push(chain[i]);
      done.add(chain[i][0].id);
    }
  }
  return order;
}

/**
 * A call's full sequence, `length` tokens at the start of `buffer` (an Int32Array shared along a
 * chain), or a plain array when some token is not an id (kept as given for the planner to name).
 */
type Sequence = InBuffer | { plain: unknown[] };

/** `length` tokens at the start of `buffer`; `tail.end`: how far the buffer's sequences reach. */
interface InBuffer {
  buffer: Int32Array;
  length: number;
  tail: { end: number };
}

/** The full sequence of `entry`, whose prompt is `prompt`, in a buffer of its own. */
function startSequence(entry: TokenEntry, prompt: ArrayLike<unknown>): Sequence {
  const length = prompt.length + entry.generation.length;
  const sequence = { buffer: new Int32Array(Math.max(16, length * 2)), length: 0, tail: { end: 0 } };
  return append(sequence, [prompt, entry.generation]);
}

/** The prompt and full sequence of a delta `child` of `parent`'s sequence. */
function extend(parent: Sequence, child: TokenEntry): { prompt: ArrayLike<unknown>; full: Sequence } {
  if ("plain" in parent) {
    const prompt = plainJoined([parent.plain, child.storedPrompt]);
    return { prompt, full: { plain: plainJoined([prompt, child.generation]) } };
  }
  // A second child of the same parent (its tail is taken) continues a copy of the parent's tokens.
  const own = parent.tail.end === parent.length ? parent : copyOf(parent);
  const withPrompt = append(own, [child.storedPrompt]);
  if ("plain" in withPrompt) return extend(withPrompt, { ...child, storedPrompt: [] });
  const prompt = withPrompt.buffer.subarray(0, withPrompt.length);
  return { prompt, full: append(withPrompt, [child.generation]) };
}

function copyOf(sequence: InBuffer): InBuffer {
  const buffer = new Int32Array(Math.max(16, sequence.length * 2));
  buffer.set(sequence.buffer.subarray(0, sequence.length));
  return { buffer, length: sequence.length, tail: { end: sequence.length } };
}

/**
 * `sequence` with `parts` after it, in the same buffer when its tail is free and there is room (a
 * buffer twice as large otherwise; the views already handed out keep the old one); a plain array
 * as soon as a token is not an id.
 */
function append(sequence: InBuffer, parts: readonly ArrayLike<unknown>[]): Sequence {
  let length = sequence.length;
  for (const part of parts) length += part.length;
  let { buffer, tail } = sequence;
  if (length > buffer.length) {
    const bigger = new Int32Array(Math.max(16, length * 2));
    bigger.set(buffer.subarray(0, sequence.length));
    buffer = bigger;
    tail = { end: sequence.length };
  }
  let at = sequence.length;
  for (const part of parts) {
    if (part instanceof Int32Array) {
      buffer.set(part, at);
      at += part.length;
      continue;
    }
    for (let i = 0; i < part.length; i++) {
      const token = part[i];
      // Not an id (negative, fractional, too big, not a number): keep the values as given, so
      // the planner's invalid_token names the one that is wrong.
      if (typeof token !== "number" || (token | 0) !== token || token < 0)
        return { plain: plainJoined([buffer.subarray(0, sequence.length), ...parts]) };
      buffer[at++] = token;
    }
  }
  tail.end = length;
  return { buffer, length, tail };
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

function plainJoined(parts: readonly ArrayLike<unknown>[]): unknown[] {
  const out: unknown[] = [];
  for (const part of parts) for (let i = 0; i < part.length; i++) out.push(part[i]);
  return out;
}
