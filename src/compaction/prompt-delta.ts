// A prompt stored as what it adds to an earlier call's full sequence (prompt + generation): copies
// of runs of the base's tokens and the new tokens between them. A continuation is one copy of its
// whole required prefix and its suffix; a rewritten context copies the parts the rewrite kept.
import { EvidenceError } from "./errors.js";
import { isTokenId } from "./token-rules.js";

/** `copy: [start, length]` takes base[start .. start+length); `tokens` are new. */
export type DeltaPiece = { copy: [number, number] } | { tokens: number[] };

/** Runs shorter than this are cheaper as new tokens than as a copy. */
const MIN_COPY = 4;
/** Token n-grams the base is indexed by. */
const GRAM = 8;
/** Positions kept per n-gram (a run of one repeated token, an image's pads, has many). */
const CANDIDATES = 16;

function gramHash(tokens: readonly number[], at: number): number {
  let h = 0x811c9dc5;
  for (let k = 0; k < GRAM; k++) h = Math.imul(h ^ tokens[at + k], 0x01000193);
  return h >>> 0;
}

function matchLength(base: readonly number[], from: number, target: readonly number[], at: number): number {
  let n = 0;
  while (from + n < base.length && at + n < target.length && base[from + n] === target[at + n]) n++;
  return n;
}

/**
 * The pieces that rebuild `target` from `base` (greedy: the longest copy at each position, the
 * base's next run first).
 */
export function encodeDelta(base: readonly number[], target: readonly number[]): DeltaPiece[] {
  const index = new Map<number, number[]>();
  for (let p = 0; p + GRAM <= base.length; p++) {
    const h = gramHash(base, p);
    const list = index.get(h);
    if (!list) index.set(h, [p]);
    else if (list.length < CANDIDATES) list.push(p);
  }
  const pieces: DeltaPiece[] = [];
  let fresh: number[] = [];
  let next = 0; // where the last copy ended in the base: the likeliest place the next one starts
  let at = 0;
  while (at < target.length) {
    let bestFrom = next;
    let best = next < base.length ? matchLength(base, next, target, at) : 0;
    if (best < GRAM && at + GRAM <= target.length) {
      for (const p of index.get(gramHash(target, at)) ?? []) {
        const n = matchLength(base, p, target, at);
        if (n > best) [best, bestFrom] = [n, p];
      }
    }
    if (best >= MIN_COPY) {
      if (fresh.length) pieces.push({ tokens: fresh });
      fresh = [];
      pieces.push({ copy: [bestFrom, best] });
      at += best;
      next = bestFrom + best;
    } else {
      fresh.push(target[at++]);
    }
  }
  if (fresh.length) pieces.push({ tokens: fresh });
  return pieces;
}

/** Rebuilds the tokens; throws EvidenceError naming `where` for a piece that does not fit the base. */
export function expandDelta(where: string, base: readonly number[], pieces: unknown): number[] {
  if (!Array.isArray(pieces)) throw new EvidenceError(`${where}.pieces must be an array`);
  const out: number[] = [];
  pieces.forEach((piece: unknown, j) => {
    const at = `${where}.pieces[${j}]`;
    const p = piece as { copy?: unknown; tokens?: unknown } | null;
    if (p && Array.isArray(p.copy) && p.tokens === undefined) {
      const [start, length] = p.copy as unknown[];
      if (
        !(
          p.copy.length === 2 &&
          Number.isSafeInteger(start) &&
          Number.isSafeInteger(length) &&
          (start as number) >= 0 &&
          (length as number) > 0
        )
      ) {
        throw new EvidenceError(`${at}.copy must be [start, length] with start >= 0 and length >= 1`);
      }
      const s = start as number;
      const n = length as number;
      if (s + n > base.length)
        throw new EvidenceError(`${at}.copy [${s}, ${n}] runs past the base's ${base.length} tokens`);
      for (let k = s; k < s + n; k++) out.push(base[k]);
    } else if (p && Array.isArray(p.tokens) && p.copy === undefined) {
      for (const t of p.tokens) {
        if (!isTokenId(t))
          throw new EvidenceError(`${at}.tokens holds ${JSON.stringify(t)}, not an integer in [0, 2^31-1]`);
        out.push(t);
      }
    } else {
      throw new EvidenceError(`${at} must be {copy: [start, length]} or {tokens: [...]}`);
    }
  });
  return out;
}
