// SPEC v4 on generated rollouts (routes with conflicts and -1 entries, vLLM's shape, weight
// versions, group ids, shared-prefix roots, twins, breaks inside a generation, media in shared
// prefixes): every backend gives exactly the reference's report, rows and packed trees, and bins
// that keep SPEC's invariants against the reference's trie.
import fc from "fast-check";
import { beforeAll, describe, expect, test } from "vitest";
import { maskToInts } from "../../src/output/jsonl.js";
import type { Plan, Rollout, RoutedExperts } from "../../src/types.js";
import { acceptedV4RolloutArb, invalidV4RolloutArb } from "../support/arbitraries.js";
import { everyBackend, type NamedBackend } from "../support/backends.js";
import { checkBins, checkTrees } from "../support/reference-check.js";
import { type RefAccepted, reference } from "../support/reference.js";

const SEED = 20261205;
const RUNS = Number(process.env.CALLFOREST_PROPERTY_RUNS ?? 150);
const CAPACITIES = [24, 64, 4096];

let backends: NamedBackend[] = [];
beforeAll(async () => {
  backends = await everyBackend();
});

/** [tokens][L][K] of a plan's routed experts. */
function nested(experts: RoutedExperts): number[][][] {
  const { tokens, layers, topk, data } = experts;
  return Array.from({ length: tokens }, (_, t) =>
    Array.from({ length: layers }, (_, l) =>
      Array.from(data.subarray((t * layers + l) * topk, (t * layers + l + 1) * topk)),
    ),
  );
}

/** A plan's report and rows in the reference's shape. */
function asReference(plan: Plan) {
  const { report } = plan;
  return {
    counts: {
      calls: report.calls,
      eligible: report.eligible,
      roots: report.roots,
      leaves: report.leaves,
      rows: report.rows,
      captured_tokens: report.captured_tokens,
      trained_tokens: report.trained_tokens,
      row_tokens: report.row_tokens,
      unique_tokens: report.unique_tokens,
      ...(report.trie_tokens === undefined ? {} : { trie_tokens: report.trie_tokens }),
    },
    diagnostics: report.diagnostics,
    rows: plan.rows.map((row) => ({
      leaf: row.leaf,
      calls: row.calls,
      trained: row.trained,
      context: row.context,
      group_id: row.groupId,
      token_ids: Array.from(row.tokenIds),
      logprobs: Array.from(row.logprobs),
      loss_mask: Array.from(maskToInts(row.lossMask, row.numTokens)),
      media: row.media,
      ...(row.routedExperts ? { routed_experts: nested(row.routedExperts) } : {}),
      ...(row.weightVersions ? { weight_versions: Array.from(row.weightVersions) } : {}),
    })),
  };
}

function expected(ref: RefAccepted) {
  return {
    counts: ref.counts,
    diagnostics: ref.diagnostics,
    rows: ref.rows.map((row) => ({
      leaf: row.leaf,
      calls: row.calls,
      trained: row.trained,
      context: row.context,
      group_id: row.group_id,
      token_ids: row.token_ids,
      logprobs: row.logprobs,
      loss_mask: row.loss_mask,
      media: row.media,
      ...(row.routed_experts ? { routed_experts: row.routed_experts } : {}),
      ...(row.weight_versions ? { weight_versions: row.weight_versions } : {}),
    })),
  };
}

describe("SPEC v4 on every backend, against the reference", () => {
  test("rows, reports and packed trees equal the reference's; bins keep SPEC's invariants", () => {
    fc.assert(
      fc.property(
        acceptedV4RolloutArb(),
        fc.oneof(fc.constantFrom(...CAPACITIES), fc.nat(8)),
        (rollout: Rollout, c) => {
          const ref = reference(rollout, { trees: true });
          if (ref.status !== "ok") throw new Error(`the generator made a rejected rollout: ${ref.reason}`);
          // A fixed capacity, or (small numbers) the longest row plus that slack: tight bins split
          // trees, so segments sit in bins without their neighbours.
          const capacity = c > 8 ? c : Math.max(...ref.rows.map((r) => r.num_tokens)) + c;
          const fits = reference(rollout, { capacity }).status === "ok";
          for (const { name, cf } of backends) {
            const plan = cf.plan(rollout, { trees: true, ...(fits ? { capacity } : {}) });
            try {
              expect(plan.report.status, name).toBe("ok");
              expect(asReference(plan), name).toEqual(expected(ref));
              checkTrees(rollout, plan.trees);
              if (fits) checkBins(rollout, plan.bins, capacity, plan.report.packed_tokens);
            } finally {
              plan.release();
            }
          }
        },
      ),
      { seed: SEED, numRuns: RUNS },
    );
  });

  test("without routes, trie_tokens is at most unique_tokens", () => {
    fc.assert(
      fc.property(acceptedV4RolloutArb({ v4: { routes: "never" } }), (rollout: Rollout) => {
        const plan = backends[0].cf.plan(rollout, { trees: true });
        try {
          expect(plan.report.trie_tokens!).toBeLessThanOrEqual(plan.report.unique_tokens);
        } finally {
          plan.release();
        }
      }),
      { seed: SEED, numRuns: 60 },
    );
  });

  test("v4's rejections: the reference's code, on every backend", () => {
    fc.assert(
      fc.property(invalidV4RolloutArb(), (bad) => {
        for (const { name, cf } of backends) {
          const plan = cf.plan(bad.rollout);
          expect(plan.report.reason, `${name}: ${bad.what}`).toBe(bad.code);
          plan.release();
        }
      }),
      { seed: SEED, numRuns: 100 },
    );
  });
});
