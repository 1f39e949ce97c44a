// planBatch() against plan(): on every backend, each rollout of a batch built from canonical
// rollouts (toRolloutBatch) gets exactly plan()'s report and rows, rejected rollouts included, and a
// rejected rollout leaves the others in its batch untouched.
import fc from "fast-check";
import { beforeAll, describe, expect, test } from "vitest";
import { toRolloutBatch } from "../../src/index.js";
import type { Rollout, RolloutBatch } from "../../src/types.js";
import { invalidRolloutArb, rolloutArb } from "../support/arbitraries.js";
import { everyBackend, type NamedBackend } from "../support/backends.js";
import { generateSixteenCallRollouts } from "../../bench/generate.js";

const SEED = 20261205;
const RUNS = Number(process.env.CALLFOREST_PROPERTY_RUNS ?? 60);

let backends: NamedBackend[] = [];
beforeAll(async () => {
  backends = await everyBackend();
});

/** The rollout without what a batch does not carry (media, routes, versions); null if it cannot be one. */
function batchable(value: unknown): Rollout | null {
  const r = value as Rollout;
  try {
    const calls = r.calls.map(({ media: _m, routed_experts: _r, weight_version: _w, ...call }) => call);
    const stripped = { ...r, calls };
    toRolloutBatch([stripped]);
    return stripped;
  } catch {
    return null;
  }
}

const batchableArb: fc.Arbitrary<Rollout> = fc
  .oneof(
    { weight: 3, arbitrary: rolloutArb({ maxActions: 10 }) },
    { weight: 2, arbitrary: invalidRolloutArb().map((c) => c.rollout) },
  )
  .map(batchable)
  .filter((r): r is Rollout => r !== null);

function expectSameAsPlan(backend: NamedBackend, rollouts: Rollout[]): void {
  const result = backend.cf.planBatch(toRolloutBatch(rollouts));
  expect(result.reports.length).toBe(rollouts.length);
  rollouts.forEach((rollout, r) => {
    const plan = backend.cf.plan(rollout);
    try {
      expect(result.reports[r], `${backend.name}: rollout ${r}`).toEqual(plan.report);
      expect(result.rowStarts[r + 1] - result.rowStarts[r]).toBe(plan.rows.length);
      expect(result.rows(r), `${backend.name}: rollout ${r}`).toEqual(plan.rows);
    } finally {
      plan.release();
    }
  });
}

