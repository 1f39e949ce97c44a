// Raw linear memory above the static data: the scanner and serializer lay out their own regions
// and grow memory themselves (the host makes its views only after a call returns).
import { growTo, setPageLimit } from "../pages";

/** First free, 16-aligned address after static data. */
export const BASE: usize = (__heap_base + 15) & ~15;

/** Caps this instance's memory at `pages` (the host's `maxMemory`; see ../pages.ts). */
export function setMemoryLimit(pages: i32): void {
  setPageLimit(pages);
}

/**
 * Makes [0, end) addressable, growing by at least a quarter each time; false when memory cannot (or
 * may not) grow that far.
 */
export function ensureMemory(end: u64): bool {
  return growTo(end, memory.size() >> 2);
}
