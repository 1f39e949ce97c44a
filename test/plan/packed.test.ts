// Packed trees and bins (SPEC "Packed trees", "Bins"): SPEC's worked example segment by segment,
// the reference's trie and SPEC's bin invariants on generated forests on every backend
// (test/support/reference-check.ts), the builder, row_exceeds_capacity, and the CLI's packed JSONL
// from both writers.
import { readFileSync } from "node:fs";
import fc from "fast-check";
import { beforeAll, describe, expect, test } from "vitest";
import type { Callforest } from "../../src/index.js";
import { main } from "../../src/cli/main.js";
import { maskToInts, packedToJson } from "../../src/output/jsonl.js";
import type { Plan, Rollout } from "../../src/types.js";
import { acceptedRolloutArb } from "../support/arbitraries.js";
import { captureOutput } from "../support/capture.js";
import { checkBins, checkTrees } from "../support/reference-check.js";
import { TREE0_SEGMENTS, buildFrom } from "../support/worked-example.js";
import { everyBackend } from "../support/backends.js";

const LOGIN = new URL("../../examples/login-bug.json", import.meta.url).pathname;
const login = (): Rollout => JSON.parse(readFileSync(LOGIN, "utf8")) as Rollout;

let backends: { name: string; cf: Callforest }[] = [];
beforeAll(async () => {
  backends = await everyBackend();
});

/** A plan's packed records as plain data (arrays copied out), to compare backends. */
function packedContents(plan: Plan) {
  const plain = (r: Plan["trees"][number] | Plan["bins"][number]) => ({
    ...r,
    tokenIds: Array.from(r.tokenIds),
    positionIds: Array.from(r.positionIds),
    logprobs: Array.from(r.logprobs),
    lossMask: Array.from(r.lossMask),
  });
  return { report: plan.report, trees: plan.trees.map(plain), bins: plan.bins.map(plain) };
}

