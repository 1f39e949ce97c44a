// What one version of a rollout costs a trainer (docs/breaks.md, "What a break costs"): its trees,
// rows and row tokens, and the tokens of its token trie (SPEC v4's trie_tokens, routes aside),
// computed from its structure. A version gives each eligible call a parent and says where the
// call's own tokens start in its full sequence (`cut`); the call's sequence there is its
// parent's sequence followed by `full(c)[cut:]`. Sequences are never built: lengths add up, and
// the trie is walked from where the parent's sequence ends, so the work is the tokens the calls
// add, not the tokens they resend. Media count as SPEC's trie counts them: a token in a media
// occurrence is shared only with the same occurrence (walked as a key of its own), and a call
// never stops inside one. Routes are not compared.
import type { MediaItem } from "../types.js";
import type { Call } from "./calls.js";
import { TokenTrie, type Work } from "./token-trie.js";

export interface Sizes {
  trees: number;
  rows: number;
  /** The rows' tokens: the sum of the leaves' sequence lengths. */
  row_tokens: number;
  /** The token trie's tokens (SPEC v4 "Packed trees": tokens and media, not routes). */
  trie_tokens: number;
}

/** A version of the rollout: each call's parent (-1: a root) and where its own tokens start. */
export interface Links {
  parent: Int32Array;
  cut: Int32Array;
}

export interface Built {
  sizes: Sizes;
  trie: TokenTrie;
  /** The trie node where each call's sequence ends. */
  end: Int32Array;
  /** The deepest node each call's prompt reached before the call was added, and its depth. */
  reach: Int32Array;
  reachDepth: Float64Array;
}

type Tokens = Pick<Call, "prompt" | "generation" | "fullLength"> & { media?: readonly MediaItem[] };

/** The rollout as planned: each call continues its planned parent's full sequence. */
export function plannedLinks(calls: readonly (Tokens & { parent: number })[]): Links {
  const parent = Int32Array.from(calls, (call) => call.parent);
  const cut = Int32Array.from(calls, (call) => (call.parent < 0 ? 0 : calls[call.parent]!.fullLength));
  return { parent, cut };
}

/** Builds the version `links` describes: its sizes, and its trie for the closest-call search. */
export function build(calls: readonly Tokens[], links: Links, work: Work): Built {
  const n = calls.length;
  let added = 0; // at most one node per token the calls add
  for (let c = 0; c < n; c++) added += calls[c]!.fullLength - (links.parent[c]! < 0 ? 0 : links.cut[c]!);
  const trie = new TokenTrie(work, added);
  const end = new Int32Array(n);
  const reach = new Int32Array(n);
  const reachDepth = new Float64Array(n);
  // Lengths of a token-in/token-out version grow with the history: doubles, not int32.
  const length = new Float64Array(n);
  const hasChild = new Uint8Array(n);
  const sizes: Sizes = { trees: 0, rows: 0, row_tokens: 0, trie_tokens: 0 };
  const keys = new Map<string, number>();
  for (let c = 0; c < n; c++) {
    const { prompt, generation, fullLength, media = [] } = calls[c]!;
    const p = links.parent[c]!;
    const cut = p < 0 ? 0 : links.cut[c]!;
    const base = p < 0 ? 0 : length[p]!;
    if (p < 0) sizes.trees++;
    else hasChild[p] = 1;
    length[c] = base + fullLength - cut;
    // SPEC's trie: a call shares the longest prefix an earlier sequence has, up to its prompt's end.
    // Its prompt from `cut`, as keys where media stand (a copy only of what it adds, only with media).
    const [own, from] = media.length === 0 ? [prompt, cut] : [keyed(prompt, cut, media, keys), 0];
    let node = trie.walk(p < 0 ? 0 : end[p]!, own, from, own.length);
    reach[c] = node;
    reachDepth[c] = base + trie.matched;
    sizes.trie_tokens += length[c]! - reachDepth[c]! + insideMedia(media, cut + trie.matched, trie.matched);
    node = trie.insert(node, own, from + trie.matched, own.length);
    end[c] = trie.insert(node, generation, 0, generation.length);
  }
  for (let c = 0; c < n; c++) {
    if (hasChild[c]) continue;
    sizes.rows++;
    sizes.row_tokens += length[c]!;
  }
  return { sizes, trie, end, reach, reachDepth };
}

/**
 * `prompt[from:]` with each token of a media occurrence replaced by a key (negative, never a token
 * id) for (item, length, place in the occurrence, token): equal only where the same occurrence is.
 */
function keyed(
  prompt: ArrayLike<number>,
  from: number,
  media: readonly MediaItem[],
  keys: Map<string, number>,
): Int32Array {
  const out = new Int32Array(Math.max(0, prompt.length - from));
  for (let k = from; k < prompt.length; k++) out[k - from] = prompt[k]!;
  for (const { id, offset, length } of media) {
    for (let k = Math.max(offset, from); k < offset + length && k < prompt.length; k++) {
      const name = `${id}\u0000${length}\u0000${k - offset}\u0000${prompt[k]}`;
      let key = keys.get(name);
      if (key === undefined) keys.set(name, (key = -1 - keys.size));
      out[k - from] = key;
    }
  }
  return out;
}

/** How far back a call stopping at `at` of its prompt goes to the start of a media occurrence it is inside. */
function insideMedia(media: readonly MediaItem[], at: number, walked: number): number {
  for (const { offset, length } of media) if (offset < at && at < offset + length) return Math.min(at - offset, walked);
  return 0;
}
