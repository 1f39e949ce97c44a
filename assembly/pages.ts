// Linear memory as both WebAssembly modules (the core, and assembly/scan) grow it: in 64 KiB
// pages, within the host's limit, and never all 65,536 of them, so that the end of memory stays
// a u32 address (65,536 << 16 would wrap to 0). Each module has its own copy of this state.

const MAX_PAGES: i32 = 65535;
let limit: i32 = MAX_PAGES;

/** The host's limit (its `maxMemory`), kept within [1, MAX_PAGES]. */
export function setPageLimit(pages: i32): void {
  limit = min(max(pages, 1), MAX_PAGES);
}

/** Bytes of memory the limit allows. */
export function limitBytes(): u64 {
  return <u64>limit << 16;
}

/**
 * Makes [0, end) addressable, growing by at least `step` pages when the limit allows (geometric
 * steps keep appends amortized); false when memory cannot (or may not) grow that far.
 */
export function growTo(end: u64, step: i32): bool {
  const have = <u64>memory.size() << 16;
  if (end <= have) return true;
  if (end > limitBytes()) return false;
  const needed = <i32>((end - have + 0xffff) >> 16);
  let pages = max(needed, step);
  if (memory.size() + pages > limit) pages = needed;
  return memory.grow(pages) >= 0 || (pages != needed && memory.grow(needed) >= 0);
}