describe("planBatch", () => {
  test("each rollout's report and rows are plan()'s, rejected ones included, on every backend", () => {
    fc.assert(
      fc.property(fc.array(batchableArb, { minLength: 1, maxLength: 6 }), (rollouts) => {
        for (const backend of backends) expectSameAsPlan(backend, rollouts);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  test("a batch of hundreds of rows (its buffers grow while it is planned) is plan()'s too", () => {
    const rollouts = generateSixteenCallRollouts(200, "rollout");
    for (const backend of backends) expectSameAsPlan(backend, rollouts);
  });

  test("a batch mixing accepted and rejected rollouts gives rows to the accepted ones only", () => {
    const good = (id: string): Rollout => ({
      rollout_id: id,
      reward: 1,
      calls: [
        {
          id: "c1",
          prompt_token_ids: Int32Array.of(1, 2),
          generation_token_ids: Int32Array.of(3),
          generation_log_probs: Float32Array.of(-0.5),
        },
      ],
    });
    const negative = good("bad");
    negative.calls[0].generation_token_ids = Int32Array.of(-3);
    const rollouts = [good("a"), negative, good("b")];
    for (const backend of backends) {
      const result = backend.cf.planBatch(toRolloutBatch(rollouts));
      expect(result.reports.map((r) => r.status)).toEqual(["ok", "rejected", "ok"]);
      expect(result.reports[1].reason).toBe("invalid_token");
      expect(Array.from(result.rowStarts)).toEqual([0, 1, 1, 2]);
      expect(Array.from(result.tokenIds)).toEqual([1, 2, 3, 1, 2, 3]);
      expect(Array.from(result.tokenStarts)).toEqual([0, 3, 6]);
      expectSameAsPlan(backend, rollouts);
    }
  });

  test("the rows stay readable after later batches and plans reuse the cores", () => {
    const rollouts = [
      {
        rollout_id: "r",
        reward: 0,
        calls: [
          {
            id: "c",
            prompt_token_ids: Int32Array.of(7, 8),
            generation_token_ids: Int32Array.of(9, 10),
            generation_log_probs: Float32Array.of(-1, -2),
          },
        ],
      },
    ];
    for (const backend of backends) {
      const first = backend.cf.planBatch(toRolloutBatch(rollouts));
      rollouts[0].calls[0].prompt_token_ids = Int32Array.of(1, 1);
      backend.cf.planBatch(toRolloutBatch(rollouts));
      backend.cf.plan(rollouts[0]).release();
      expect(Array.from(first.rows(0)[0].tokenIds)).toEqual([7, 8, 9, 10]);
      rollouts[0].calls[0].prompt_token_ids = Int32Array.of(7, 8);
    }
  });

  test("without callAgents and kept, every call is kept and names no agent", () => {
    const rollouts = generateSixteenCallRollouts(5, "rollout").map((r) => ({
      ...r,
      agents: undefined,
      calls: r.calls.map(({ agent: _a, kept: _k, ...call }) => call),
    }));
    const { callAgents: _c, kept: _k, ...bare } = toRolloutBatch(rollouts);
    for (const backend of backends) {
      const result = backend.cf.planBatch(bare);
      rollouts.forEach((rollout, r) => {
        const plan = backend.cf.plan(rollout);
        expect(result.reports[r]).toEqual(plan.report);
        expect(result.rows(r)).toEqual(plan.rows);
        plan.release();
      });
    }
  });

  test("release() empties the result, and the next batch reuses its buffers", () => {
    const rollouts = generateSixteenCallRollouts(20, "rollout");
    for (const backend of backends) {
      const first = backend.cf.planBatch(toRolloutBatch(rollouts));
      const buffer = first.tokenIds.buffer;
      first.release();
      expect(first.tokenIds.length).toBe(0);
      expect(first.rows(0)[0].tokenIds.length).toBe(0);
      const second = backend.cf.planBatch(toRolloutBatch(rollouts));
      expect(second.tokenIds.buffer).toBe(buffer);
      expectSameAsPlan(backend, rollouts);
      second.release();
    }
  });

  test("a batch whose arrays do not fit together throws a TypeError naming the misfit", () => {
    const batch = toRolloutBatch([
      {
        rollout_id: "r",
        reward: 0,
        calls: [
          {
            id: "c",
            prompt_token_ids: [1],
            generation_token_ids: [2, 3],
            generation_log_probs: [-1, -1],
          },
        ],
      },
    ]);
    const misfits: [Partial<RolloutBatch>, RegExp][] = [
      [{ logprobs: new Float32Array(1) }, /logprobs has 1 values for 2 generated tokens/],
      [{ promptLengths: Int32Array.of(4) }, /promptLengths\[0\] is 4/],
      [{ rolloutCalls: Int32Array.of(0, 2) }, /rolloutCalls must run from 0 to callIds.length/],
      [{ tokenStarts: Int32Array.of(0, 2) }, /tokenStarts must run from 0 to tokens.length/],
    ];
    for (const backend of backends)
      for (const [change, message] of misfits)
        expect(() => backend.cf.planBatch({ ...batch, ...change })).toThrow(message);
  });

  test("toRolloutBatch refuses a call the flat layout cannot carry", () => {
    const call = { id: "c", prompt_token_ids: [1], generation_token_ids: [2], generation_log_probs: [-1] };
    const rollout = (extra: object): Rollout => ({ rollout_id: "r", reward: 0, calls: [{ ...call, ...extra }] });
    expect(() => toRolloutBatch([rollout({ media: [{ id: "m", offset: 0, length: 1 }] })])).toThrow(/media/);
    expect(() => toRolloutBatch([rollout({ prompt_token_ids: [1.5] })])).toThrow(/32-bit integers/);
    expect(() => toRolloutBatch([rollout({ generation_log_probs: [1e39] })])).toThrow(/overflow float32/);
  });
});
