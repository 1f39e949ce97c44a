// MoE routed experts through the forest (SPEC `calls[].routed_experts`, "Rows", "Packed trees"):
// NeMo RL's envelope test vector, the types written, and on generated forests with forks and
// compaction whose routes agree, every backend and writer alike. (test/plan/v4-property.test.ts
// holds every row's and packed token's entry to the reference, conflicts and -1 entries too.)
import fc from "fast-check";
import { beforeAll, describe, expect, test } from "vitest";
import { init, type Callforest } from "../../src/index.js";
import { encodeRoutedExperts } from "../../src/codecs/routed-experts.js";
import { readRoutedExperts } from "../../src/plan/routed-experts.js";
import { packedToJson, rowToJson } from "../../src/output/jsonl.js";
import type { Plan, RoutedExperts, Rollout } from "../../src/types.js";
import { acceptedRolloutArb } from "../support/arbitraries.js";

let backends: { name: string; cf: Callforest }[] = [];
beforeAll(async () => {
  backends = [
    { name: "ts", cf: await init({ backend: "ts" }) },
    { name: "wasm", cf: await init() },
  ];
});

const L = 2;
const K = 3;
/**
 * The expert every call's router chose for token t, layer l, slot k: the same in every call (a
 * prefix cache that always hit), so routes link as tokens do.
 */
const expert = (t: number, l: number, k: number) => (t * 31 + l * 5 + k) % 30000;

/** The rollout with routed experts on every call, as envelopes or as nested lists. */
function withExperts(rollout: Rollout, lists: boolean): Rollout {
  return {
    ...rollout,
    calls: rollout.calls.map((c) => {
      const tokens = c.prompt_token_ids.length + c.generation_token_ids.length;
      const nested = Array.from({ length: tokens }, (_, t) =>
        Array.from({ length: L }, (_, l) => Array.from({ length: K }, (_, k) => expert(t, l, k))),
      );
      const flat = Int32Array.from(nested.flat(2));
      const envelope = encodeRoutedExperts(Int16Array.from(flat), tokens, L, K); // all fit int16
      return { ...c, routed_experts: lists ? nested : envelope };
    }),
  };
}

/** Entry (token t, layer l, slot k) of a row's or record's experts. */
function entry(experts: RoutedExperts, t: number, l: number, k: number): number {
  return experts.data[(t * L + l) * K + k];
}

function checkPlan(plan: Plan): void {
  for (const row of plan.rows) {
    expect(row.routedExperts!.tokens).toBe(row.numTokens);
    // "entry i being R(l, i), or all -1 where that is none (the leaf's last token, always)"
    for (let t = 0; t < row.numTokens - 1; t++) expect(entry(row.routedExperts!, t, 1, 2)).toBe(expert(t, 1, 2));
    expect(entry(row.routedExperts!, row.numTokens - 1, 1, 2)).toBe(-1);
  }
  for (const tree of plan.trees) {
    // Every packed token's route is its position's (all calls agree), but where no call routed
    // it: the last token of a call that nothing shared it with.
    for (let q = 0; q < tree.numTokens; q++) {
      const got = entry(tree.routedExperts!, q, 0, 1);
      if (got !== -1) expect(got).toBe(expert(tree.positionIds[q], 0, 1));
    }
  }
}

