// explain's near parents (the plan's forest, as explain reports them) against SPEC's rule written
// out directly (every earlier call, every common prefix), on generated forests with re-rendered
// prompts, and against the report's prefix_break on both backends.
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { init } from "../../src/index.js";
import { explainRollout } from "../../src/explain/analyze.js";
import { closestEarlier } from "../../src/explain/near.js";
import { build, plannedLinks } from "../../src/explain/cost.js";
import type { Callforest, Rollout } from "../../src/types.js";
import { prefixSoupArb } from "../support/arbitraries.js";
import { brokenArb } from "./broken.js";

let cf: Callforest;
let wasm: Callforest;
beforeAll(async () => {
  cf = await init({ backend: "ts" });
  wasm = await init({ backend: "wasm" });
});

/** Each call's near parent per SPEC "Prefix breaks", by brute force: [call, near, at]. */
function spec(
  rollout: Rollout,
  parentOf: Map<string, string | null>,
  eligible: Set<string>,
): [string, string, number][] {
  const calls = rollout.calls.filter((call) => eligible.has(call.id));
  const full = (i: number) => [...calls[i]!.prompt_token_ids, ...calls[i]!.generation_token_ids];
  const out: [string, string, number][] = [];
  calls.forEach((c, i) => {
    const parent = parentOf.get(c.id);
    const d = parent == null ? 0 : full(calls.findIndex((p) => p.id === parent)).length;
    let best: [string, number] | null = null;
    for (let j = 0; j < i; j++) {
      const f = full(j);
      const prompt = c.prompt_token_ids;
      let l = 0;
      while (l < f.length && l < prompt.length && f[l] === prompt[l]) l++;
      const near = calls[j]!.prompt_token_ids.length <= l && l < Math.min(f.length, prompt.length) && l > d;
      if (near && (best === null || l >= best[1])) best = [calls[j]!.id, l];
    }
    if (best) out.push([c.id, best[0], best[1]]);
  });
  return out;
}

describe("explain's near parents", () => {
  it("equal SPEC's rule, written out, on generated forests", () => {
    let breaks = 0;
    fc.assert(
      fc.property(brokenArb, (rollout) => {
        const plan = cf.plan(rollout);
        try {
          fc.pre(plan.report.status === "ok");
          const forest = plan.forest;
          const parentOf = new Map(forest.map((call) => [call.id, call.parent]));
          const eligible = new Set(forest.filter((call) => call.eligible).map((call) => call.id));
          const got = explainRollout(rollout, forest, plan.agents.length > 0)
            .filter((call) => call.kind === "prefix_break")
            .map((call) => [call.call, call.near, call.at]);
          expect(got).toEqual(spec(rollout, parentOf, eligible));
          breaks += got.length;
        } finally {
          plan.release();
        }
      }),
      { numRuns: 300 },
    );
    expect(breaks).toBeGreaterThan(50); // the edits do make breaks
  });

  it("equal the report's prefix_break on both backends", () => {
    let breaks = 0;
    fc.assert(
      fc.property(fc.oneof(brokenArb, prefixSoupArb()), (rollout) => {
        for (const backend of [cf, wasm]) {
          const plan = backend.plan(rollout);
          try {
            fc.pre(plan.report.status === "ok");
            const report = plan.report.diagnostics
              .filter((d) => d.code === "prefix_break")
              .map((d) => [d.call, d.near, d.at, d.expected, d.found]);
            const got = explainRollout(rollout, plan.forest, plan.agents.length > 0)
              .filter((call) => call.kind === "prefix_break")
              .map((call) => [call.call, call.near, call.at, call.expected, call.found]);
            expect(got).toEqual(report);
            breaks += got.length;
          } finally {
            plan.release();
          }
        }
      }),
      { numRuns: 300 },
    );
    expect(breaks).toBeGreaterThan(50);
  });
});

/** The length of the longest common prefix of `a` and `b`. */
function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let k = 0;
  while (k < a.length && k < b.length && a[k] === b[k]) k++;
  return k;
}

describe("a root's closest earlier call", () => {
  it("is the longest common prefix with an earlier full sequence, ties the latest, by brute force", () => {
    const tokens = fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 8 });
    fc.assert(
      fc.property(fc.array(fc.record({ prompt: tokens, generation: tokens }), { maxLength: 12 }), (list) => {
        const full = list.map(({ prompt, generation }) => [...prompt, ...generation]);
        // Each call continues the longest earlier full sequence its prompt starts with (the latest
        // on a tie), as the planner links by tokens: the trie walks only what a call adds.
        const calls = list.map(({ prompt, generation }, i) => {
          let parent = -1;
          for (let j = 0; j < i; j++)
            if (commonPrefix(full[j]!, prompt) === full[j]!.length && full[j]!.length >= (full[parent]?.length ?? 0))
              parent = j;
          return { prompt, generation, fullLength: full[i]!.length, parent };
        });
        const expected = calls.map((call, i) => {
          let best: { near: number; at: number } | null = null;
          for (let j = 0; j < i; j++) {
            const at = commonPrefix(full[j]!, call.prompt);
            if (best === null || at >= best.at) best = { near: j, at };
          }
          return best;
        });
        expect(closestEarlier(build(calls, plannedLinks(calls), { tokens: 0 }))).toEqual(expected);
      }),
      { numRuns: 500 },
    );
  });
});
