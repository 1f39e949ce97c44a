// Growable arrays of fixed-size records in the stub runtime's heap. Headers live in static memory
// (`changetype<Vec>(memory.data(16))`), so they survive heap resets. The heap is reset at the start
// of every plan (an instance serves one plan at a time), so nothing here is ever freed one by one.

@unmanaged
export class Vec {
  /** Address of element 0 (moves when the vector grows: keep indices, not addresses). */
  ptr: usize;
  /** Elements in use. */
  len: i32;
  /** Elements that fit before the next reallocation. */
  cap: i32;
  /** Bytes per element (a power of two). */
  shift: i32;
}

/** Linear memory this instance may use, in 64 KiB pages (the host may lower it). */
let memoryLimitPages: i32 = 65536;

export function setMemoryLimitPages(pages: i32): void {
  memoryLimitPages = pages;
}

/**
 * True when reserving `bytes` up front (on hints, or capacity kept from earlier plans) is more
 * than half the memory limit: such reservations are dropped, so whether a rollout fits never
 * depends on a wrong hint or on what the instance planned before.
 */
export function pastReserveBudget(bytes: i64): bool {
  return bytes > (<i64>memoryLimitPages << 15);
}

/** Bytes a vector holds reserved. */
export function vecCapacityBytes(v: Vec): i64 {
  return <i64>v.cap << v.shift;
}

/** Past the limit, abort: the host turns that into `rollout_too_large` and drops the instance. */
function checkMemoryLimit(): void {
  if (memory.size() > memoryLimitPages) abort("memory limit");
}

/** heap.alloc, within the memory limit. */
export function allocBytes(bytes: usize): usize {
  const ptr = heap.alloc(bytes);
  checkMemoryLimit();
  return ptr;
}

/**
 * Starts the vector afresh after a heap reset, with room for at least `minCap` elements — and,
 * with `keep`, for as many as it last held: an instance serves plan after plan, its memory is
 * already there, and re-growing from nothing would copy every vector several times per plan.
 */
export function vecRestart(v: Vec, shift: i32, minCap: i32, keep: bool): void {
  const previous = keep && v.shift == shift ? v.cap : 0;
  v.ptr = 0;
  v.len = 0;
  v.cap = 0;
  v.shift = shift;
  vecReserve(v, max(minCap, previous));
}

/** Makes room for `extra` more elements, growing geometrically. */
export function vecReserve(v: Vec, extra: i32): void {
  // In 64 bits: a vector that would pass the memory limit aborts instead of wrapping around.
  const need64 = <i64>v.len + <i64>extra;
  if (need64 <= <i64>v.cap) return;
  if ((need64 << v.shift) > (<i64>memoryLimitPages << 16)) abort("memory limit");
  let cap = <i64>v.cap << 1;
  if (cap < need64) cap = need64;
  if (cap < 256) cap = 256;
  if ((cap << v.shift) > (<i64>memoryLimitPages << 16)) cap = need64; // no doubling past the limit
  const bytes = <usize>(cap << v.shift);
  v.ptr = v.ptr == 0 ? heap.alloc(bytes) : heap.realloc(v.ptr, bytes);
  checkMemoryLimit();
  v.cap = <i32>cap;
}

/** Appends `count` uninitialised elements and returns the index of the first. */
export function vecGrow(v: Vec, count: i32): i32 {
  vecReserve(v, count);
  const at = v.len;
  v.len = at + count;
  return at;
}

/** Address of element `i`. */
// @ts-ignore: decorator
@inline
export function vecAt(v: Vec, i: i32): usize {
  return v.ptr + ((<usize>i) << v.shift);
}