describe("the envelope", () => {
  test("Gym's test vector nrlre1:int16:2x1x2:AAABAAIAAwA= is [[[0,1]],[[2,3]]]", () => {
    const decoded = readRoutedExperts("nrlre1:int16:2x1x2:AAABAAIAAwA=", 2);
    expect(decoded).toMatchObject({ tokens: 2, layers: 1, topk: 2 });
    expect(Array.from((decoded as RoutedExperts).data)).toEqual([0, 1, 2, 3]);
    expect(readRoutedExperts([[[0, 1]], [[2, 3]]], 2)).toMatchObject({ tokens: 2, layers: 1, topk: 2 });
    expect(encodeRoutedExperts(Int16Array.of(0, 1, 2, 3), 2, 1, 2)).toBe("nrlre1:int16:2x1x2:AAABAAIAAwA=");
  });

  test("int8 and int32 envelopes read; values past int16 are written as int32", async () => {
    const int8 = readRoutedExperts("nrlre1:int8:2x1x1:AQI=", 2) as RoutedExperts;
    expect(Array.from(int8.data)).toEqual([1, 2]);
    const rollout: Rollout = {
      rollout_id: "wide",
      reward: 0,
      calls: [
        {
          id: "c",
          prompt_token_ids: [1],
          generation_token_ids: [2],
          generation_log_probs: [-1],
          routed_experts: [[[70000]], [[3]]],
        },
      ],
    };
    const plan = backends[1].cf.plan(rollout);
    expect(JSON.parse(rowToJson(plan.rows[0])).routed_experts).toBe(
      // SPEC v4: the row's last token has no route of its own (all -1).
      encodeRoutedExperts(Int32Array.of(70000, -1), 2, 1, 1),
    );
    plan.release();
  });
});

describe("through the forest", () => {
  test("every row token and every packed token gets the entry SPEC's rule names; backends agree", () => {
    fc.assert(
      fc.property(acceptedRolloutArb({ maxActions: 12 }), fc.boolean(), (base, lists) => {
        const rollout = withExperts(base, lists);
        const outputs = backends.map(({ cf }) => {
          const plan = cf.plan(rollout, { trees: true });
          expect(plan.report.status).toBe("ok");
          expect(plan.report.diagnostics.filter((d) => d.code === "route_mismatch")).toEqual([]);
          checkPlan(plan);
          const text = [...plan.rows.map((r) => rowToJson(r)), ...plan.trees.map((t) => packedToJson(t))].join("\n");
          plan.release();
          return text;
        });
        expect(outputs[1]).toBe(outputs[0]);
      }),
      { seed: 4, numRuns: 60 },
    );
  });

  test("a bin takes a call's last token's route from the first call that shared it: past int16, int32", () => {
    // A's children B and C route A's last token (3) alike, past int16; B shared it first, so its
    // route resolves it. Bins of 7: [A, B], [A, C], A's last token routed in both.
    const one = (n: number, at = -1, v = 0) => Array.from({ length: n }, (_, i) => [[i === at ? v : 1]]);
    const call = (id: string, prompt: number[], generation: number[], routed_experts: number[][][]) => ({
      id,
      prompt_token_ids: prompt,
      generation_token_ids: generation,
      generation_log_probs: generation.map(() => -1),
      routed_experts,
    });
    const rollout = {
      rollout_id: "r",
      reward: 1,
      calls: [
        call("A", [1, 2], [3, 4], one(4)),
        call("B", [1, 2, 3, 4, 5], [6], one(6, 3, 40000)),
        call("C", [1, 2, 3, 4, 7], [8], one(6, 3, 40000)),
      ],
    } as Rollout;
    for (const { cf } of backends) {
      const plan = cf.plan(rollout, { capacity: 7 });
      const withC = plan.bins.find((b) => b.calls.includes("C"))!;
      expect(withC.calls).toEqual(["A", "C"]);
      expect(withC.routedExperts!.data).toBeInstanceOf(Int32Array);
      // C's last token: routed by no one (-1).
      expect(Array.from(withC.routedExperts!.data)).toEqual([1, 1, 1, 40000, 1, -1]);
      plan.release();
    }
  });

  test("rows without routed experts in the input have no routed_experts field", () => {
    fc.assert(
      fc.property(acceptedRolloutArb({ maxActions: 6 }), (rollout) => {
        const plan = backends[0].cf.plan(rollout, { trees: true });
        expect(plan.rows.every((r) => r.routedExperts === undefined && !rowToJson(r).includes("routed_experts"))).toBe(
          true,
        );
        expect(plan.trees.every((t) => t.routedExperts === undefined)).toBe(true);
        plan.release();
      }),
      { seed: 5, numRuns: 20 },
    );
  });
});

