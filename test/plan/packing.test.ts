// The bin packer and its lower bound (src/plan/packing.ts) on forest shapes alone: SPEC's bin
// invariants on random forests, packed tokens between the bound and row_tokens, and small forests
// where the best packing is known.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { firstFit } from "../../src/plan/first-fit.js";
import { type ForestShape, layOutBins, packedTokensLowerBound, type RecordLayout } from "../../src/plan/packing.js";
import { layOutBinsLinear } from "../support/linear-packing.js";

/** A forest from each call's parent (an earlier call, or -1) and what it adds to its parent. */
function forest(parents: number[], adds: number[]): ForestShape & { parents: number[]; fullLengths: number[] } {
  const fullLengths: number[] = [];
  parents.forEach((p, c) => fullLengths.push((p < 0 ? 0 : fullLengths[p]) + adds[c]));
  return { parents, fullLengths };
}

const total = (bins: RecordLayout[]) => bins.reduce((n, b) => n + b.numTokens, 0);

const shapeArb = fc
  .array(fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), fc.integer({ min: 1, max: 40 })), {
    minLength: 1,
    maxLength: 40,
  })
  .map((calls) =>
    forest(
      // about one call in six starts a tree; the others continue some earlier call
      calls.map(([u], c) => (c === 0 || u < 1 / 6 ? -1 : Math.min(c - 1, Math.floor(u * c)))),
      calls.map(([, add]) => add),
    ),
  );

/** SPEC's bin invariants, from the layout alone. */
function checkLayout(shape: ForestShape, bins: RecordLayout[], capacity: number): void {
  const n = shape.parents.length;
  const trained = new Array(n).fill(0);
  for (const bin of bins) {
    expect(bin.numTokens).toBeLessThanOrEqual(capacity);
    expect(bin.segments.reduce((t, s) => t + s.length, 0)).toBe(bin.numTokens);
    const at = new Map<number, number>();
    bin.segments.forEach((s, i) => {
      const p = shape.parents[s.node];
      // closed under parents, parents first: a root's segment starts a piece, others point at
      // their parent's segment of the same piece
      if (p < 0) expect(s.parent).toBe(-1);
      else expect(bin.segments[s.parent]?.node).toBe(p);
      if (s.parent >= 0) expect(s.parent).toBeLessThan(i);
      expect(s.length).toBe(shape.fullLengths[s.node] - (p < 0 ? 0 : shape.fullLengths[p]));
      expect(at.has(s.node)).toBe(false);
      at.set(s.node, i);
      if (s.trained) trained[s.node]++;
    });
  }
  expect(trained.every((t) => t === 1)).toBe(true);
}

