// Growable arrays of fixed-size records in a bump heap of our own. Headers live in static memory
// (`changetype<Vec>(memory.data(16))`), so they survive heap resets. The heap is reset at the start
// of every plan (an instance serves one plan at a time), so nothing here is ever freed one by one.
//
// Not the stub runtime's heap: it refuses any block over 1 GiB (a rollout's rows are one block),
// and its end-of-memory arithmetic wraps to 0 at 65,536 pages.

import { growTo, limitBytes } from "./pages";

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

/**
 * True when reserving `bytes` up front on hints is more than half the memory limit: such hints
 * are dropped, so whether a rollout fits never depends on a wrong hint.
 */
export function pastReserveBudget(bytes: i64): bool {
  return bytes > <i64>(limitBytes() >> 1);
}

const HEAP_START: usize = (__heap_base + 15) & ~(<usize>15);
let heapTop: usize = HEAP_START;
/** The newest block: it can grow in place. */
let lastBlock: usize = 0;

/** Forgets every block (a new plan starts). */
export function heapReset(): void {
  heapTop = HEAP_START;
  lastBlock = 0;
}

/** Makes [0, end) addressable, doubling memory as it grows; past the limit, aborts (rollout_too_large). */
function ensureMemory(end: u64): void {
  if (!growTo(end, memory.size())) abort("memory limit");
}

/** A block of `bytes` bytes (16-aligned), within the memory limit. */
export function allocBytes(bytes: u64): usize {
  const ptr = heapTop;
  const end = (<u64>ptr + bytes + 15) & ~(<u64>15);
  ensureMemory(end);
  heapTop = <usize>end;
  lastBlock = ptr;
  return ptr;
}

/** `ptr`'s block, grown to `bytes`: in place when it is the newest, else moved (its `used` bytes copied). */
function reallocBytes(ptr: usize, used: u64, bytes: u64): usize {
  if (ptr == lastBlock) {
    const end = (<u64>ptr + bytes + 15) & ~(<u64>15);
    ensureMemory(end);
    heapTop = <usize>end;
    return ptr;
  }
  const moved = allocBytes(bytes);
  memory.copy(moved, ptr, <usize>used);
  return moved;
}

/** Starts the vector afresh after a heap reset, with room for at least `minCap` elements. */
export function vecRestart(v: Vec, shift: i32, minCap: i32): void {
  v.ptr = 0;
  v.len = 0;
  v.cap = 0;
  v.shift = shift;
  vecReserve(v, max(minCap, 0));
}

/** Makes room for `extra` more elements, growing geometrically. */
export function vecReserve(v: Vec, extra: i32): void {
  // In 64 bits: a vector that would pass the memory limit aborts instead of wrapping around.
  const need64 = <i64>v.len + <i64>extra;
  if (need64 <= <i64>v.cap) return;
  if ((need64 << v.shift) > <i64>limitBytes()) abort("memory limit");
  let cap = <i64>v.cap << 1;
  if (cap < need64) cap = need64;
  if (cap < 256) cap = 256;
  if ((cap << v.shift) > <i64>limitBytes()) cap = need64; // no doubling past the limit
  const bytes = <u64>(cap << v.shift);
  v.ptr = v.ptr == 0 ? allocBytes(bytes) : reallocBytes(v.ptr, <u64>v.len << v.shift, bytes);
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