describe("SPEC's worked example", () => {
  test("tree 0 is SPEC's table: segments, positions, masks; trees 1-2 are C2 C4 and C5 C6", () => {
    for (const { name, cf } of backends) {
      const plan = cf.plan(login(), { trees: true });
      const tree = plan.trees[0];
      expect([name, tree.roots, tree.numTokens]).toEqual([name, ["C1", "C11"], 30]);
      expect(tree.segments.map((s) => [s.call, s.parent, s.start, s.length, s.end])).toEqual(TREE0_SEGMENTS);
      expect(tree.calls).toEqual(["C1", "C3", "C7", "C8", "C9", "C10", "C11", "C12"]);
      // "C8's and C10's segments both start at position 14"; "segments 1 and 7 both start at position 3"
      expect(Array.from(tree.positionIds)).toEqual([...Array(19).keys(), 14, 15, 16, 17, 18, 3, 4, 5, 6, 7, 8]);
      expect(plan.trees.slice(1).map((t) => t.calls.join(" "))).toEqual(["C2 C4", "C5 C6"]);
      // mask 1 on every call's generated tokens: C1 5-6, C3 8-9, C7 12-13, C8 15-16, C9 18,
      // C10 21-23, C11 27, C12 29
      const mask = maskToInts(tree.lossMask, 30);
      const ones = [...mask.keys()].filter((i) => mask[i] === 1);
      expect(ones).toEqual([5, 6, 8, 9, 12, 13, 15, 16, 18, 21, 22, 23, 27, 29]);
      // "The report has unique_tokens 49 and trie_tokens 46."
      expect([plan.report.unique_tokens, plan.report.trie_tokens]).toEqual([49, 46]);
      checkTrees(login(), plan.trees);
      plan.release();
      expect(tree.tokenIds.length).toBe(0); // emptied by release(), as rows are
    }
  });

  test("bins of 20: C1's tree in pieces (its context repeated), the system prompt shared with C11", () => {
    for (const { cf } of backends) {
      const plan = cf.plan(login(), { capacity: 20 });
      expect(
        plan.bins.map((b) => [
          b.roots.join(" "),
          b.numTokens,
          b.segments.map((s) => `${s.call}${s.trained ? "" : "*"}`).join(" "),
        ]),
      ).toEqual([
        ["C1", 19, "C1 C1 C3 C7 C8 C9"],
        ["C1", 19, "C1* C1* C3* C7* C10"],
        ["C1 C2 C11", 17, "C1* C11 C12 C2 C4"],
        ["C5", 8, "C5 C6"],
      ]);
      expect(plan.report.packed_tokens).toBe(63);
      checkBins(login(), plan.bins, 20, plan.report.packed_tokens);
      plan.release();
    }
  });

  test("a bin holding a prompt-only segment without the rest of its call trains every token once", () => {
    // C1's node is split after the system prompt that C11 shares; at these capacities the bin
    // that holds C11 holds the system prompt alone, without the rest of C1. A small tree A1 shares
    // that bin: none of its trained tokens may be lost, on any backend.
    const system = [100, 101, 102];
    const call = (id: string, prompt: number[], generation: number[]) => ({
      id,
      prompt_token_ids: prompt,
      generation_token_ids: generation,
      generation_log_probs: generation.map(() => -0.5),
    });
    const rollout = (rest: number) =>
      ({
        rollout_id: "split-prompt",
        reward: 1,
        calls: [
          call("C1", [...system, ...Array.from({ length: rest }, (_, i) => 1000 + i)], [7, 8]),
          call("A1", [5], [6, 6, 6, 6]),
          call("C11", [...system, 9], [10, 11]),
        ],
      }) as Rollout;
    for (const [rest, capacity] of [
      [20, 26],
      [20, 27],
      [1000, 1006],
      [1000, 1007],
    ]) {
      for (const { name, cf } of backends) {
        const plan = cf.plan(rollout(rest), { capacity });
        expect([name, capacity, plan.report.status]).toEqual([name, capacity, "ok"]);
        // C1's system prompt is in a bin without the rest of C1.
        expect(plan.bins.some((b) => b.segments.filter((s) => s.call === "C1").length === 1)).toBe(true);
        const trained = plan.bins.reduce(
          (n, b) => n + maskToInts(b.lossMask, b.numTokens).reduce((a, x) => a + x, 0),
          0,
        );
        expect([name, capacity, trained]).toEqual([name, capacity, plan.report.captured_tokens]);
        checkBins(rollout(rest), plan.bins, capacity, plan.report.packed_tokens);
        plan.release();
      }
    }
  });

  test("a capacity that holds every tree packs the trie once (packed_tokens = trie_tokens)", () => {
    const plan = backends[1].cf.plan(login(), { capacity: 64 });
    expect(plan.report.packed_tokens).toBe(plan.report.trie_tokens);
    checkBins(login(), plan.bins, 64, plan.report.packed_tokens);
    plan.release();
  });
});

describe("on generated forests", () => {
  test("trees and bins keep SPEC's invariants, and every backend gives the same records", () => {
    fc.assert(
      fc.property(acceptedRolloutArb(), fc.nat(64), (rollout, slack) => {
        const probe = backends[0].cf.plan(rollout);
        const longest = probe.rows.reduce((n, r) => Math.max(n, r.numTokens), 0);
        probe.release();
        const capacity = longest + slack;
        const plans = backends.map(({ cf }) => cf.plan(rollout, { trees: true, capacity }));
        try {
          checkTrees(rollout, plans[0].trees);
          checkBins(rollout, plans[0].bins, capacity, plans[0].report.packed_tokens);
          const first = packedContents(plans[0]);
          for (const other of plans.slice(1)) expect(packedContents(other)).toEqual(first);
          expect(plans[0].rows.length).toBe(plans[0].report.rows);
        } finally {
          for (const p of plans) p.release();
        }
      }),
      { seed: 20261201, numRuns: 100 },
    );
  });

  test("the builder packs as plan() does", () => {
    fc.assert(
      fc.property(acceptedRolloutArb({ maxActions: 10 }), (rollout) => {
        for (const { cf } of backends) {
          const planned = cf.plan(rollout, { trees: true, capacity: 4096 });
          const b = cf.builder({ rollout_id: rollout.rollout_id, reward: rollout.reward, agents: rollout.agents });
          for (const call of rollout.calls) {
            const slot = b.stage(call.prompt_token_ids.length, call.generation_token_ids.length);
            slot.promptTokenIds.set(call.prompt_token_ids);
            slot.generationTokenIds.set(call.generation_token_ids);
            slot.logprobs.set(call.generation_log_probs);
            b.commit({ id: call.id, agent: call.agent, kept: call.kept, media: call.media });
          }
          const built = b.finish({ trees: true, capacity: 4096 });
          expect(packedContents(built)).toEqual(packedContents(planned));
          built.release();
          planned.release();
        }
      }),
      { seed: 7, numRuns: 40 },
    );
  });
});