describe("layOutBins", () => {
  test("random forests: SPEC's invariants, and the bound ≤ packed tokens ≤ row tokens", () => {
    fc.assert(
      fc.property(shapeArb, fc.integer({ min: 0, max: 200 }), (shape, slack) => {
        const isLeaf = shape.parents.map((_, c) => !shape.parents.includes(c));
        const leaves = shape.parents.map((_, c) => c).filter((c) => isLeaf[c]);
        const capacity = Math.max(...leaves.map((c) => shape.fullLengths[c])) + slack;
        const bins = layOutBins(shape, capacity);
        checkLayout(shape, bins, capacity);
        const unique = shape.parents.reduce(
          (t, p, c) => t + shape.fullLengths[c] - (p < 0 ? 0 : shape.fullLengths[p]),
          0,
        );
        const rowTokens = leaves.reduce((t, c) => t + shape.fullLengths[c], 0);
        const bound = packedTokensLowerBound(shape, capacity);
        expect(bound).toBeGreaterThanOrEqual(unique);
        expect(total(bins)).toBeGreaterThanOrEqual(bound);
        expect(total(bins)).toBeLessThanOrEqual(rowTokens);
      }),
      { numRuns: 500 },
    );
  });

  test("a prefix with three 6-token children in 22: two pieces, the bound exactly", () => {
    const shape = forest([-1, 0, 0, 0], [10, 6, 6, 6]);
    const bins = layOutBins(shape, 22);
    expect(bins.map((b) => b.segments.map((s) => `${s.node}${s.trained ? "" : "*"}`).join(" "))).toEqual([
      "0 1 2",
      "0* 3",
    ]);
    expect(total(bins)).toBe(38);
    expect(packedTokensLowerBound(shape, 22)).toBe(38);
  });

  test("pieces are packed bottom-up: a deep branch's pieces leave room for the small ones", () => {
    // 0 (4) ─ 1 (4) ─ {2 (8), 3 (8), 4 (8)};  0 ─ 5 (3), 0 ─ 6 (3).  Capacity 24: under 1 the three
    // 8s need two pieces (8 + 8 + 8 > 24 − 8), and the 3s join the smaller of them.
    const shape = forest([-1, 0, 1, 1, 1, 0, 0], [4, 4, 8, 8, 8, 3, 3]);
    const bins = layOutBins(shape, 24);
    checkLayout(shape, bins, 24);
    expect(total(bins)).toBe(4 + 4 + 8 + 8 + 4 + 4 + 8 + 3 + 3);
    expect(packedTokensLowerBound(shape, 24)).toBe(total(bins));
  });

  test("trees that fit share bins, in the order of the rollout", () => {
    const shape = forest([-1, 0, -1, -1, 3], [5, 5, 12, 4, 4]);
    const bins = layOutBins(shape, 20);
    expect(bins.map((b) => b.segments.map((s) => s.node))).toEqual([
      [0, 1],
      [2, 3, 4],
    ]);
    expect(total(bins)).toBe(30);
  });
});

describe("first fit in O(n log n): the same bins as the linear search it replaced", () => {
  /** firstFit as the linear search the packer used to do: each item into the first bin it fits. */
  function linearFirstFit(sizes: number[], room: number): number[] {
    const used: number[] = [];
    return sizes.map((size) => {
      const bin = used.findIndex((u) => u + size <= room);
      if (bin >= 0) {
        used[bin] += size;
        return bin;
      }
      used.push(size);
      return used.length - 1;
    });
  }

  test("firstFit gives each item the bin the linear search gives it, too-large items included", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 30 }), { maxLength: 300 }),
        fc.integer({ min: 1, max: 40 }),
        fc.boolean(),
        (sizes, room, decreasing) => {
          if (decreasing) sizes.sort((a, b) => b - a);
          expect(Array.from(firstFit(sizes, room))).toEqual(linearFirstFit(sizes, room));
        },
      ),
      { seed: 31, numRuns: 2000 },
    );
  });

  /** Forests of many small trees and wide fans: many bins, and many pieces under one call. */
  const wideArb = fc
    .array(fc.tuple(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 1, max: 4 })), {
      minLength: 1,
      maxLength: 400,
    })
    .map((calls) =>
      forest(
        // 0: a new tree; 1..5: a child of one of the last few calls (fans and short chains)
        calls.map(([u], c) => (c === 0 || u === 0 ? -1 : Math.max(0, c - u * u))),
        calls.map(([, add]) => add),
      ),
    );

  test("layOutBins equals the linear packer byte for byte, on random and wide forests at any capacity", () => {
    fc.assert(
      fc.property(fc.oneof(shapeArb, wideArb), fc.integer({ min: 0, max: 60 }), (shape, slack) => {
        const isParent = new Set(shape.parents);
        const longest = Math.max(...shape.fullLengths.filter((_, c) => !isParent.has(c)));
        const capacity = longest + slack;
        expect(JSON.stringify(layOutBins(shape, capacity))).toBe(JSON.stringify(layOutBinsLinear(shape, capacity)));
      }),
      { seed: 3131, numRuns: 1500 },
    );
  });

  test("5,000 one-token roots at capacity 3: the linear packer's 1,667 bins, in its order", () => {
    const shape = forest(new Array(5000).fill(-1), new Array(5000).fill(1));
    const bins = layOutBins(shape, 3);
    expect(bins.length).toBe(1667);
    expect(JSON.stringify(bins)).toBe(JSON.stringify(layOutBinsLinear(shape, 3)));
  });
});
