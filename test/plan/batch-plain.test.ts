// planBatch()'s path on the WebAssembly core (src/plan/batch-plain.ts) planned alone: it takes
// every rollout plan() accepts, with plan()'s report and rows, and gives up (null, so plan()'s own
// path plans it) exactly on the rollouts plan() rejects. planBatch's own tests cannot tell this
// path from that fallback: both give plan()'s results.
import { readFileSync } from "node:fs";
import fc from "fast-check";
import { beforeAll, describe, expect, test } from "vitest";
import { generateSixteenCallRollouts } from "../../bench/generate.js";
import { init, toRolloutBatch, type Callforest } from "../../src/index.js";
import { WasmCorePool } from "../../src/core/wasm-core.js";
import { checkBatch } from "../../src/plan/batch-input.js";
import { plainHeader, planPlainCalls } from "../../src/plan/batch-plain.js";
import { agentParents } from "../../src/plan/assembler.js";
import { Rejection } from "../../src/plan/rejection.js";
import { checkHeader } from "../../src/plan/validate.js";
import type { Rollout } from "../../src/types.js";
import { invalidRolloutArb, rolloutArb } from "../support/arbitraries.js";

const RUNS = Number(process.env.CALLFOREST_PROPERTY_RUNS ?? 60);

let cf: Callforest;
let pool: WasmCorePool;
beforeAll(async () => {
  cf = await init({ simd: true });
  const build = new URL("../../build/core-simd.wasm", import.meta.url);
  pool = new WasmCorePool(new WebAssembly.Module(readFileSync(build)));
});

/** What the path found for one rollout alone: its report and rows' arrays, or null. */
function planAlone(rollout: Rollout): { report: unknown; rows: unknown[] } | null {
  const batch = toRolloutBatch([rollout]);
  const logprobStarts = checkBatch(batch);
  const header = plainHeader(batch.rollouts[0]);
  if (header === null) throw new Error(`not a rollout header: ${JSON.stringify(batch.rollouts[0])}`);
  const core = pool.acquire();
  try {
    const hints = { calls: batch.callIds.length, generated: 0, longestCall: 0 };
    const planned = planPlainCalls(core, batch, logprobStarts, header, hints, 0, batch.callIds.length);
    if (planned === null) return null;
    const rows = planned.rows.map((row) => [
      Array.from(row.tokenIds),
      Array.from(row.logprobs),
      Array.from(row.lossMask),
    ]);
    return { report: planned.report, rows };
  } finally {
    core.release();
  }
}

function expectPlanOf(rollout: Rollout): "planned" | "left to plan()" {
  const plan = cf.plan(rollout);
  try {
    const alone = planAlone(rollout);
    if (plan.report.status !== "ok") {
      expect(alone, `${plan.report.reason}: ${plan.report.detail}`).toBeNull();
      return "left to plan()";
    }
    expect(alone).not.toBeNull();
    expect(alone!.report).toEqual(plan.report);
    expect(alone!.rows).toEqual(
      plan.rows.map((row) => [Array.from(row.tokenIds), Array.from(row.logprobs), Array.from(row.lossMask)]),
    );
    return "planned";
  } finally {
    plan.release();
  }
}

/** The rollout without media, routes and versions (a batch carries none), or null. */
function batchable(rollout: Rollout): Rollout | null {
  const calls = rollout.calls.map(({ media: _m, routed_experts: _r, weight_version: _w, ...call }) => call);
  try {
    toRolloutBatch([{ ...rollout, calls }]);
    return { ...rollout, calls };
  } catch {
    return null;
  }
}

