// Packed records (SPEC "Packed trees" and "Bins"). The host lays out each record's segments
// (src/plan/packing.ts: which call, from which depth of its full sequence, trained or not); this fills
// every record's token IDs, position ids, logprobs and bitset loss mask in one block.
import { allocBytes, vecAt } from "./vec";
import { fillAscending, setBits } from "./compare";
import {
  LOGPROBS, TOKENS,
  C_END_NODE, C_LP, C_PROMPT,
  N_DEPTH, N_EDGE_LEN, N_EDGE_OFF, N_PARENT,
  callField, nodeField,
} from "./tree";

// Record entry (16 bytes) of the table pack() returns: where each record's arrays are. The host
// reads it by PACK_* in src/core/wasm-core.ts; index.ts exports these for
// test/core/record-layout.test.ts, which fails when the two disagree.
export const P_SHIFT: usize = 4;
export const P_TOKEN_PTR: usize = 0; // i32[numTokens]
export const P_POSITION_PTR: usize = 4; // i32[numTokens]
export const P_LOGPROB_PTR: usize = 8; // f32[numTokens]
export const P_MASK_PTR: usize = 12; // u8[ceil(numTokens / 8)]

// The host's layout: `segments` (call, from, length, trained) quadruples, then `records + 1`
// segment starts.
let layout: usize = 0;
let segmentCount: i32 = 0;
let recordCount: i32 = 0;

// @ts-ignore: decorator
@inline function i32At(base: usize, i: i32): usize {
  return base + ((<usize>i) << 2);
}
// @ts-ignore: decorator
@inline function align16(n: u64): u64 {
  return (n + 15) & ~(<u64>15);
}

/** Room for a layout of `segments` segments in `records` records; the host writes it there. */
export function packLayoutAddress(segments: i32, records: i32): usize {
  segmentCount = segments;
  recordCount = records;
  layout = allocBytes((<u64>segments * SEGMENT_INTS + <u64>records + 1) << 2);
  return layout;
}

const SEGMENT_INTS: i32 = 4;

// @ts-ignore: decorator
@inline function segmentField(s: i32, field: i32): i32 {
  return load<i32>(i32At(layout, s * SEGMENT_INTS + field));
}

/** Tokens of segment `s`: full(call)[from : from + length]. */
// @ts-ignore: decorator
@inline function segmentLength(s: i32): i32 {
  return segmentField(s, 2);
}

/** Fills every record of the layout; returns the address of its table (see P_*). */
export function pack(): usize {
  const starts = i32At(layout, segmentCount * SEGMENT_INTS);
  const table = allocBytes(max<u64>((<u64>recordCount) << P_SHIFT, 16));
  let bytes: u64 = 0;
  for (let r = 0; r < recordCount; r++) bytes += recordBytes(recordTokens(starts, r));
  let out = allocBytes(max<u64>(bytes, 16));
  for (let r = 0; r < recordCount; r++) {
    const tokens = recordTokens(starts, r);
    const tokenPtr = out;
    const positionPtr = tokenPtr + <usize>align16((<u64>tokens) << 2);
    const logprobPtr = positionPtr + <usize>align16((<u64>tokens) << 2);
    const maskPtr = logprobPtr + <usize>align16((<u64>tokens) << 2);
    const entry = table + ((<usize>r) << P_SHIFT);
    store<i32>(entry + P_TOKEN_PTR, <i32>tokenPtr);
    store<i32>(entry + P_POSITION_PTR, <i32>positionPtr);
    store<i32>(entry + P_LOGPROB_PTR, <i32>logprobPtr);
    store<i32>(entry + P_MASK_PTR, <i32>maskPtr);
    memory.fill(maskPtr, 0, ((<usize>tokens) + 7) >> 3);
    let at = 0;
    const end = load<i32>(i32At(starts, r + 1));
    for (let s = load<i32>(i32At(starts, r)); s < end; s++) {
      writeSegment(s, at, tokenPtr, positionPtr, logprobPtr, maskPtr);
      at += segmentLength(s);
    }
    out += <usize>recordBytes(tokens);
  }
  return table;
}

function recordTokens(starts: usize, r: i32): i32 {
  let tokens = 0;
  const end = load<i32>(i32At(starts, r + 1));
  for (let s = load<i32>(i32At(starts, r)); s < end; s++) tokens += segmentLength(s);
  return tokens;
}

/** Output bytes of a record of `tokens` tokens: ids, positions, logprobs, mask, 16-byte aligned. */
function recordBytes(tokens: i32): u64 {
  return align16((<u64>tokens) << 2) * 3 + align16(((<u64>tokens) + 7) >> 3);
}

/** Writes segment `s` at packed index `at`: its tokens, their positions, logprobs and mask bits. */
function writeSegment(s: i32, at: i32, tokenPtr: usize, positionPtr: usize, logprobPtr: usize, maskPtr: usize): void {
  const call = segmentField(s, 0);
  const from = segmentField(s, 1);
  const to = from + segmentField(s, 2);
  const prompt = callField(call, C_PROMPT);
  // Tokens [from, to) of full(call), from the tree edges between its end node and depth `from`.
  for (let node = callField(call, C_END_NODE); node > 0; node = nodeField(node, N_PARENT)) {
    const depth = nodeField(node, N_DEPTH);
    if (depth <= from) break;
    const edgeStart = depth - nodeField(node, N_EDGE_LEN);
    const low = max(edgeStart, from);
    const high = min(depth, to);
    if (high > low)
      memory.copy(
        i32At(tokenPtr, at + low - from),
        vecAt(TOKENS, nodeField(node, N_EDGE_OFF) + low - edgeStart),
        (<usize>(high - low)) << 2,
      );
  }
  fillAscending(i32At(positionPtr, at), from, to - from);
  // Generated tokens of the segment: [max(from, prompt), to); its prompt tokens get logprob 0 (a
  // segment of prompt tokens only ends before the prompt does: fill no further than the segment).
  const genFrom = max(from, prompt);
  memory.fill(i32At(logprobPtr, at), 0, (<usize>(min(genFrom, to) - from)) << 2);
  if (to > genFrom) {
    memory.copy(
      i32At(logprobPtr, at + genFrom - from),
      vecAt(LOGPROBS, callField(call, C_LP) + genFrom - prompt),
      (<usize>(to - genFrom)) << 2,
    );
    if (segmentField(s, 3) != 0) setBits(maskPtr, at + genFrom - from, at + to - from);
  }
}
