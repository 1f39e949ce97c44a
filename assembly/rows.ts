// Rows (SPEC "Ownership" and "Rows"): leaves, the ownership walk, leaf-to-root paths, and each
// row's token IDs, logprobs and bitset loss mask, all written into one block of linear memory.
import { allocBytes, vecAt } from "./vec";
import { setBits } from "./compare";
import {
  CALLS, LOGPROBS, TOKENS,
  C_AGENT, C_END_NODE, C_FULL, C_LP, C_PARENT, C_PROMPT,
  N_DEPTH, N_EDGE_LEN, N_EDGE_OFF, N_PARENT,
  callField, nodeField,
} from "./tree";

// Row record (32 bytes) in the row table read by the host (ROW_* in src/core/wasm-core.ts: the
// same fields as i32 indices); index.ts exports these for test/core/record-layout.test.ts, which
// fails when the two disagree.
export const R_SHIFT: usize = 5; // log2 of the record size
export const R_LEAF: i32 = 0;
export const R_PATH_OFF: i32 = 4; // first entry of the path (root first) in the path buffer
export const R_PATH_LEN: i32 = 8;
export const R_TOKENS: i32 = 12; // number of tokens
export const R_TOKEN_PTR: i32 = 16; // i32[numTokens]
export const R_LOGPROB_PTR: i32 = 20; // f32[numTokens]
export const R_MASK_PTR: i32 = 24; // u8[ceil(numTokens / 8)]

export let rowTable: usize = 0;
export let pathBuffer: usize = 0; // i32 call indices
/** i32[2n]: each call's parent ([0, n)), then the row that trains it ([n, 2n)); read by the host. */
export let links: usize = 0;
let ownerRows: usize = 0; // links + n

// @ts-ignore: decorator
@inline function i32At(base: usize, i: i32): usize {
  return base + ((<usize>i) << 2);
}
// @ts-ignore: decorator
@inline function align16<T>(n: T): T {
  return (n + 15) & ~(<T>15);
}

// Scratch for one buildRows, per call: first child, first same-agent child, depth (path length),
// row of each leaf (only leaves' entries are set).
let firstChild: usize = 0;
let sameAgentChild: usize = 0;
let depth: usize = 0;
let rowOfLeaf: usize = 0;

// @ts-ignore: decorator
@inline function isLeaf(c: i32): bool {
  return load<i32>(i32At(firstChild, c)) < 0;
}

/** Builds every row of the committed forest; returns the number of rows. */
export function buildRows(): i32 {
  const n = CALLS.len;
  firstChild = allocBytes((<usize>n) << 2);
  sameAgentChild = allocBytes((<usize>n) << 2);
  depth = allocBytes((<usize>n) << 2);
  rowOfLeaf = allocBytes((<usize>n) << 2);
  links = allocBytes((<usize>max(n, 1)) << 3);
  ownerRows = links + ((<usize>n) << 2);
  linkChildren(n);

  // Leaves, in ledger order, are the rows; size the output block.
  let rows = 0;
  let pathTotal: i32 = 0;
  let outBytes: u64 = 0; // all rows, one block: in 64 bits, so a sum past 4 GiB cannot wrap
  for (let c = 0; c < n; c++) {
    if (!isLeaf(c)) continue;
    store<i32>(i32At(rowOfLeaf, c), rows++);
    pathTotal += load<i32>(i32At(depth, c));
    outBytes += rowBytes(callField(c, C_FULL));
  }
  assignOwners(n);

  rowTable = allocBytes((<usize>rows) << R_SHIFT);
  pathBuffer = allocBytes((<usize>max(pathTotal, 1)) << 2);
  let out = allocBytes(max<u64>(outBytes, 16));
  let pathOff: i32 = 0;
  for (let leaf = 0; leaf < n; leaf++) {
    if (!isLeaf(leaf)) continue;
    writeRow(leaf, out, pathOff);
    out += <usize>rowBytes(callField(leaf, C_FULL));
    pathOff += load<i32>(i32At(depth, leaf));
  }
  return rows;
}

/** Output bytes of a row of `tokens` tokens: token IDs, logprobs, mask, each 16-byte aligned. */
// @ts-ignore: decorator
@inline function rowBytes(tokens: i32): u64 {
  return align16<u64>((<u64>tokens) << 2) * 2 + align16<u64>((<u64>tokens + 7) >> 3);
}

