import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ContextController,
  changedRanges,
  checkRequiredPrefix,
  type ViewDecision,
} from "../../src/compaction/controller.js";
import { PrefixMismatchError } from "../../src/compaction/errors.js";
import type { HistoryEntry } from "../../src/compaction/history.js";
import { entryKeys, materialize, type MaterializedView } from "../../src/compaction/materialize.js";
import { identityPolicy, recencyPolicy, type Policy } from "../../src/compaction/policies.js";
import { sampleHistory } from "./fixtures.js";

async function decision(policy: Policy): Promise<ViewDecision> {
  return {
    policy: policy.identity,
    trigger: "rolling",
    retained: { images: 0, imageGroups: 0, reasoning: 0 },
    omitted: { images: 0, imageGroups: 0, reasoning: 0 },
  };
}

/**
 * The first `upTo` entries of a 4-turn history under a policy; `output` = the entries of the next
 * turn's model output.
 */
async function setup(upTo: number, policy: Policy) {
  const { history, media } = await sampleHistory(4);
  const entries = history.entries().slice(0, upTo);
  const view = await materialize(policy.plan(entries), entries, media);
  const keysOf = (list: readonly HistoryEntry[]) => entryKeys(list, media);
  return { history, media, view, keysOf };
}

describe("changedRanges", () => {
  it("aligns by longest common subsequence", () => {
    expect(changedRanges(["a", "b", "c", "d"], ["a", "c", "x", "d"])).toEqual([
      { old_start: 1, old_end: 2, new_start: 1, new_end: 1 },
      { old_start: 3, old_end: 3, new_start: 2, new_end: 3 },
    ]);
    expect(changedRanges(["a"], ["a"])).toEqual([]);
    expect(changedRanges([], ["a"])).toEqual([{ old_start: 0, old_end: 0, new_start: 0, new_end: 1 }]);
  });

  it(
    "gives valid, minimal ranges: applied to the old list they give the new one, " +
      "keeping a longest common subsequence",
    () => {
      const lcsLength = (a: string[], b: string[]): number => {
        const table = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
        for (let i = 1; i <= a.length; i++) {
          for (let j = 1; j <= b.length; j++) {
            table[i][j] = a[i - 1] === b[j - 1] ? table[i - 1][j - 1] + 1 : Math.max(table[i - 1][j], table[i][j - 1]);
          }
        }
        return table[a.length][b.length];
      };
      fc.assert(
        fc.property(
          fc.array(fc.constantFrom("a", "b", "c"), { maxLength: 12 }),
          fc.array(fc.constantFrom("a", "b", "c"), { maxLength: 12 }),
          (a, b) => {
            const ranges = changedRanges(a, b);
            const rebuilt: string[] = [];
            let at = 0;
            for (const r of ranges) {
              rebuilt.push(...a.slice(at, r.old_start), ...b.slice(r.new_start, r.new_end));
              at = r.old_end;
            }
            rebuilt.push(...a.slice(at));
            expect(rebuilt).toEqual(b);
            const kept = a.length - ranges.reduce((n, r) => n + r.old_end - r.old_start, 0);
            expect(kept).toBe(lcsLength(a, b));
          },
        ),
        { seed: 7, numRuns: 500 },
      );
    },
  );

  it("handles a long history with a change in the middle (the table covers only what changed)", () => {
    // A full table would be 50,001^2 cells (10 GB): the common head and tail are matched first.
    const a = Array.from({ length: 50_000 }, (_, i) => `item-${i}`);
    const b = [...a.slice(0, 25_000), "new", ...a.slice(25_001)];
    expect(changedRanges(a, b)).toEqual([{ old_start: 25_000, old_end: 25_001, new_start: 25_000, new_end: 25_001 }]);
  });
});

