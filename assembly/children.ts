// Child lookup of the prefix tree: an open-addressing hash table keyed by (node, first token of
// the child's edge). A hash keeps linking linear even when one node has thousands of children
// (many fresh subagents behind the same system-prompt opening).

import { allocBytes } from "./vec";

// Entry: node i32, token i32, child i32, unused i32. node == -1 marks an empty slot.
// @ts-ignore: decorator
@inline const ENTRY_SHIFT: i32 = 4;

let table: usize = 0;
let mask: u32 = 0;
let used: i32 = 0;

// @ts-ignore: decorator
@inline
function slotOf(node: i32, token: i32): u32 {
  let h = <u32>node * 0x9e3779b1 + <u32>token * 0x85ebca77;
  h ^= h >> 15;
  h *= 0x2c1b3c6d;
  h ^= h >> 12;
  return h & mask;
}

function allocTable(capacity: u32): void {
  const bytes = (<usize>capacity) << ENTRY_SHIFT;
  table = allocBytes(bytes);
  memory.fill(table, 0xff, bytes);
  mask = capacity - 1;
  used = 0;
}

/** Slots for about `expected` children: a power of two, at least twice as many (load <= 1/2). */
function capacityFor(expected: i64): i64 {
  let capacity: i64 = 64;
  while (capacity < expected * 2) capacity <<= 1;
  return capacity;
}

/** Starts an empty table sized for about `expected` children (call after a heap reset). */
export function childrenReset(expected: i32): void {
  allocTable(<u32>capacityFor(expected));
}

/** Bytes childrenReset(expected) reserves (for the host's budget of reservations). */
export function childrenBytes(expected: i64): i64 {
  return capacityFor(expected) << ENTRY_SHIFT;
}

/** The child of `node` whose edge starts with `token`, or -1. */
export function childGet(node: i32, token: i32): i32 {
  let s = slotOf(node, token);
  while (true) {
    const e = table + ((<usize>s) << ENTRY_SHIFT);
    const n = load<i32>(e);
    if (n == -1) return -1;
    if (n == node && load<i32>(e, 4) == token) return load<i32>(e, 8);
    s = (s + 1) & mask;
  }
}

/** Sets the child of `node` for `token` (inserting or replacing). */
export function childSet(node: i32, token: i32, child: i32): void {
  if (<u32>(used + 1) * 2 > mask + 1) grow();
  let s = slotOf(node, token);
  while (true) {
    const e = table + ((<usize>s) << ENTRY_SHIFT);
    const n = load<i32>(e);
    if (n == -1) {
      store<i32>(e, node);
      store<i32>(e, token, 4);
      store<i32>(e, child, 8);
      used++;
      return;
    }
    if (n == node && load<i32>(e, 4) == token) {
      store<i32>(e, child, 8);
      return;
    }
    s = (s + 1) & mask;
  }
}

function grow(): void {
  const oldTable = table;
  const oldCapacity = mask + 1;
  allocTable(oldCapacity << 1);
  for (let s: u32 = 0; s < oldCapacity; s++) {
    const e = oldTable + ((<usize>s) << ENTRY_SHIFT);
    const n = load<i32>(e);
    if (n != -1) childSet(n, load<i32>(e, 4), load<i32>(e, 8));
  }
}
