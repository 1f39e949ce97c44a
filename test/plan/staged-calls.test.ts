// plan()'s fast path (src/plan/staged-calls.ts) stages runs of typed, token-only calls at once on
// the WebAssembly core. Whatever a run holds — a bad value, a repeated id, an unlisted agent, a tie
// SPEC cannot break, calls with media between plain ones — the plan must be the one the TS core
// (which has no such path) gives, report word for word.
import fc from "fast-check";
import { beforeAll, expect, test, vi } from "vitest";
import { RolloutAssembler } from "../../src/plan/assembler.js";
import { init, type Callforest } from "../../src/index.js";
import type { Plan, Rollout } from "../../src/types.js";
import { generateSixteenCallRollouts, typedRollout as typed } from "../../bench/generate.js";
import { rolloutArb } from "../support/arbitraries.js";

let wasm: Callforest;
let ts: Callforest;
beforeAll(async () => {
  wasm = await init({ backend: "wasm" });
  ts = await init({ backend: "ts" });
});

/** What a plan says, with its arrays copied out (the plan is released). */
function summary(plan: Plan) {
  const out = {
    report: plan.report,
    forest: plan.forest,
    rows: plan.rows.map((r) => ({
      ...r,
      tokenIds: Array.from(r.tokenIds),
      logprobs: Array.from(r.logprobs),
      lossMask: Array.from(r.lossMask),
    })),
  };
  plan.release();
  return out;
}

function same(rollout: unknown): void {
  expect(summary(wasm.plan(rollout))).toEqual(summary(ts.plan(rollout)));
}

// Every array typed (typedRollout), so every call that has no media, routes or versions is staged with others.

test("typed generated forests (media, twins, ties SPEC rejects among them) plan as on the TS core", () => {
  fc.assert(fc.property(rolloutArb().map(typed), same), { numRuns: 300 });
});

test("a run that fails at any call gives the one-call path's rejection", () => {
  const [base] = generateSixteenCallRollouts(1, "rollout", { seed: 11 });
  const calls = base.calls.length;
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: calls - 1 }),
      fc.constantFrom("negative token", "NaN logprob", "repeated id", "unlisted agent", "plain array", "media"),
      (at, fault) => {
        const rollout = typed(base);
        const call = { ...rollout.calls[at] } as Record<string, unknown>;
        const prompt = Int32Array.from(call.prompt_token_ids as Int32Array);
        const logprobs = Float32Array.from(call.generation_log_probs as Float32Array);
        if (fault === "negative token" && prompt.length > 0) prompt[prompt.length >> 1] = -7;
        if (fault === "NaN logprob" && logprobs.length > 0) logprobs[0] = Number.NaN;
        if (fault === "repeated id" && at > 0) call.id = rollout.calls[at - 1].id;
        if (fault === "unlisted agent") call.agent = "nobody";
        if (fault === "plain array") call.prompt_token_ids = Array.from(prompt);
        else call.prompt_token_ids = prompt;
        if (fault === "media" && prompt.length > 1) call.media = [{ id: "img", offset: 0, length: 1 }];
        call.generation_log_probs = logprobs;
        rollout.calls[at] = call as unknown as Rollout["calls"][number];
        same(rollout);
      },
    ),
    { numRuns: 200 },
  );
});

test("the bench's small rollouts plan as on the TS core", () => {
  for (const rollout of generateSixteenCallRollouts(30, "rollout", { seed: 5 })) same(rollout);
});

test("valid typed rollouts are staged many calls at once, never planned again call by call", () => {
  const many = vi.spyOn(RolloutAssembler.prototype, "commitStaged");
  const one = vi.spyOn(RolloutAssembler.prototype, "commit");
  try {
    for (const rollout of generateSixteenCallRollouts(5, "rollout", { seed: 9 })) summary(wasm.plan(rollout));
    expect({ staged: many.mock.calls.length > 0, oneByOne: one.mock.calls.length }).toEqual({
      staged: true,
      oneByOne: 0,
    });
  } finally {
    many.mockRestore();
    one.mockRestore();
  }
});

test("whether a rollout fits the core's memory does not depend on its arrays being typed", async () => {
  // 16 calls of ~4,000 tokens sharing a prefix: staged together they need more memory at once
  // than one at a time, so at some limits only the call-by-call path fits.
  const base = Array.from({ length: 4000 }, (_, i) => (i * 7) % 1000);
  const rollout = (typedArrays: boolean): Rollout => ({
    rollout_id: "r",
    reward: 1,
    calls: Array.from({ length: 16 }, (_, k) => {
      const prompt = [...base, ...Array.from({ length: 4 * k }, () => 5)];
      const generation = [1, 2, 3, 4];
      const logprobs = [-1, -1, -1, -1];
      return typedArrays
        ? {
            id: `c${k}`,
            prompt_token_ids: Int32Array.from(prompt),
            generation_token_ids: Int32Array.from(generation),
            generation_log_probs: Float32Array.from(logprobs),
          }
        : { id: `c${k}`, prompt_token_ids: prompt, generation_token_ids: generation, generation_log_probs: logprobs };
    }),
  });
  const statuses = new Set<string>();
  for (let kib = 256; kib <= 1024; kib += 64) {
    const cf = await init({ backend: "wasm", maxMemory: kib * 1024 });
    const typedPlan = summary(cf.plan(rollout(true)));
    const plainPlan = summary(cf.plan(rollout(false)));
    statuses.add(typedPlan.report.status);
    expect({ kib, plan: typedPlan }).toEqual({ kib, plan: plainPlan });
  }
  // The limits cross the line: some reject the rollout, some plan it.
  expect([...statuses].sort()).toEqual(["ok", "rejected"]);
});