describe("planPlainCalls", () => {
  test("plans what plan() accepts, as plan() does, diagnostics included, and leaves the rest", () => {
    const seen = { planned: 0, breaks: 0, empty: 0 };
    const call = (id: string, prompt: number[], generation: number[]) => ({
      id,
      prompt_token_ids: Int32Array.from(prompt),
      generation_token_ids: Int32Array.from(generation),
      generation_log_probs: Float32Array.from(generation, () => -0.5),
    });
    // c2's prompt leaves c1's sequence at token 3 (a prefix break), c3 repeats c2 and goes on.
    const broken: Rollout = {
      rollout_id: "broken",
      reward: 1,
      calls: [call("c1", [1, 2, 3], [4, 5]), call("c2", [1, 2, 3, 9], [6]), call("c3", [1, 2, 3, 9, 6, 7], [8])],
    };
    for (const rollout of [broken, ...generateSixteenCallRollouts(299, "rollout")]) {
      if (expectPlanOf(rollout) !== "planned") continue;
      seen.planned++;
      const codes = cf.plan(rollout);
      for (const d of codes.report.diagnostics) {
        if (d.code === "prefix_break") seen.breaks++;
        if (d.code === "empty_generation") seen.empty++;
      }
      codes.release();
    }
    // Prefix breaks and empty generations are both met here.
    expect(seen.planned).toBe(300);
    expect(seen.breaks).toBeGreaterThan(0);
    expect(seen.empty).toBeGreaterThan(0);
  });

  test("on generated forests, accepted and rejected, it plans or gives up exactly as plan() accepts or rejects", () => {
    const arb = fc
      .oneof(
        { weight: 3, arbitrary: rolloutArb({ maxActions: 10 }) },
        { weight: 2, arbitrary: invalidRolloutArb().map((c) => c.rollout) },
      )
      .map((r) => batchable(r as Rollout))
      // (A header planBatch refuses never reaches this path.)
      .filter((r): r is Rollout => r !== null && !(checkHeader(r) instanceof Rejection));
    const outcomes = new Set<string>();
    fc.assert(
      fc.property(arb, (rollout) => {
        outcomes.add(expectPlanOf(rollout));
      }),
      { seed: 20261205, numRuns: RUNS },
    );
    expect([...outcomes].sort()).toEqual(["left to plan()", "planned"]);
  });
});

describe("plainHeader", () => {
  // Headers near the rules' edges: ids, rewards and groups of the wrong kinds, agents listed
  // twice, parents not listed or not strings, modes that are not strings.
  const name = fc.constantFrom("main", "sub", "a", "b", "");
  const agent = fc.record(
    {
      id: fc.oneof({ weight: 8, arbitrary: name }, { weight: 1, arbitrary: fc.constant(7) }),
      parent: fc.oneof(
        { weight: 4, arbitrary: fc.constant(null) },
        { weight: 4, arbitrary: name },
        { weight: 1, arbitrary: fc.constantFrom(3, "nobody") },
      ),
      mode: fc.constantFrom("fresh", "fork", 2),
    },
    { requiredKeys: ["id"] },
  );
  const header = fc.record(
    {
      rollout_id: fc.oneof(
        { weight: 8, arbitrary: fc.constant("r") },
        { weight: 1, arbitrary: fc.constantFrom("", 1) },
      ),
      reward: fc.oneof(
        { weight: 8, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
        { weight: 1, arbitrary: fc.constantFrom(Number.NaN, Infinity, "1") },
      ),
      group_id: fc.constantFrom(null, "g", 3),
      agents: fc.oneof(
        { weight: 8, arbitrary: fc.array(agent, { maxLength: 5 }) },
        { weight: 1, arbitrary: fc.constantFrom("main", [null], [[]]) },
      ),
    },
    { requiredKeys: ["rollout_id", "reward"] },
  );

  test("accepts exactly the headers checkHeader accepts, with the same agents and parents", () => {
    const outcomes = new Set<string>();
    fc.assert(
      fc.property(header, (value) => {
        const checked = checkHeader({ ...value, calls: [] });
        const plain = plainHeader(value as never);
        outcomes.add(plain === null ? "refused" : "accepted");
        if (checked instanceof Rejection) {
          expect(plain).toBeNull();
          return;
        }
        expect(plain).not.toBeNull();
        expect(plain!.rolloutId).toBe(checked.rolloutId);
        expect(plain!.agents).toEqual(checked.agents?.map((a) => a.id) ?? null);
        expect(Array.from(plain!.parents)).toEqual(Array.from(agentParents(checked)));
      }),
      { seed: 20261205, numRuns: 2000 },
    );
    expect([...outcomes].sort()).toEqual(["accepted", "refused"]);
  });

  test("leaves a list of more than 64 agents to plan()'s path", () => {
    const agents = Array.from({ length: 65 }, (_, i) => ({ id: `a${i}`, parent: null }));
    expect(checkHeader({ rollout_id: "r", reward: 0, agents, calls: [] })).not.toBeInstanceOf(Rejection);
    expect(plainHeader({ rollout_id: "r", reward: 0, agents })).toBeNull();
    expect(plainHeader({ rollout_id: "r", reward: 0, agents: agents.slice(0, 64) })?.agents).toHaveLength(64);
  });
});
