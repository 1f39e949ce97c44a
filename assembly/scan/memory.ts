// Raw linear memory above the static data: the scanner and serializer lay out their own regions
// and grow memory themselves (the host makes its views only after a call returns).

/** First free, 16-aligned address after static data. */
export const BASE: usize = (__heap_base + 15) & ~15;

/**
 * Most pages this instance may use: the host's `maxMemory`, and never the full 65,536 pages, so
 * that `memory.size() << 16` (the end of memory as a u32 address) cannot wrap around to 0.
 */
const MAX_PAGES: i32 = 65535;
let pageLimit: i32 = MAX_PAGES;

export function setMemoryLimit(pages: i32): void {
  pageLimit = min(pages, MAX_PAGES);
}

/** Makes [0, end) addressable; false when memory cannot (or may not) grow that far. */
export function ensureMemory(end: u64): bool {
  const have = <u64>memory.size() << 16;
  if (end <= have) return true;
  if (end > (<u64>pageLimit << 16)) return false;
  const needPages = <i32>((end - have + 0xffff) >> 16);
  if (memory.size() + needPages > pageLimit) return false;
  // Grow by at least a quarter of what we have, so appends stay amortized O(1).
  const quarter = <i32>(memory.size() >> 2);
  let pages = needPages > quarter ? needPages : quarter;
  if (memory.size() + pages > pageLimit) pages = needPages;
  if (memory.grow(pages) >= 0) return true;
  return memory.grow(needPages) >= 0;
}