describe("controller", () => {
  it("continues the segment on append-compatible requests and requires the exact previous tokens", async () => {
    const id = identityPolicy();
    const d = await decision(id);
    // entries 0..4: task, then turn 0 (reasoning, call, output, image); the next request adds turn 1
    const { history, media, keysOf } = await setup(1, id);
    const c = new ContextController();
    const v0 = await materialize(id.plan(history.entries().slice(0, 1)), history.entries().slice(0, 1), media);
    const p0 = c.prepare("c0", v0, d);
    expect(p0).toMatchObject({
      segment: 0,
      appendCompatible: false,
      requiredPrefix: null,
      parentCall: null,
      boundary: null,
    });
    c.acknowledge(p0, v0, keysOf(history.entries().slice(1, 3)), [1, 2, 3], [4, 5]);
    const upTo = history.entries().slice(0, 5);
    const v1 = await materialize(id.plan(upTo), upTo, media);
    const p1 = c.prepare("c1", v1, d);
    expect(p1).toMatchObject({
      segment: 0,
      appendCompatible: true,
      requiredPrefix: [1, 2, 3, 4, 5],
      parentCall: "c0",
      boundary: null,
    });
    expect(() => c.acknowledge(p1, v1, [], [1, 2, 3, 4, 9, 9], [7])).toThrow(PrefixMismatchError);
    expect(() => c.acknowledge(p1, v1, [], [1, 2, 3, 4, 9, 9], [7])).toThrow(
      "call c1: observed prompt_token_ids (6 tokens) does not start with required_prefix_token_ids (5 tokens); " +
        "first difference at token 4",
    );
    c.acknowledge(p1, v1, [], [1, 2, 3, 4, 5, 6], [7]);
    expect(c.boundaries).toEqual([]);
    expect(c.segment).toBe(0);
  });

  it("records a rewrite as a boundary once, on success, however often the call is retried", async () => {
    const keep = recencyPolicy({ images: { keepLastGroups: 1 } });
    const d = await decision(keep);
    const { history, media, keysOf } = await setup(1, keep);
    const all = history.entries();
    const c = new ContextController();
    const view = async (n: number) => materialize(keep.plan(all.slice(0, n)), all.slice(0, n), media);
    const v0 = await view(5); // task + turn 0 (one image group: kept)
    const p0 = c.prepare("c0", v0, d);
    c.acknowledge(p0, v0, keysOf(all.slice(5, 7)), [1], [2]);
    const v1 = await view(9); // turn 1's image pushes turn 0's out: rewrite
    const p1 = c.prepare("c1", v1, d);
    expect(p1.appendCompatible).toBe(false);
    expect(p1.requiredPrefix).toBeNull();
    expect(p1.boundary).toMatchObject({
      boundary: 0,
      segment: 1,
      first_call: "c1",
      previous_call: "c0",
      reason: "history_rewritten",
      old_view_digest: v0.digest,
      new_view_digest: v1.digest,
      old_items: v0.itemKeys.length + 2,
      new_items: v1.itemKeys.length,
      old_media: 2,
      new_media: 2,
    });
    expect(p1.boundary!.changed_ranges[0]).toEqual({ old_start: 4, old_end: 5, new_start: 4, new_end: 5 });
    expect(c.boundaries).toEqual([]); // pending until the call succeeds
    const retry = c.prepare("c1", v1, d);
    expect(retry).toBe(p1);
    c.acknowledge(retry, v1, keysOf(all.slice(9, 11)), [1, 9], [3]);
    expect(c.boundaries).toEqual([p1.boundary]);
    expect(c.segment).toBe(1);
    // a recompacted view for the next call replaces the pending decision; only the sent one counts
    const v2a = await view(13);
    const p2a = c.prepare("c2", v2a, d);
    const v2b = await materialize(identityPolicy().plan(all.slice(0, 5)), all.slice(0, 5), media);
    const p2b = c.prepare("c2", v2b, d);
    expect(p2b).not.toBe(p2a);
    expect(p2b.boundary!.boundary).toBe(1);
    c.acknowledge(p2b, v2b, [], [5], [6]);
    expect(c.boundaries.map((b) => b.first_call)).toEqual(["c1", "c2"]);
    expect(() => c.acknowledge(p2a, v2a, [], [5], [6])).toThrow(/without being the pending call/);
  });

  it("calls it output_not_resent when only the model's last output is missing", async () => {
    const noReasoning = recencyPolicy({ reasoning: { keepLastBlocks: 0 } });
    const d = await decision(noReasoning);
    const { history, media, keysOf } = await setup(1, noReasoning);
    const all = history.entries();
    const c = new ContextController();
    const v0: MaterializedView = await materialize(noReasoning.plan(all.slice(0, 1)), all.slice(0, 1), media);
    const p0 = c.prepare("c0", v0, d);
    c.acknowledge(p0, v0, keysOf(all.slice(1, 3)), [1], [2]); // the model reasoned, then called
    const v1 = await materialize(noReasoning.plan(all.slice(0, 5)), all.slice(0, 5), media);
    const p1 = c.prepare("c1", v1, d);
    expect(p1.boundary?.reason).toBe("output_not_resent");
    expect(p1.boundary?.changed_ranges).toEqual([
      { old_start: 1, old_end: 2, new_start: 1, new_end: 1 },
      { old_start: 3, old_end: 3, new_start: 2, new_end: 4 },
    ]);
  });
});

describe("checkRequiredPrefix", () => {
  it("accepts a prompt equal to or longer than the required prefix", () => {
    expect(() => checkRequiredPrefix("c", [1, 2, 3], [1, 2, 3])).not.toThrow();
    expect(() => checkRequiredPrefix("c", [1, 2, 3], [1, 2, 3, 4])).not.toThrow();
    expect(() => checkRequiredPrefix("c", null, [])).not.toThrow();
  });

  it("refuses a prompt shorter than the required prefix, even when it matches as far as it goes", () => {
    const shorter = () => checkRequiredPrefix("c", [1, 2, 3], [1, 2]);
    expect(shorter).toThrow(PrefixMismatchError);
    expect(shorter).toThrow(
      "call c: observed prompt_token_ids (2 tokens) does not start with required_prefix_token_ids (3 tokens); " +
        "observed prompt is shorter",
    );
    expect(() => checkRequiredPrefix("c", [1], [])).toThrow(/observed prompt is shorter$/);
  });
});
