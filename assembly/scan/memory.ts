// Raw linear memory above the static data: the scanner and serializer lay out their own regions
// and grow memory themselves (the host makes its views only after a call returns).

/** First free, 16-aligned address after static data. */
export const BASE: usize = (__heap_base + 15) & ~15;

/** Most pages the host lets this instance use (its `maxMemory` option). */
let pageLimit: i32 = 65536;

export function setMemoryLimit(pages: i32): void {
  pageLimit = pages;
}

/** Makes [0, end) addressable; false when memory cannot (or may not) grow that far. */
export function ensureMemory(end: usize): bool {
  const have = <usize>memory.size() << 16;
  if (end <= have) return true;
  const needPages = <i32>((end - have + 0xffff) >> 16);
  if (memory.size() + needPages > pageLimit) return false;
  // Grow by at least a quarter of what we have, so appends stay amortized O(1).
  const quarter = <i32>(memory.size() >> 2);
  let pages = needPages > quarter ? needPages : quarter;
  if (memory.size() + pages > pageLimit) pages = needPages;
  if (memory.grow(pages) >= 0) return true;
  return memory.grow(needPages) >= 0;
}