describe("row_exceeds_capacity and options", () => {
  test("a leaf longer than the capacity rejects the rollout, naming the leaf", () => {
    for (const { cf } of backends) {
      const plan = cf.plan(login(), { capacity: 18 });
      expect([plan.report.status, plan.report.reason, plan.report.detail]).toEqual([
        "rejected",
        "row_exceeds_capacity",
        'leaf call "C9" (calls[8]) holds 19 tokens, more than the capacity of 18',
      ]);
      expect([plan.rows, plan.bins, plan.report.packed_tokens]).toEqual([[], [], undefined]);
    }
  });

  test("without options there are no packed records; misused options are TypeErrors", () => {
    const { cf } = backends[0];
    const plan = cf.plan(login());
    expect([plan.trees, plan.bins, "packed_tokens" in plan.report]).toEqual([[], [], false]);
    for (const bad of [{ capacity: 0 }, { capacity: 1.5 }, { capacity: "64" }, { trees: 1 }]) {
      expect(() => cf.plan(login(), bad as never)).toThrow(TypeError);
    }
    expect(() => buildFrom(cf, login()).release()).not.toThrow();
  });
});

describe("the CLI", () => {
  async function rowsOut(...args: string[]): Promise<string> {
    const out: string[] = [];
    const run = await captureOutput(async () => {
      const code = await main(["rows", LOGIN, "--quiet", ...args]);
      return code;
    });
    expect(run.code).toBe(0);
    out.push(run.stdout);
    return out.join("");
  }

  test("--layout packed writes SPEC's packed records, byte-identical from both writers and backends", async () => {
    const fast = await rowsOut("--layout", "packed");
    for (const extra of [
      ["--writer", "js"],
      ["--backend", "ts"],
    ])
      expect(await rowsOut("--layout", "packed", ...extra)).toBe(fast);
    const lines = fast
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.tree)).toEqual([0, 1, 2]);
    expect(Object.keys(lines[0])).toEqual([
      "rollout_id",
      "tree",
      "roots",
      "calls",
      "num_tokens",
      "token_ids",
      "position_ids",
      "logprobs",
      "loss_mask",
      "segments",
      "media",
      "reward",
      "group_id",
    ]);
    const cf = backends[1].cf;
    const plan = cf.plan(login(), { trees: true });
    expect(fast).toBe(plan.trees.map((t) => packedToJson(t) + "\n").join(""));
    plan.release();
  });

  test("--capacity writes bins (ints masks too), and a too-long leaf is rejected while others go on", async () => {
    const bins = (await rowsOut("--capacity", "20", "--mask-format", "ints"))
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(bins.map((b) => [b.bin, b.roots])).toEqual([
      [0, ["C1"]],
      [1, ["C1"]],
      [2, ["C1", "C2", "C11"]],
      [3, ["C5"]],
    ]);
    expect(Object.keys(bins[0]).slice(0, 3)).toEqual(["rollout_id", "bin", "roots"]);
    expect(bins[1].segments[0]).toEqual({
      call: "C1",
      parent: -1,
      start: 0,
      length: 3,
      end: 19,
      tree: 0,
      trained: false,
    });
    expect(bins[1].loss_mask.slice(0, 14).every((b: number) => b === 0)).toBe(true);
  });

  test("usage errors: --capacity with --layout rows, a bad --layout or --capacity", async () => {
    for (const [args, message] of [
      [
        ["--capacity", "64", "--layout", "rows"],
        "callforest: --capacity lays out bins of packed records: it needs --layout packed, not rows",
      ],
      [["--layout", "tree"], "callforest: unknown --layout 'tree': expected rows or packed"],
      [["--capacity", "0"], "callforest: --capacity must be a positive integer, got '0'"],
    ] as const) {
      const run = await captureOutput(() => main(["rows", LOGIN, ...args]));
      expect([run.code, run.stderr]).toEqual([2, message + "\n"]);
    }
  });
});
