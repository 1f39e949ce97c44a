// Where a line's scanned arrays live. Token (i32) data grows up from the arena's start, each
// array right after the one before it in line order, so a prompt that repeats an earlier prompt
// and its generation can be a view over their values followed by its own (reuse.ts) instead of
// a copy of them: a deep rollout's int32 memory is then its distinct tokens, not the square of
// its calls. Everything else — each array's header, and logprob (f32) data — goes on a side
// stack that grows down from the arena's top, out of the tokens' way. When the tokens reach the
// side stack it moves up (it is small: headers and generations' logprobs).
import { ensureMemory } from "./memory";

/** An array's header: span start, span end (input offsets), count, kind, data address. */
export const HEADER: usize = 20;
export const KIND_I32: u32 = 0;
export const KIND_F32: u32 = 1;

export let arenaStart: usize = 0;
/** The side stack: [sideLow, sideTop), headers newest lowest. Tokens may grow up to sideLow. */
export let sideLow: usize = 0;
export let sideTop: usize = 0;

// @ts-ignore: decorator
@inline export function spanStart(header: usize): u32 {
  return load<u32>(header);
}
// @ts-ignore: decorator
@inline export function spanEnd(header: usize): u32 {
  return load<u32>(header, 4);
}
// @ts-ignore: decorator
@inline export function countOf(header: usize): u32 {
  return load<u32>(header, 8);
}
// @ts-ignore: decorator
@inline export function kindOf(header: usize): u32 {
  return load<u32>(header, 12);
}
// @ts-ignore: decorator
@inline export function dataOf(header: usize): usize {
  return <usize>load<u32>(header, 16);
}

/** The first array's header (0 when there is none). */
export function firstHeader(): usize {
  return sideTop > sideLow ? sideTop - HEADER : 0;
}

/** The header of the array after `header` in line order (0 after the last). */
export function nextHeader(header: usize): usize {
  // Below a header: its f32 data (if any), then the next header.
  const below = header - (kindOf(header) == KIND_F32 ? <usize>countOf(header) << 2 : 0);
  return below > sideLow ? below - HEADER : 0;
}

/** An empty arena for a line whose input ends (with its slack) before `start`; false when memory is short. */
export function resetArena(start: usize, lineBytes: usize): bool {
  // Room for tokens to start with: a quarter of the line's bytes (a deep rollout's distinct
  // tokens take far less); the stack moves up if they need more.
  const top = (<u64>start + (<u64>lineBytes >> 2) + 4096 + 15) & ~(<u64>15);
  if (top > 0xffffffff || !ensureMemory(top)) return false;
  arenaStart = start;
  sideTop = <usize>top;
  sideLow = sideTop;
  return true;
}

/**
 * Makes [top, top + bytes) free for tokens (below the side stack), moving the stack up when they
 * would meet; false when memory cannot grow. A header's distance below sideTop never changes, so
 * tables of headers keep that (headerKey) rather than an address.
 */
export function roomAbove(top: usize, bytes: usize): bool {
  if (<u64>top + <u64>bytes <= <u64>sideLow) return true;
  const used = sideTop - sideLow;
  const needed = <u64>(top - arenaStart) + <u64>bytes + <u64>used + 4096;
  // Twice the room (moves stay rare), or just what is needed when memory's limit allows no more.
  let capacity = <u64>(sideTop - arenaStart) << 1;
  if (capacity < needed) capacity = needed;
  let newTop = (<u64>arenaStart + capacity + 15) & ~(<u64>15);
  if (newTop > 0xffffffff || !ensureMemory(newTop)) {
    newTop = (<u64>arenaStart + needed + 15) & ~(<u64>15);
    if (newTop > 0xffffffff || !ensureMemory(newTop)) return false;
  }
  const delta = <usize>newTop - sideTop;
  memory.copy(sideLow + delta, sideLow, used);
  sideLow += delta;
  sideTop += delta;
  // Logprob data sits on the stack: its headers' addresses move with it.
  for (let h = firstHeader(); h != 0; h = nextHeader(h)) {
    if (kindOf(h) == KIND_F32) store<u32>(h, <u32>(dataOf(h) + delta), 16);
  }
  return true;
}

/** A header's key that survives the stack's moves (never 0), and the header it names. */
// @ts-ignore: decorator
@inline export function headerKey(header: usize): u32 {
  return <u32>(sideTop - header);
}
// @ts-ignore: decorator
@inline export function headerOf(key: u32): usize {
  return sideTop - <usize>key;
}

/**
 * Pushes the header of an array whose tokens are [data, data + count * 4) in the token region;
 * 0 when memory is short.
 */
export function pushTokens(top: usize, start: u32, end: u32, data: usize, count: u32): usize {
  if (!roomAbove(top, HEADER)) return 0;
  sideLow -= HEADER;
  writeHeader(sideLow, start, end, count, KIND_I32, data);
  return sideLow;
}

/**
 * Moves `count` logprobs parsed at `scratch` (the tokens' top) onto the stack, under their header;
 * returns the header, or 0 when memory is short.
 */
export function pushLogprobs(scratch: usize, start: u32, end: u32, count: u32): usize {
  const bytes = <u64>count << 2;
  // The parse left its values above the tokens; their place on the stack is at or above them
  // (the copy may overlap them: memory.copy moves), and the header above that.
  if (<u64>scratch + bytes + <u64>HEADER > 0xffffffff || !roomAbove(scratch, <usize>bytes + HEADER)) return 0;
  const data = sideLow - HEADER - <usize>bytes;
  memory.copy(data, scratch, <usize>bytes);
  sideLow -= HEADER;
  writeHeader(sideLow, start, end, count, KIND_F32, data);
  sideLow = data;
  return sideLow + <usize>bytes;
}

function writeHeader(at: usize, start: u32, end: u32, count: u32, kind: u32, data: usize): void {
  store<u32>(at, start);
  store<u32>(at, end, 4);
  store<u32>(at, count, 8);
  store<u32>(at, kind, 12);
  store<u32>(at, <u32>data, 16);
}
