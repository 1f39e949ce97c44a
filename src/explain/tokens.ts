// Small helpers over token arrays (plain arrays or typed arrays) shared by explain's classifiers.

/** The first index ≥ `from` where `needle` occurs in `hay`, or -1. */
export function indexOf(hay: ArrayLike<number>, needle: readonly number[], from: number): number {
  if (needle.length === 0) return from <= hay.length ? from : -1;
  const first = needle[0];
  outer: for (let i = from; i + needle.length <= hay.length; i++) {
    if (hay[i] !== first) continue;
    for (let k = 1; k < needle.length; k++) if (hay[i + k] !== needle[k]) continue outer;
    return i;
  }
  return -1;
}

/** `a[from:to]` as a plain array (clamped to `a`). */
export function slice(a: ArrayLike<number>, from: number, to: number): number[] {
  const end = Math.min(to, a.length);
  const out: number[] = [];
  for (let i = Math.max(0, from); i < end; i++) out.push(a[i]!);
  return out;
}

/** `a[i…]` and `b[j…]` agree on up to 8 tokens (as far as `a` goes). */
export function tokensAgree(a: ArrayLike<number>, i: number, b: ArrayLike<number>, j: number): boolean {
  const n = Math.min(8, a.length - i);
  if (j + n > b.length) return false;
  for (let k = 0; k < n; k++) if (a[i + k] !== b[j + k]) return false;
  return true;
}

/** The options with a decoder that gives "" for no tokens (some tokenizers throw on an empty list). */
export function withEmptyDecode<T extends { decode?: (ids: readonly number[]) => string }>(options: T): T {
  const { decode } = options;
  return decode === undefined ? options : { ...options, decode: (ids) => (ids.length === 0 ? "" : decode(ids)) };
}
