// bench/flops.ts (issue 27) counts what a transformer computes over rows, packed trees and bins
// from the records' segments: checked against the attention rule applied pair by pair, on
// generated forests, and its FLOP formula against a hand count.
import fc from "fast-check";
import { beforeAll, expect, test } from "vitest";
import { countRecord, flops, type ModelShape } from "../../bench/flops.js";
import { init, type Callforest } from "../../src/index.js";
import type { PackedSegment } from "../../src/types.js";
import { acceptedRolloutArb } from "../support/arbitraries.js";

let cf: Callforest;
beforeAll(async () => {
  cf = await init();
});

/** The attention rule pair by pair, and the 128×128 blocks that hold a visible pair. */
function bruteForce(n: number, segments: readonly PackedSegment[], block = 128) {
  const end = new Array<number>(n);
  for (const s of segments) for (let k = s.start; k < s.start + s.length; k++) end[k] = s.end;
  let visiblePairs = 0;
  const blocks = new Set<string>();
  for (let q = 0; q < n; q++)
    for (let k = 0; k <= q; k++)
      if (q < end[k]) {
        visiblePairs++;
        blocks.add(`${Math.floor(q / block)},${Math.floor(k / block)}`);
      }
  let blockPairs = 0;
  for (const key of blocks) {
    const [qb, kb] = key.split(",").map(Number);
    blockPairs += Math.min(block, n - qb * block) * Math.min(block, n - kb * block);
  }
  return { records: 1, tokens: n, visiblePairs, blockPairs };
}

test("countRecord agrees with the attention rule on trees and bins of generated forests", () => {
  fc.assert(
    fc.property(acceptedRolloutArb(), fc.integer({ min: 0, max: 2 }), (rollout, extra) => {
      const probe = cf.plan(rollout);
      const capacity = Math.max(...probe.rows.map((r) => r.numTokens)) + extra;
      probe.release();
      const plan = cf.plan(rollout, { trees: true, capacity });
      for (const record of [...plan.trees, ...plan.bins])
        expect(countRecord(record.numTokens, record.segments)).toEqual(bruteForce(record.numTokens, record.segments));
      plan.release();
    }),
    { numRuns: 60, seed: 27 },
  );
});

test("countRecord: a row is causal; blocks of a long tree", () => {
  expect(countRecord(300, [{ start: 0, length: 300, end: 300 }])).toEqual({
    records: 1,
    tokens: 300,
    visiblePairs: (300 * 301) / 2,
    blockPairs: 128 * 128 * 3 + 128 * 44 * 2 + 44 * 44, // blocks (0,0) (1,0) (1,1) (2,0) (2,1) (2,2)
  });
  // Two siblings of 200 under a root of 100: the second sibling's queries never see the first.
  const segments = [
    { call: "a", parent: -1, start: 0, length: 100, end: 500 },
    { call: "b", parent: 0, start: 100, length: 200, end: 300 },
    { call: "c", parent: 0, start: 300, length: 200, end: 500 },
  ];
  expect(countRecord(500, segments)).toEqual(bruteForce(500, segments));
  expect(countRecord(500, segments).visiblePairs).toBe(100 * 500 + 2 * ((200 * 201) / 2) - 100 * 100 + (100 * 101) / 2);
});

test("flops: projections, scores and SwiGLU MLP per layer", () => {
  const m: ModelShape = { name: "t", layers: 2, hidden: 8, heads: 4, kvHeads: 2, headDim: 2, intermediate: 16 };
  const f = flops(m, { records: 1, tokens: 10, visiblePairs: 55, blockPairs: 100 });
  // q and o: 8×8 each, k and v: 8×4 each -> 192 multiply-adds a token; scores: 2 × 8 a pair.
  expect(f.attention).toBe(2 * (2 * 192 * 10 + 2 * 2 * 8 * 55));
  expect(f.mlp).toBe(2 * (2 * 3 * 8 * 16 * 10));
});
