// The eligible calls of a planned rollout as explain reads them: views of the arrays the rollout
// holds (never copies of every call's sequence), each with its planned parent's index.
import type { ForestCall, MediaItem, Rollout, TokenIds } from "../types.js";
import type { Work } from "./token-trie.js";

export interface Call {
  forest: ForestCall;
  prompt: TokenIds;
  generation: TokenIds;
  /** Index of the planned parent among the eligible calls, -1 for a root. */
  parent: number;
  fullLength: number;
  /** Its media occurrences (in its prompt). */
  media: readonly MediaItem[];
}

/** The eligible calls, in ledger order. */
export function eligibleCalls(rollout: Rollout, forest: readonly ForestCall[]): Call[] {
  const out: Call[] = [];
  const index = new Map<string, number>();
  for (const entry of forest) {
    if (!entry.eligible) continue;
    const input = rollout.calls[entry.index]!;
    index.set(entry.id, out.length);
    out.push({
      forest: entry,
      prompt: input.prompt_token_ids,
      generation: input.generation_token_ids,
      parent: entry.parent === null ? -1 : index.get(entry.parent)!,
      fullLength: input.prompt_token_ids.length + input.generation_token_ids.length,
      media: entry.media,
    });
  }
  return out;
}

/** `full(call)` as one array: built only for the calls a cause is looked for against. */
export function fullOf(call: Call, work: Work): Int32Array {
  const full = new Int32Array(call.fullLength);
  full.set(call.prompt);
  full.set(call.generation, call.prompt.length);
  work.tokens += call.fullLength;
  return full;
}

/** `full(call)[from:to]` as numbers. */
export function fullSlice(call: Call, from: number, to: number): number[] {
  const out: number[] = [];
  const end = Math.min(to, call.fullLength);
  const promptLength = call.prompt.length;
  for (let k = Math.max(0, from); k < end; k++)
    out.push(k < promptLength ? call.prompt[k]! : call.generation[k - promptLength]!);
  return out;
}

/** The length of the longest common prefix of `full(call)` and `tokens`. */
export function commonPrefixWithFull(call: Call, tokens: ArrayLike<number>, work: Work): number {
  const n = Math.min(call.fullLength, tokens.length);
  const promptLength = call.prompt.length;
  let k = 0;
  while (k < n && k < promptLength && call.prompt[k] === tokens[k]) k++;
  if (k === promptLength) while (k < n && call.generation[k - promptLength] === tokens[k]) k++;
  work.tokens += k + 1;
  return k;
}
