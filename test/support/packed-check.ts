// SPEC's invariants of packed records ("Packed trees", "Bins"), checked against a plan's rows:
// the rows are the reference (property tests check them against test/support/reference.ts).
import { expect } from "vitest";
import { maskToInts } from "../../src/output/jsonl.js";
import type { PackedBin, PackedTree, Plan } from "../../src/types.js";

type Record = PackedTree | PackedBin;

/** Packed indices of the path from segment `leafSegment` up to its root, in row order. */
function pathIndices(record: Record, leafSegment: number): number[] {
  const chain: number[] = [];
  for (let s = leafSegment; s >= 0; s = record.segments[s].parent) chain.unshift(s);
  return chain.flatMap((s) =>
    Array.from({ length: record.segments[s].length }, (_, k) => record.segments[s].start + k),
  );
}

/** Layout rules every record keeps: segments tile it in pre-order, parents first, ends past subtrees. */
function checkLayout(record: Record): void {
  let at = 0;
  record.segments.forEach((s, i) => {
    expect(s.start).toBe(at);
    expect(s.length).toBeGreaterThan(0);
    at += s.length;
    expect(s.parent).toBeLessThan(i);
    // end: the first segment after i that is not in i's subtree
    let j = i + 1;
    const inSubtree = (x: number): boolean => x === i || (x > i && inSubtree(record.segments[x].parent));
    while (j < record.segments.length && inSubtree(j)) j++;
    expect(s.end).toBe(j < record.segments.length ? record.segments[j].start : record.numTokens);
  });
  expect(at).toBe(record.numTokens);
  expect(record.calls).toEqual(record.segments.map((s) => s.call));
}

/**
 * For `leaf`'s row: the path segments in `record` concatenated are its tokens, positions 0..n-1 and
 * logprobs, and under the attention rule each path token sees exactly the path tokens before it.
 */
function checkPathIsRow(record: Record, leafSegment: number, plan: Plan, leaf: string): void {
  const row = plan.rows.find((r) => r.leaf === leaf)!;
  const path = pathIndices(record, leafSegment);
  expect(path.map((k) => record.tokenIds[k])).toEqual(Array.from(row.tokenIds));
  expect(path.map((k) => record.positionIds[k])).toEqual(path.map((_, i) => i));
  expect(path.map((k) => record.logprobs[k])).toEqual(Array.from(row.logprobs));
  // Attention rule: the first token q of each path segment sees exactly the segments T with
  // start(T) <= q < end(T) — which must be the path's segments up to it — in full before it, and
  // every later token of the segment also its own earlier tokens (k <= q inside the segment).
  const chain: number[] = [];
  for (let s = leafSegment; s >= 0; s = record.segments[s].parent) chain.unshift(s);
  chain.forEach((s, depth) => {
    const q = record.segments[s].start;
    const seen = record.segments.map((t, i) => (t.start <= q && q < t.end ? i : -1)).filter((i) => i >= 0);
    expect(seen).toEqual(chain.slice(0, depth + 1));
  });
}

/** The bits of a record's mask as a set of call ids it trains (every generated token of each). */
function trainedTokens(record: Record, plan: Plan): Map<string, number> {
  const mask = maskToInts(record.lossMask, record.numTokens);
  const generation = new Map(plan.forest.map((c) => [c.id, c.generationLength]));
  const out = new Map<string, number>();
  record.segments.forEach((s) => {
    let bits = 0;
    for (let k = s.start; k < s.start + s.length; k++) bits += mask[k];
    // mask bits lie on the segment's last generationLength tokens only
    const g = generation.get(s.call)!;
    for (let k = s.start; k < s.start + s.length - g; k++) expect(mask[k]).toBe(0);
    if (bits > 0) {
      expect(bits).toBe(g);
      out.set(s.call, (out.get(s.call) ?? 0) + 1);
    }
  });
  return out;
}

/** SPEC's packed-tree invariants for `plan` (asked for with `{ trees: true }`). */
export function checkTrees(plan: Plan): void {
  const leaves = plan.forest.filter((c) => c.leaf);
  const roots = plan.forest.filter((c) => c.root).map((c) => c.id);
  expect(plan.trees.map((t) => t.root)).toEqual(roots);
  expect(plan.trees.reduce((n, t) => n + t.numTokens, 0)).toBe(plan.report.unique_tokens);
  const trainedOnce = new Map<string, number>();
  for (const tree of plan.trees) {
    checkLayout(tree);
    for (const [call, n] of trainedTokens(tree, plan)) trainedOnce.set(call, (trainedOnce.get(call) ?? 0) + n);
    tree.segments.forEach((s, i) => {
      if (leaves.some((l) => l.id === s.call)) checkPathIsRow(tree, i, plan, s.call);
    });
  }
  const eligible = plan.forest.filter((c) => c.eligible).map((c) => c.id);
  expect([...trainedOnce.keys()].sort()).toEqual([...eligible].sort());
  expect([...trainedOnce.values()].every((n) => n === 1)).toBe(true);
  const maskBits = plan.trees.reduce((n, t) => n + maskToInts(t.lossMask, t.numTokens).reduce((a, b) => a + b, 0), 0);
  expect(maskBits).toBe(plan.report.captured_tokens);
}

/** SPEC's bin invariants for `plan` (asked for with `{ capacity }`). */
export function checkBins(plan: Plan, capacity: number): void {
  expect(plan.report.packed_tokens).toBe(plan.bins.reduce((n, b) => n + b.numTokens, 0));
  expect(plan.report.packed_tokens).toBeGreaterThanOrEqual(plan.report.unique_tokens);
  expect(plan.report.packed_tokens).toBeLessThanOrEqual(plan.report.row_tokens);
  const leaves = new Set(plan.forest.filter((c) => c.leaf).map((c) => c.id));
  const trainedIn = new Map<string, number>();
  for (const bin of plan.bins) {
    expect(bin.numTokens).toBeLessThanOrEqual(capacity);
    checkLayout(bin);
    expect(bin.roots).toEqual(bin.segments.filter((s) => s.parent < 0).map((s) => s.call));
    const trained = trainedTokens(bin, plan);
    bin.segments.forEach((s, i) => {
      expect(trained.has(s.call)).toBe(s.trained);
      if (s.trained) trainedIn.set(s.call, (trainedIn.get(s.call) ?? 0) + 1);
      // the bin that trains a leaf holds its whole path (closed under parents: up to a root)
      if (s.trained && leaves.has(s.call)) checkPathIsRow(bin, i, plan, s.call);
    });
  }
  const eligible = plan.forest.filter((c) => c.eligible).map((c) => c.id);
  expect([...trainedIn.keys()].sort()).toEqual([...eligible].sort());
  expect([...trainedIn.values()].every((n) => n === 1)).toBe(true);
}
