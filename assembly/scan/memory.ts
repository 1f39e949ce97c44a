// Raw linear memory above the static data: the scanner and serializer lay out their own regions
// and grow memory themselves (the host makes its views only after a call returns).

/** First free, 16-aligned address after static data. */
export const BASE: usize = (__heap_base + 15) & ~15;

/** Makes [0, end) addressable; false when memory cannot grow that far. */
export function ensureMemory(end: usize): bool {
  const have = <usize>memory.size() << 16;
  if (end <= have) return true;
  const needPages = <i32>((end - have + 0xffff) >> 16);
  // Grow by at least a quarter of what we have, so appends stay amortized O(1).
  const quarter = <i32>(memory.size() >> 2);
  const pages = needPages > quarter ? needPages : quarter;
  if (memory.grow(pages) >= 0) return true;
  return memory.grow(needPages) >= 0;
}