describe("shapes across calls (SPEC v3)", () => {
  const call = (id: string, prompt: number[], generation: number[], routed_experts: unknown) => ({
    id,
    prompt_token_ids: prompt,
    generation_token_ids: generation,
    generation_log_probs: generation.map(() => -1),
    routed_experts,
  });
  const twoByOne = (n: number) => Array.from({ length: n }, (_, t) => [[t], [t + 1]]);

  // "an array with no entries ([], or S = 0) states no L and K": an ineligible call's empty array
  // is not compared with the others, before or after them.
  test.each([
    ["[]", []],
    ["an S = 0 envelope of another shape", "nrlre1:int16:0x1x2:"],
    ["an S = 0 envelope with L = K = 0", "nrlre1:int8:0x0x0:"],
  ])("an empty routed_experts (%s) on an ineligible call is accepted", async (_name, empty) => {
    const first: Rollout = {
      rollout_id: "empty-first",
      reward: 1,
      calls: [call("c0", [], [], empty), call("c1", [1], [2], twoByOne(2))] as Rollout["calls"],
    };
    const last: Rollout = {
      rollout_id: "empty-last",
      reward: 1,
      calls: [call("c1", [1], [2], twoByOne(2)), call("c0", [], [], empty)] as Rollout["calls"],
    };
    const { reference } = await import("../support/reference.js");
    for (const rollout of [first, last]) {
      expect(reference(rollout).status).toBe("ok");
      for (const { name, cf } of backends) {
        const plan = cf.plan(rollout, { trees: true, capacity: 8 });
        expect([name, plan.report.status, plan.report.detail]).toEqual([name, "ok", undefined]);
        expect(plan.rows[0].routedExperts).toMatchObject({ tokens: 2, layers: 2, topk: 1 });
        plan.release();
      }
    }
  });

  test("calls whose L and K differ but whose L x K agree are rejected at the second, on both backends", () => {
    const rollout = {
      rollout_id: "shapes",
      reward: 1,
      calls: [call("c1", [1], [2], twoByOne(2)), call("c2", [1, 2], [3], [[[1, 2]], [[2, 3]], [[3, 4]]])],
    } as Rollout;
    for (const { name, cf } of backends) {
      const plan = cf.plan(rollout);
      expect([name, plan.report.reason, plan.report.detail]).toEqual([
        name,
        "invalid_routed_experts",
        'call "c2" (calls[1]): routed_experts has 1x2 per token, where "c1" has 2x1',
      ]);
      plan.release();
    }
  });
});

describe("the CLI", () => {
  test("rows and packed records carry routed_experts, byte-identical from every reader and writer", async () => {
    const { mkdtempSync, writeFileSync, rmSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const { execFileSync } = await import("node:child_process");
    const dir = mkdtempSync(join(tmpdir(), "callforest-experts-"));
    try {
      const rollouts = fc
        .sample(acceptedRolloutArb({ maxActions: 8 }), { seed: 9, numRuns: 6 })
        .map((r, i) => withExperts(r, i % 2 === 0));
      const input = join(dir, "in.jsonl");
      writeFileSync(
        input,
        rollouts
          .map((r) => JSON.stringify(r, (_k, v) => (ArrayBuffer.isView(v) ? Array.from(v as Int32Array) : v)))
          .join("\n") + "\n",
      );
      const run = (...args: string[]) =>
        execFileSync("node", ["bin/callforest.js", "rows", input, "--quiet", ...args], { encoding: "utf8" });
      for (const layout of [[], ["--layout", "packed"], ["--capacity", "4096"]]) {
        const fast = run(...layout);
        expect(fast).toContain('"routed_experts":"nrlre1:int16:');
        expect(run(...layout, "--writer", "js")).toBe(fast);
        expect(run(...layout, "--backend", "ts")).toBe(fast);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