/** Each call's parent (into links), depth, first child and first same-agent child. */
function linkChildren(n: i32): void {
  memory.fill(firstChild, 0xff, (<usize>n) << 2);
  memory.fill(sameAgentChild, 0xff, (<usize>n) << 2);
  for (let c = 0; c < n; c++) {
    const p = callField(c, C_PARENT);
    store<i32>(i32At(links, c), p);
    if (p < 0) {
      store<i32>(i32At(depth, c), 1);
      continue;
    }
    store<i32>(i32At(depth, c), load<i32>(i32At(depth, p)) + 1);
    if (load<i32>(i32At(firstChild, p)) < 0) store<i32>(i32At(firstChild, p), c);
    if (load<i32>(i32At(sameAgentChild, p)) < 0 && callField(c, C_AGENT) == callField(p, C_AGENT)) {
      store<i32>(i32At(sameAgentChild, p), c);
    }
  }
}

/**
 * Ownership: a call's owner is its next call's owner, where next is the earliest child in the
 * same agent, else the earliest child. Children come later in ledger order, so walk backwards.
 */
function assignOwners(n: i32): void {
  for (let c = n - 1; c >= 0; c--) {
    let owner: i32;
    if (isLeaf(c)) {
      owner = load<i32>(i32At(rowOfLeaf, c));
    } else {
      let next = load<i32>(i32At(sameAgentChild, c));
      if (next < 0) next = load<i32>(i32At(firstChild, c));
      owner = load<i32>(i32At(ownerRows, next));
    }
    store<i32>(i32At(ownerRows, c), owner);
  }
}

/** Writes the row of `leaf` at `out` (its record, path, token IDs, logprobs and loss mask). */
function writeRow(leaf: i32, out: usize, pathOff: i32): void {
  const row = load<i32>(i32At(rowOfLeaf, leaf));
  const tokens = callField(leaf, C_FULL);
  const pathLen = load<i32>(i32At(depth, leaf));
  const tokenPtr = out;
  const logprobPtr = tokenPtr + align16((<usize>tokens) << 2);
  const maskPtr = logprobPtr + align16((<usize>tokens) << 2);

  const record = rowTable + ((<usize>row) << R_SHIFT);
  store<i32>(record + <usize>R_LEAF, leaf);
  store<i32>(record + <usize>R_PATH_OFF, pathOff);
  store<i32>(record + <usize>R_PATH_LEN, pathLen);
  store<i32>(record + <usize>R_TOKENS, tokens);
  store<i32>(record + <usize>R_TOKEN_PTR, <i32>tokenPtr);
  store<i32>(record + <usize>R_LOGPROB_PTR, <i32>logprobPtr);
  store<i32>(record + <usize>R_MASK_PTR, <i32>maskPtr);

  writeTokens(leaf, tokenPtr);
  memory.fill(logprobPtr, 0, (<usize>tokens) << 2);
  memory.fill(maskPtr, 0, ((<usize>tokens) + 7) >> 3);
  // Walk leaf to root: fill the path from its end, copy logprobs, mask the owned spans.
  let slot = pathOff + pathLen;
  for (let x = leaf; x >= 0; x = callField(x, C_PARENT)) {
    store<i32>(i32At(pathBuffer, --slot), x);
    const start = callField(x, C_PROMPT);
    const end = callField(x, C_FULL);
    memory.copy(
      logprobPtr + ((<usize>start) << 2),
      vecAt(LOGPROBS, callField(x, C_LP)),
      (<usize>(end - start)) << 2,
    );
    if (load<i32>(i32At(ownerRows, x)) == row) setBits(maskPtr, start, end);
  }
}

/** full(leaf), gathered from the tree edges between the root and the leaf's end node. */
function writeTokens(leaf: i32, dest: usize): void {
  for (let node = callField(leaf, C_END_NODE); node > 0; node = nodeField(node, N_PARENT)) {
    const len = nodeField(node, N_EDGE_LEN);
    const at = nodeField(node, N_DEPTH) - len;
    memory.copy(dest + ((<usize>at) << 2), vecAt(TOKENS, nodeField(node, N_EDGE_OFF)), (<usize>len) << 2);
  }
}
