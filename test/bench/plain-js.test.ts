// The small-rollout bench's plain-JS peer (bench/plain-js.ts) must make plan()'s rows, or the
// bench compares unlike work: same leaves in the same order, same tokens, logprobs and loss masks,
// on generated call forests (subagents, forks, compaction, twins, retries) and the bench's own.
import fc from "fast-check";
import { beforeAll, expect, test } from "vitest";
import { planPlain, type PlainRow } from "../../bench/plain-js.js";
import { generateSixteenCallRollouts, generateSmallRollouts } from "../../bench/generate.js";
import { init, type Callforest } from "../../src/index.js";
import type { Rollout } from "../../src/types.js";
import { rolloutArb } from "../support/arbitraries.js";

let cf: Callforest;
beforeAll(async () => {
  cf = await init();
});

/** plan()'s rows in the peer's shape (copies), or null when plan() rejects the rollout. */
function planned(rollout: Rollout): PlainRow[] | null {
  const plan = cf.plan(rollout);
  try {
    if (plan.report.status !== "ok") return null;
    return plan.rows.map((r) => ({
      leaf: r.leaf,
      tokenIds: r.tokenIds.slice(),
      logprobs: r.logprobs.slice(),
      lossMask: r.lossMask.slice(),
    }));
  } finally {
    plan.release();
  }
}

/** The peer ignores media: compare on the same forests without them. */
const withoutMedia = (r: Rollout): Rollout => ({ ...r, calls: r.calls.map(({ media: _, ...c }) => c) });

test("the peer makes plan()'s rows on generated call forests, and throws where plan() rejects a tie", () => {
  fc.assert(
    fc.property(rolloutArb().map(withoutMedia), (rollout) => {
      const expected = planned(rollout);
      if (expected === null) {
        // The generated forests are valid but for ties SPEC cannot break (and no eligible call).
        const plan = cf.plan(rollout);
        const reason = plan.report.reason;
        plan.release();
        expect(["ambiguous_parent", "no_trainable_calls"]).toContain(reason);
        if (reason === "ambiguous_parent") expect(() => planPlain(rollout)).toThrow(/ambiguous_parent/);
        return;
      }
      expect(planPlain(rollout)).toEqual(expected);
    }),
    { numRuns: 400 },
  );
});

test("the peer makes plan()'s rows on the bench's rollouts", () => {
  for (const rollout of [
    ...generateSixteenCallRollouts(20, "rollout"),
    ...generateSixteenCallRollouts(20, "call"),
    ...generateSmallRollouts(20, 3),
  ]) {
    const rows = planPlain(rollout);
    expect(rows.length).toBeGreaterThan(0);
    expect(rows).toEqual(planned(rollout));
  }
});
