// The reference (test/support/reference.ts) against SPEC v4's own words: its worked examples
// (login-bug packed into three records, routes-refit), small hand cases for each v4 rule, and
// property tests of the reference's internal consistency on generated v4 rollouts.
import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  acceptedRolloutArb,
  acceptedV4RolloutArb,
  invalidV4RolloutArb,
  rolloutArb,
  v4RolloutArb,
} from "../support/arbitraries.js";
import { checkBins, checkTrees, naiveBins } from "../support/reference-check.js";
import { TREE0_SEGMENTS } from "../support/worked-example.js";
import { type RefAccepted, type RefPacked, type RefResult, reference, referenceTrie } from "../support/reference.js";

const example = (name: string): Record<string, unknown> =>
  JSON.parse(readFileSync(new URL(`../../examples/${name}.json`, import.meta.url), "utf8"));

function ok(result: RefResult): RefAccepted {
  if (result.status !== "ok") throw new Error(`rejected: ${result.reason}: ${result.message}`);
  return result;
}

/** Segments as SPEC's tables write them: call, parent, start, length, end. */
const table = (record: RefPacked) => record.segments.map((s) => [s.call, s.parent, s.start, s.length, s.end]);

interface CallSpec {
  id: string;
  agent?: string;
  prompt: number[];
  gen: number[];
  routes?: unknown;
  version?: unknown;
  media?: { id: string; offset: number; length: number }[];
  kept?: boolean;
}

/** A rollout from short call specs (logprobs −0.5, −0.25, …). */
function rollout(calls: CallSpec[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    rollout_id: "hand",
    reward: 1,
    ...extra,
    calls: calls.map((c) => ({
      id: c.id,
      ...(c.agent !== undefined ? { agent: c.agent } : {}),
      prompt_token_ids: c.prompt,
      generation_token_ids: c.gen,
      generation_log_probs: c.gen.map((_, k) => -0.5 / (k + 1)),
      ...(c.routes !== undefined ? { routed_experts: c.routes } : {}),
      ...(c.version !== undefined ? { weight_version: c.version } : {}),
      ...(c.media !== undefined ? { media: c.media } : {}),
      ...(c.kept !== undefined ? { kept: c.kept } : {}),
    })),
  };
}

/** Routes [S][1][1]: expert `base + i` for token i, or the given list per token (null: all −1). */
const routes1 = (experts: (number | null)[]) => experts.map((e) => [[e === null ? -1 : e]]);
const seq = (n: number, base = 0) => Array.from({ length: n }, (_, i) => base + i);

describe("SPEC's worked examples", () => {
  test("login-bug: five rows, three packed records, unique 49, trie 46", () => {
    const ref = ok(reference(example("login-bug"), { trees: true }));
    expect(ref.rows.map((r) => [r.leaf, r.calls.join(" "), r.trained.join(" ")])).toEqual([
      ["C4", "C2 C4", "C2 C4"],
      ["C6", "C5 C6", "C5 C6"],
      ["C9", "C1 C3 C7 C8 C9", "C8 C9"],
      ["C10", "C1 C3 C7 C10", "C1 C3 C7 C10"],
      ["C12", "C11 C12", "C11 C12"],
    ]);
    expect(ref.rows.every((r) => r.group_id === null && !("routed_experts" in r) && !("weight_versions" in r))).toBe(
      true,
    );
    expect(ref.counts).toMatchObject({ unique_tokens: 49, trie_tokens: 46, captured_tokens: 21, trained_tokens: 21 });
    const trees = ref.trees!;
    expect(trees.map((t) => [t.tree, t.roots, t.num_tokens])).toEqual([
      [0, ["C1", "C11"], 30],
      [1, ["C2"], 8],
      [2, ["C5"], 8],
    ]);
    expect(table(trees[0])).toEqual(TREE0_SEGMENTS);
    expect(trees[0].calls).toEqual(["C1", "C3", "C7", "C8", "C9", "C10", "C11", "C12"]);
    expect(trees[0].token_ids.slice(0, 3)).toEqual([100, 101, 102]);
    // "C8's and C10's segments both start at position 14"; "segments 1 and 7 both start at position 3"
    expect([14, 19, 3, 24].map((k) => trees[0].position_ids[k])).toEqual([14, 14, 3, 3]);
    expect(table(trees[1]).map((s) => s[0])).toEqual(["C2", "C4"]);
    expect(table(trees[2]).map((s) => s[0])).toEqual(["C5", "C6"]);
    expect(ref.diagnostics).toEqual([]);
    expect(
      reference(example("login-bug")).status === "ok" && "trie_tokens" in ok(reference(example("login-bug"))).counts,
    ).toBe(false);
  });

  test("routes-refit: route_mismatch, two rows with weight versions, one record of 15 tokens", () => {
    const ref = ok(reference(example("routes-refit"), { trees: true }));
    expect(ref.diagnostics).toEqual([{ code: "route_mismatch", call: "C3", near: "C2", at: 3, layer: 1 }]);
    expect(ref.rows.map((r) => [r.leaf, r.calls, r.trained, r.context, r.num_tokens])).toEqual([
      ["C2", ["C1", "C2"], ["C1", "C2"], [], 8],
      ["C3", ["C3"], ["C3"], [], 10],
    ]);
    const [row0, row1] = ref.rows;
    expect(row0.weight_versions).toEqual([-1, -1, -1, 7, 7, -1, 7, 8]);
    expect(row1.weight_versions).toEqual([-1, -1, -1, -1, -1, -1, -1, -1, -1, 8]);
    expect(row0.group_id).toBe("task-42");
    // "routes of token 7 all −1"; token 4 (C1's last) routed by C2's prefill
    expect(row0.routed_experts).toEqual([...seq(7).map((t) => [[2 * t], [2 * t + 1]]), [[-1], [-1]]]);
    expect(row1.routed_experts![3]).toEqual([[6], [63]]);
    expect(row1.routed_experts![9]).toEqual([[-1], [-1]]);
    expect(row1.loss_mask).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    expect(ref.counts).toMatchObject({ trie_tokens: 15, unique_tokens: 18, roots: 2, rows: 2 });
    const trees = ref.trees!;
    expect(trees).toHaveLength(1);
    expect(trees[0]).toMatchObject({
      num_tokens: 15,
      roots: ["C1", "C3"],
      calls: ["C1", "C2", "C3"],
      group_id: "task-42",
    });
    expect(table(trees[0])).toEqual([
      ["C1", -1, 0, 3, 15],
      ["C1", 0, 3, 2, 8],
      ["C2", 1, 5, 3, 8],
      ["C3", 0, 8, 7, 15],
    ]);
    // "token 4's route from C2's prefill"; C3's copy from token 3 on with its own routes
    expect(trees[0].routed_experts![4]).toEqual([[8], [9]]);
    expect(trees[0].routed_experts![8]).toEqual([[6], [63]]);
    expect(trees[0].routed_experts![14]).toEqual([[-1], [-1]]);
    expect(trees[0].weight_versions).toEqual([-1, -1, -1, 7, 7, -1, 7, 8, -1, -1, -1, -1, -1, -1, 8]);
    expect(trees[0].loss_mask).toEqual([0, 0, 0, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1]);
    expect(trees[0].position_ids).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 3, 4, 5, 6, 7, 8, 9]);
  });
});

describe("routes: −1 entries, vLLM's shape, the last token", () => {
  test("an all −1 entry agrees only with another all −1 entry", () => {
    const ref = ok(
      reference(
        rollout([
          { id: "C1", prompt: [1, 2, 3], gen: [4], routes: routes1([0, null, 2, 3]) },
          { id: "C2", prompt: [1, 2, 3, 4, 5], gen: [6], routes: routes1([0, null, 2, 9, 4, 5]) },
          { id: "C3", prompt: [1, 2, 3, 4, 7], gen: [8], routes: routes1([0, 5, 2, 3, 4, 5]) },
        ]),
        { trees: true },
      ),
    );
    // C2 continues C1 (token 3 is C1's last: none for C1), C3 does not
    expect(ref.forest.map((c) => c.parent)).toEqual([null, "C1", null]);
    expect(ref.diagnostics).toEqual([{ code: "route_mismatch", call: "C3", near: "C1", at: 1, layer: 0 }]);
    expect(ref.rows[0].routed_experts).toEqual(routes1([0, null, 2, 9, 4, null]));
    // the trie: C3 parts from C1 at token 1
    expect(table(ref.trees![0])).toEqual([
      ["C1", -1, 0, 1, 11],
      ["C1", 0, 1, 3, 6],
      ["C2", 1, 4, 2, 6],
      ["C3", 0, 6, 5, 11],
    ]);
    expect(ref.trees![0].routed_experts![3]).toEqual([[9]]); // C1's last token: C2's prefill
  });

  test("an entry mixing −1 with ids, or another negative id, is invalid_routed_experts", () => {
    const base = { id: "C1", prompt: [1, 2], gen: [3] };
    for (const bad of [
      [
        [[0], [-1]],
        [[1], [2]],
        [[3], [4]],
      ],
      [[[0, -1]], [[1, 2]], [[3, 4]]],
      routes1([0, -2, 1]),
      routes1([0, 1, -5]), // the last token's entry is validated too
    ]) {
      const r = reference(rollout([{ ...base, routes: bad }]));
      expect(r.status === "rejected" && [r.reason, r.call]).toEqual(["invalid_routed_experts", "C1"]);
    }
    // an envelope: int8 −1 −1 is an unrecorded entry, −1 0 is not
    const envelope = (bytes: number[]) =>
      `nrlre1:int8:3x1x2:${Buffer.from(Int8Array.from(bytes).buffer).toString("base64")}`;
    expect(reference(rollout([{ ...base, routes: envelope([0, 1, -1, -1, 2, 3]) }])).status).toBe("ok");
    expect(reference(rollout([{ ...base, routes: envelope([0, 1, -1, 0, 2, 3]) }])).status).toBe("rejected");
  });

  test("vLLM's shape S = len(full) − 1 reads; S = len(full) − 2 does not; entries past len(full) are ignored", () => {
    const calls = (s1: number, s2: number): CallSpec[] => [
      { id: "C1", prompt: [1, 2, 3], gen: [4, 5], routes: routes1(seq(s1, 10)) },
      { id: "C2", prompt: [1, 2, 3, 4, 5, 6], gen: [7, 8], routes: routes1(seq(s2, 10)) },
    ];
    const vllm = ok(reference(rollout(calls(4, 7))));
    expect(vllm.forest[1].parent).toBe("C1");
    // row entry i is R(C2, i): C2's prefill for tokens 0..6, −1 for its last token
    expect(vllm.rows[0].routed_experts).toEqual(routes1([...seq(7, 10), null]));
    const short = reference(rollout(calls(3, 7)));
    expect(short.status === "rejected" && [short.reason, short.call]).toEqual(["invalid_routed_experts", "C1"]);
    const long = ok(reference(rollout(calls(9, 12))));
    expect(long.rows[0].routed_experts).toEqual(routes1([...seq(7, 10), null]));
    // a call with one token may give no entries (S = 0 = len − 1)
    expect(reference(rollout([{ id: "C1", prompt: [], gen: [1], routes: [] }])).status).toBe("ok");
  });

  test("a call's own entry for its last token is ignored: its continuation's prefill routes it", () => {
    const ref = ok(
      reference(
        rollout([
          { id: "C1", prompt: [1, 2], gen: [3], routes: routes1([0, 1, 2]) },
          { id: "C2", prompt: [1, 2, 3, 4], gen: [5], routes: routes1([0, 1, 7, 8, 9]) },
        ]),
        { trees: true },
      ),
    );
    expect(ref.forest[1].parent).toBe("C1");
    expect(ref.rows[0].routed_experts).toEqual(routes1([0, 1, 7, 8, null]));
    expect(table(ref.trees![0])).toEqual([
      ["C1", -1, 0, 3, 5],
      ["C2", 0, 3, 2, 5],
    ]);
    expect(ref.trees![0].routed_experts).toEqual(routes1([0, 1, 7, 8, null]));
  });

  test("R(c, i) comes from the nearest call on the path that routes token i", () => {
    // C3's prefill routes C2's last token (5) differently from C2's child C4's: C3 and C4 are
    // both children of C2, but C5 continues C4 and must agree with R(C4, ·), which holds C4's
    // route of token 5
    const ref = ok(
      reference(
        rollout([
          { id: "C1", prompt: [1], gen: [2], routes: routes1([0, 0]) },
          { id: "C2", prompt: [1, 2, 3], gen: [5], routes: routes1([0, 1, 2, 0]) },
          { id: "C3", prompt: [1, 2, 3, 5, 6], gen: [7], routes: routes1([0, 1, 2, 30, 4, 5]) },
          { id: "C4", prompt: [1, 2, 3, 5, 8], gen: [9], routes: routes1([0, 1, 2, 40, 4, 5]) },
          { id: "C5", prompt: [1, 2, 3, 5, 8, 9, 10], gen: [11], routes: routes1([0, 1, 2, 40, 4, 5, 6, 7]) },
          { id: "C6", prompt: [1, 2, 3, 5, 8, 9, 10], gen: [12], routes: routes1([0, 1, 2, 30, 4, 5, 6, 7]) },
        ]),
        { trees: true },
      ),
    );
    expect(ref.forest.map((c) => c.parent)).toEqual([null, "C1", "C2", "C2", "C4", "C2"]);
    expect(ref.diagnostics).toEqual([{ code: "route_mismatch", call: "C6", near: "C4", at: 3, layer: 0 }]);
    // the trie: token 5 (position 3) resolved by C3, the first call that routes it, so C4 parts
    // there, and C5 follows C4, C6 follows C3's route of it
    expect(table(ref.trees![0])).toEqual([
      ["C1", -1, 0, 2, 15],
      ["C2", 0, 2, 1, 15],
      ["C2", 1, 3, 1, 10],
      ["C3", 2, 4, 2, 6],
      ["C6", 2, 6, 4, 10],
      ["C4", 1, 10, 3, 15],
      ["C5", 5, 13, 2, 15],
    ]);
    expect(ref.trees![0].routed_experts![3]).toEqual([[30]]);
    expect(ref.trees![0].routed_experts![10]).toEqual([[40]]);
  });
});

describe("weight versions and group ids", () => {
  test("invalid weight versions are invalid_weight_version, checked after routes, before media", () => {
    for (const bad of [-1, 2 ** 31, 1.5, "7", true, [7], [7, 8, 9], [7, -1], [7, 0.5]]) {
      const r = reference(rollout([{ id: "C1", prompt: [1], gen: [2, 3], version: bad }]));
      expect(r.status === "rejected" && [r.reason, r.call]).toEqual(["invalid_weight_version", "C1"]);
    }
    for (const good of [0, 2 ** 31 - 1, [0, 2 ** 31 - 1], null])
      expect(reference(rollout([{ id: "C1", prompt: [1], gen: [2, 3], version: good }])).status).toBe("ok");
    const both = reference(rollout([{ id: "C1", prompt: [1], gen: [2], version: -1, routes: routes1([-2, 0]) }]));
    expect(both.status === "rejected" && both.reason).toBe("invalid_routed_experts");
    const media = [{ id: "x", offset: 5, length: 1 }];
    const withMedia = reference(rollout([{ id: "C1", prompt: [1], gen: [2], version: -1, media }]));
    expect(withMedia.status === "rejected" && withMedia.reason).toBe("invalid_weight_version");
  });

  test("versions per token on each call's generated span, −1 elsewhere and where a call gives none", () => {
    const ref = ok(
      reference(
        rollout([
          { id: "C1", prompt: [1], gen: [2, 3], version: [4, 5] },
          { id: "C2", prompt: [1, 2, 3, 9], gen: [4] },
          { id: "C3", prompt: [1, 2, 3, 9, 4, 9], gen: [5, 6], version: 6 },
          { id: "C4", prompt: [50], gen: [51] },
        ]),
        { trees: true },
      ),
    );
    expect(ref.rows.map((r) => r.weight_versions)).toEqual([
      [-1, 4, 5, -1, -1, -1, 6, 6],
      [-1, -1],
    ]);
    expect(ref.trees!.map((t) => t.weight_versions)).toEqual([
      [-1, 4, 5, -1, -1, -1, 6, 6],
      [-1, -1],
    ]);
    // no version anywhere: no field
    expect("weight_versions" in ok(reference(rollout([{ id: "C1", prompt: [1], gen: [2] }]))).rows[0]).toBe(false);
  });

  test("group_id: a string or null on every row and record; anything else is invalid_rollout", () => {
    const one = [{ id: "C1", prompt: [1], gen: [2] }];
    for (const [given, want] of [
      [undefined, null],
      [null, null],
      ["g", "g"],
      ["", ""],
    ] as const) {
      const ref = ok(reference(rollout(one, given === undefined ? {} : { group_id: given }), { trees: true }));
      expect([ref.group_id, ref.rows[0].group_id, ref.trees![0].group_id]).toEqual([want, want, want]);
    }
    for (const bad of [7, true, ["g"], { id: "g" }]) {
      const r = reference(rollout(one, { group_id: bad }));
      expect(r.status === "rejected" && [r.reason, r.call]).toEqual(["invalid_rollout", null]);
    }
  });
});

describe("the token trie", () => {
  const agents = [
    { id: "L", parent: null, mode: "leader" },
    { id: "A", parent: "L", mode: "fresh" },
    { id: "B", parent: "L", mode: "fresh" },
  ];
  const P = [1, 2, 3];
  const G = [10, 11];

  test("twins: each twin's generation in its own segment; a tie goes to the latest", () => {
    const ref = ok(
      reference(
        rollout(
          [
            { id: "L1", agent: "L", prompt: [90], gen: [91] },
            { id: "T1", agent: "A", prompt: P, gen: G },
            { id: "T2", agent: "B", prompt: P, gen: G },
            { id: "N", agent: "A", prompt: [...P, ...G, 4], gen: [12] },
          ],
          { agents },
        ),
        { trees: true },
      ),
    );
    expect(ref.forest.map((c) => c.parent)).toEqual([null, null, null, "T1"]);
    const twins = ref.trees![1];
    expect(twins.roots).toEqual(["T1", "T2"]);
    expect(table(twins)).toEqual([
      ["T1", -1, 0, 3, 9],
      ["T1", 0, 3, 2, 5],
      ["T2", 0, 5, 2, 9],
      ["N", 2, 7, 2, 9],
    ]);
    expect(twins.loss_mask).toEqual([0, 0, 0, 1, 1, 1, 1, 0, 1]);
  });

  test("twins continued by both agents: no bins of capacity C hold fewer than row_tokens", () => {
    const r = rollout(
      [
        { id: "T1", agent: "A", prompt: P, gen: G },
        { id: "T2", agent: "B", prompt: P, gen: G },
        { id: "N", agent: "A", prompt: [...P, ...G, 4], gen: [12] },
        { id: "M", agent: "B", prompt: [...P, ...G, 5], gen: [13] },
      ],
      { agents },
    );
    const ref = ok(reference(r, { capacity: 7 }));
    expect(ref.rows.map((row) => [row.leaf, row.calls])).toEqual([
      ["N", ["T1", "N"]],
      ["M", ["T2", "M"]],
    ]);
    // both N and M follow T2's node (the tie's latest); T1's generation needs a bin of its own
    expect(table(ref.trees![0])).toEqual([
      ["T1", -1, 0, 3, 11],
      ["T1", 0, 3, 2, 5],
      ["T2", 0, 5, 2, 11],
      ["N", 2, 7, 2, 9],
      ["M", 2, 9, 2, 11],
    ]);
    const bins = naiveBins(r, 7);
    expect(checkBins(r, bins, 7)).toBe(19);
    expect(ref.counts.row_tokens).toBe(14);
  });

  test("records name the forest roots of the calls that created their segments", () => {
    // twins with empty prompts are two trie roots; N continues X1 in the forest (same agent) but
    // hangs from X2 in the trie (the tie's latest), so X2's record names X1 too
    const ref = ok(
      reference(
        rollout(
          [
            { id: "X1", agent: "A", prompt: [], gen: [5, 6] },
            { id: "X2", agent: "B", prompt: [], gen: [5, 6] },
            { id: "N", agent: "A", prompt: [5, 6, 8], gen: [9] },
          ],
          { agents },
        ),
        { trees: true },
      ),
    );
    expect(ref.forest.map((c) => c.parent)).toEqual([null, null, "X1"]);
    expect(ref.trees!.map((t) => [t.roots, t.calls, table(t)])).toEqual([
      [["X1"], ["X1"], [["X1", -1, 0, 2, 2]]],
      [
        ["X1", "X2"],
        ["X2", "N"],
        [
          ["X2", -1, 0, 2, 4],
          ["N", 0, 2, 2, 4],
        ],
      ],
    ]);
  });

  test("a prefix break inside a generation: the resent part of the answer is shared", () => {
    const ref = ok(
      reference(
        rollout([
          { id: "C1", prompt: P, gen: [10, 11, 12, 13] },
          { id: "C2", prompt: [...P, 10, 11, 99], gen: [20] },
        ]),
        { trees: true },
      ),
    );
    expect(ref.diagnostics).toMatchObject([{ code: "prefix_break", call: "C2", near: "C1", at: 5 }]);
    expect(ref.counts).toMatchObject({ roots: 2, unique_tokens: 14, trie_tokens: 9 });
    const [t] = ref.trees!;
    expect(t.roots).toEqual(["C1", "C2"]);
    expect(table(t)).toEqual([
      ["C1", -1, 0, 5, 9],
      ["C1", 0, 5, 2, 7],
      ["C2", 0, 7, 2, 9],
    ]);
    // C1's tokens 10 11 are trained once, in C1's segment; C2's row has them as untrained prompt
    expect(t.loss_mask).toEqual([0, 0, 0, 1, 1, 1, 1, 0, 1]);
    expect(ref.rows[1].loss_mask).toEqual([0, 0, 0, 0, 0, 0, 1]);
  });

  test("a call stops at its prompt's end, even where it goes on sharing", () => {
    const ref = ok(
      reference(
        rollout([
          { id: "C1", prompt: P, gen: [10, 11] },
          { id: "C2", prompt: P, gen: [10, 12] },
        ]),
        { trees: true },
      ),
    );
    expect(table(ref.trees![0])).toEqual([
      ["C1", -1, 0, 3, 7],
      ["C1", 0, 3, 2, 5],
      ["C2", 0, 5, 2, 7],
    ]);
  });

  const img = (id: string, offset = 1, length = 3) => [{ id, offset, length }];

  test("media inside a shared prefix: shared once, with its occurrence", () => {
    const ref = ok(
      reference(
        rollout([
          { id: "C1", prompt: [1, 9, 9, 9, 2, 3], gen: [4], media: img("a") },
          { id: "C2", prompt: [1, 9, 9, 9, 2, 5], gen: [6], media: img("a") },
        ]),
        { trees: true },
      ),
    );
    expect(table(ref.trees![0])).toEqual([
      ["C1", -1, 0, 5, 9],
      ["C1", 0, 5, 2, 7],
      ["C2", 0, 7, 2, 9],
    ]);
    expect(ref.trees![0].media).toEqual(img("a"));
  });

  test("another image of the same size: not shared from the occurrence on", () => {
    const ref = ok(
      reference(
        rollout([
          { id: "C1", prompt: [1, 9, 9, 9, 2], gen: [4], media: img("a") },
          { id: "C2", prompt: [1, 9, 9, 9, 2, 4, 7], gen: [6], media: img("b") },
        ]),
        { trees: true },
      ),
    );
    expect(ref.diagnostics).toEqual([{ code: "media_mismatch", call: "C2" }]);
    expect(table(ref.trees![0])).toEqual([
      ["C1", -1, 0, 1, 13],
      ["C1", 0, 1, 5, 6],
      ["C2", 0, 6, 7, 13],
    ]);
    expect(ref.trees![0].media).toEqual([...img("a"), ...img("b", 6)]);
  });

  test("a call that would stop inside an occurrence stops at its start", () => {
    // same image id, but the placeholder tokens part inside it; and routes that part inside it
    for (const calls of [
      [
        { id: "C1", prompt: [1, 9, 9, 9, 2], gen: [4], media: img("a") },
        { id: "C2", prompt: [1, 9, 8, 9, 2], gen: [5], media: img("a") },
      ],
      [
        { id: "C1", prompt: [1, 9, 9, 9, 2], gen: [4], media: img("a"), routes: routes1([0, 1, 2, 3, 4, 5]) },
        { id: "C2", prompt: [1, 9, 9, 9, 2], gen: [5], media: img("a"), routes: routes1([0, 1, 7, 3, 4, 5]) },
      ],
    ]) {
      const ref = ok(reference(rollout(calls), { trees: true }));
      expect(table(ref.trees![0])).toEqual([
        ["C1", -1, 0, 1, 11],
        ["C1", 0, 1, 5, 6],
        ["C2", 0, 6, 5, 11],
      ]);
      expect(ref.trees![0].media).toEqual([...img("a"), ...img("a", 6)]);
    }
  });

  test("roots sharing a system prompt are one record; records in the ledger order of their first creators", () => {
    const ref = ok(
      reference(
        rollout([
          { id: "C1", prompt: [7, 8], gen: [9] },
          { id: "C2", prompt: [1, 2, 3], gen: [4] },
          { id: "C3", prompt: [7, 5], gen: [6] },
        ]),
        { trees: true },
      ),
    );
    expect(ref.trees!.map((t) => [t.roots, t.calls, table(t)])).toEqual([
      [
        ["C1", "C3"],
        ["C1", "C3"],
        [
          ["C1", -1, 0, 1, 5],
          ["C1", 0, 1, 2, 3],
          ["C3", 0, 3, 2, 5],
        ],
      ],
      [["C2"], ["C2"], [["C2", -1, 0, 4, 4]]],
    ]);
  });

  test("bins: a naive packer's bins pass the checker, broken ones do not", () => {
    const r = example("login-bug");
    for (const capacity of [19, 24, 30, 64]) checkBins(r, naiveBins(r, capacity), capacity);
    expect(checkBins(r, naiveBins(r, 19), 19, 63)).toBe(63);
    expect(() => checkBins(r, naiveBins(r, 19), 19, 62)).toThrow(/packed_tokens/);
    const bins = naiveBins(r, 19);
    const dropped = bins.slice(1);
    expect(() => checkBins(r, dropped, 19)).toThrow(/trained/);
    const twice = naiveBins(r, 64);
    expect(() => checkBins(r, [...twice, twice[0]], 64)).toThrow();
    const tooSmall = naiveBins(r, 30);
    expect(() => checkBins(r, tooSmall, 24)).toThrow(/capacity/);
    expect(reference(r, { capacity: 18 })).toMatchObject({
      status: "rejected",
      reason: "row_exceeds_capacity",
      call: "C9",
    });
  });
});

/** A JSONL-shaped record as the API hands records over: camelCase, bitset masks, typed arrays. */
function asApi(record: Record<string, unknown>): Record<string, unknown> {
  const n = record.num_tokens as number;
  const bits = new Uint8Array(Math.ceil(n / 8));
  (record.loss_mask as number[]).forEach((b, i) => {
    bits[i >> 3] |= b << (i & 7);
  });
  const routes = record.routed_experts as number[][][] | undefined;
  return {
    index: record.tree ?? record.bin,
    roots: record.roots,
    calls: record.calls,
    numTokens: n,
    tokenIds: Int32Array.from(record.token_ids as number[]),
    positionIds: Int32Array.from(record.position_ids as number[]),
    logprobs: Float32Array.from(record.logprobs as number[]),
    lossMask: bits,
    segments: record.segments,
    media: record.media,
    ...(routes
      ? {
          routedExperts: {
            tokens: routes.length,
            layers: routes[0]?.length ?? 0,
            topk: routes[0]?.[0]?.length ?? 0,
            data: Int32Array.from(routes.flat(2)),
          },
        }
      : {}),
    ...(record.weight_versions ? { weightVersions: Int32Array.from(record.weight_versions as number[]) } : {}),
  };
}

describe("the checkers read both shapes and catch what differs", () => {
  test("checkTrees: the reference's own trees pass in JSONL and API shape; a changed one does not", () => {
    const r = example("routes-refit");
    const trees = referenceTrie(r);
    checkTrees(r, trees);
    checkTrees(
      r,
      trees.map((t) => asApi(t as unknown as Record<string, unknown>)),
    );
    const moved = structuredClone(trees);
    moved[0].routed_experts![4] = [[6], [7]];
    expect(() => checkTrees(r, moved)).toThrow(/routed_experts/);
    const split = structuredClone(trees);
    split[0].segments[3].parent = 1;
    expect(() => checkTrees(r, split)).toThrow(/segments/);
    const bins = naiveBins(r, 10);
    expect(bins).toHaveLength(2); // tree of 15 tokens > 10: one bin per trie leaf's path
    checkBins(r, bins, 10);
    checkBins(
      r,
      bins.map((b) => asApi(b as unknown as Record<string, unknown>)),
      10,
    );
    const versions = structuredClone(bins);
    versions[0].weight_versions![3] = 9;
    expect(() => checkBins(r, versions, 10)).toThrow(/weight_versions/);
  });
});

/** SPEC's packed-record invariants for one accepted rollout, from the reference's own output. */
function checkTrie(rollout: unknown, ref: RefAccepted): void {
  const trees = ref.trees!;
  const raw = (rollout as { calls: Record<string, unknown>[] }).calls;
  const byId = new Map(raw.map((c) => [c.id as string, c]));
  const fullOf = (id: string) => {
    const c = byId.get(id)!;
    return [
      ...Array.from(c.prompt_token_ids as ArrayLike<number>),
      ...Array.from(c.generation_token_ids as ArrayLike<number>),
    ];
  };
  const eligible = ref.forest.filter((c) => c.eligible);
  expect(ref.counts.trie_tokens).toBe(trees.reduce((n, t) => n + t.num_tokens, 0));
  const mask = trees.reduce((n, t) => n + t.loss_mask.reduce((a, b) => a + b, 0), 0);
  expect(mask).toBe(ref.counts.captured_tokens);
  // records in the ledger order of their root nodes' creators
  const ledger = new Map(ref.forest.map((c) => [c.id, c.index]));
  const firstCreators = trees.map((t) => ledger.get(t.segments[0].call)!);
  expect(firstCreators).toEqual([...firstCreators].sort((a, b) => a - b));
  const found = new Map<string, number>();
  for (const t of trees) {
    // layout: tiles in pre-order, parents first, ends past subtrees
    let at = 0;
    t.segments.forEach((s, i) => {
      expect(s.start).toBe(at);
      expect(s.length).toBeGreaterThan(0);
      expect(s.parent).toBeLessThan(i);
      at += s.length;
      const inSubtree = (x: number): boolean => x === i || (x > i && inSubtree(t.segments[x].parent));
      let j = i + 1;
      while (j < t.segments.length && inSubtree(j)) j++;
      expect(s.end).toBe(j < t.segments.length ? t.segments[j].start : t.num_tokens);
      // a child starts where its parent ends
      if (s.parent >= 0) {
        const p = t.segments[s.parent];
        expect(t.position_ids[s.start]).toBe(t.position_ids[p.start + p.length - 1] + 1);
      } else expect(t.position_ids[s.start]).toBe(0);
      // children in the ledger order of their creators
      const siblings = t.segments.filter((x) => x.parent === s.parent && s.parent >= 0).map((x) => ledger.get(x.call)!);
      expect(siblings).toEqual([...siblings].sort((a, b) => a - b));
    });
    expect(at).toBe(t.num_tokens);
    expect(t.segments.filter((s) => s.parent < 0)).toHaveLength(1);
    expect(t.calls).toEqual([...new Set(t.segments.map((s) => s.call))]);
    // media never cross a segment
    for (const m of t.media) {
      const s = t.segments.find((x) => x.start <= m.offset && m.offset < x.start + x.length)!;
      expect(m.offset + m.length).toBeLessThanOrEqual(s.start + s.length);
    }
    // each eligible call's full sequence is a trie path; its generated tokens are trained once,
    // in its own segments
    for (const c of eligible) {
      const full = fullOf(c.id);
      const last = t.segments.findIndex(
        (s) => s.call === c.id && t.position_ids[s.start + s.length - 1] === full.length - 1,
      );
      if (last < 0) continue;
      found.set(c.id, (found.get(c.id) ?? 0) + 1);
      const chain: number[] = [];
      for (let s = last; s >= 0; s = t.segments[s].parent) chain.unshift(s);
      const path = chain.flatMap((s) => seq(t.segments[s].length, t.segments[s].start));
      expect(path.map((k) => t.token_ids[k])).toEqual(full);
      expect(path.map((k) => t.position_ids[k])).toEqual(seq(full.length));
      // routes on its path agree with the call's own where it has one
      const given = byId.get(c.id)!.routed_experts;
      if (Array.isArray(given) && t.routed_experts)
        path.forEach((k, i) => {
          if (i < full.length - 1) expect(t.routed_experts![k]).toEqual(given[i]);
        });
      const trained = t.segments.flatMap((s) =>
        s.call === c.id ? seq(s.length, s.start).filter((k) => t.loss_mask[k] === 1) : [],
      );
      expect(trained.map((k) => t.position_ids[k])).toEqual(seq(c.generationLength, c.promptLength));
      const lps = Array.from(byId.get(c.id)!.generation_log_probs as ArrayLike<number>).map((x) => Math.fround(x));
      expect(trained.map((k) => t.logprobs[k])).toEqual(lps);
    }
  }
  expect(eligible.every((c) => found.get(c.id) === 1)).toBe(true);
  // every leaf's path is its row: tokens, positions, media, routes where the row's entry is not −1;
  // each path token sees exactly the path tokens before it
  for (const row of ref.rows) {
    const t = trees.find((x) =>
      x.segments.some((s) => s.call === row.leaf && x.position_ids[s.start + s.length - 1] === row.num_tokens - 1),
    )!;
    const last = t.segments.findIndex(
      (s) => s.call === row.leaf && t.position_ids[s.start + s.length - 1] === row.num_tokens - 1,
    );
    const chain: number[] = [];
    for (let s = last; s >= 0; s = t.segments[s].parent) chain.unshift(s);
    const path = chain.flatMap((s) => seq(t.segments[s].length, t.segments[s].start));
    expect(path.map((k) => t.token_ids[k])).toEqual(row.token_ids);
    const media = t.media.filter((m) => path.includes(m.offset)).map((m) => ({ ...m, offset: path.indexOf(m.offset) }));
    expect(media).toEqual(row.media);
    if (row.routed_experts) {
      path.forEach((k, i) => {
        if (row.routed_experts![i].flat().some((e) => e !== -1))
          expect(t.routed_experts![k]).toEqual(row.routed_experts![i]);
      });
    }
    chain.forEach((s, depth) => {
      const q = t.segments[s].start;
      const seen = t.segments.map((x, i) => (x.start <= q && q < x.end ? i : -1)).filter((i) => i >= 0);
      expect(seen).toEqual(chain.slice(0, depth + 1));
    });
  }
}

describe("properties of the reference on generated v4 rollouts", () => {
  test("trie invariants, each generated token trained once, rows' versions and routes", () => {
    fc.assert(
      fc.property(acceptedV4RolloutArb({ maxActions: 14 }), (r) => {
        const ref = ok(reference(r, { trees: true }));
        checkTrie(r, ref);
        checkTrees(r, ref.trees!);
        // rows: versions only on the generated spans of the path's calls; the last token's route −1
        const forest = new Map(ref.forest.map((c) => [c.id, c]));
        for (const row of ref.rows) {
          if (row.weight_versions) {
            const generated = row.token_ids.map((_, i) =>
              row.calls.some((id) => {
                const c = forest.get(id)!;
                return c.promptLength <= i && i < c.promptLength + c.generationLength;
              }),
            );
            row.weight_versions.forEach((v, i) => {
              if (!generated[i]) expect(v).toBe(-1);
            });
          }
          if (row.routed_experts)
            expect(row.routed_experts[row.num_tokens - 1].flat().every((e) => e === -1)).toBe(true);
        }
      }),
      { numRuns: 80 },
    );
  });

  test("without routes: trie_tokens ≤ unique_tokens, and every rollout's bins check", () => {
    fc.assert(
      fc.property(acceptedV4RolloutArb({ maxActions: 14, v4: { routes: "never" } }), (r) => {
        const ref = ok(reference(r, { trees: true }));
        checkTrie(r, ref);
        expect(ref.counts.trie_tokens!).toBeLessThanOrEqual(ref.counts.unique_tokens);
        const longest = Math.max(...ref.rows.map((row) => row.num_tokens));
        for (const capacity of [longest, longest + 7, ref.counts.trie_tokens!])
          checkBins(r, naiveBins(r, capacity), capacity);
      }),
      { numRuns: 60 },
    );
  });

  test("with routes: bins check, and a route_mismatch names a candidate that disagrees where it says", () => {
    fc.assert(
      fc.property(acceptedV4RolloutArb({ maxActions: 14, v4: { routes: "always" } }), (r) => {
        const ref = ok(reference(r, { trees: true }));
        const longest = Math.max(...ref.rows.map((row) => row.num_tokens));
        checkBins(r, naiveBins(r, longest), longest);
        for (const d of ref.diagnostics.filter((x) => x.code === "route_mismatch")) {
          const c = ref.forest.find((x) => x.id === d.call)!;
          expect(c.routeMismatch).toBe(true);
          expect(ref.forest.find((x) => x.id === d.near)!.index).toBeLessThan(c.index);
          expect(d.at).toBeGreaterThanOrEqual(0);
          expect(d.layer).toBeGreaterThanOrEqual(0);
        }
      }),
      { numRuns: 40 },
    );
  });

  test("routes that agree (a call's own last entry aside) link and pack as no routes do", () => {
    fc.assert(
      fc.property(acceptedV4RolloutArb({ maxActions: 14, v4: { routes: "always", conflicts: false } }), (r) => {
        const stripped = { ...r, calls: r.calls.map(({ routed_experts, ...c }) => c) };
        const withRoutes = ok(reference(r, { trees: true }));
        const without = ok(reference(stripped, { trees: true }));
        expect(withRoutes.forest.map((c) => c.parent)).toEqual(without.forest.map((c) => c.parent));
        expect(withRoutes.diagnostics).toEqual(without.diagnostics);
        expect(withRoutes.trees!.map(table)).toEqual(without.trees!.map(table));
      }),
      { numRuns: 40 },
    );
  });

  test("v4 faults are rejected with their code, at their call", () => {
    fc.assert(
      fc.property(invalidV4RolloutArb(), (c) => {
        const r = reference(c.rollout);
        expect(r.status === "rejected" && { reason: r.reason, call: r.call }).toEqual({ reason: c.code, call: c.call });
      }),
      { numRuns: 60 },
    );
  });

  test("the generators make conflicts, −1 entries, both shapes, versions, group ids", () => {
    const samples = fc.sample(v4RolloutArb({ maxActions: 14, v4: { routes: "always", versions: "always" } }), {
      numRuns: 150,
      seed: 7,
    });
    const results = samples.map((r) => reference(r, { trees: true }));
    const diagnostics = results.flatMap((x) => (x.status === "ok" ? x.diagnostics : []));
    expect(diagnostics.some((d) => d.code === "route_mismatch")).toBe(true);
    const calls = samples.flatMap((r) => r.calls as unknown as Record<string, unknown>[]);
    const lists = calls.map((c) => c.routed_experts).filter(Array.isArray) as number[][][][];
    expect(lists.some((l) => l.some((e) => e.flat().every((x) => x === -1)))).toBe(true);
    const lengths = calls.map((c) => {
      const n = (c.prompt_token_ids as ArrayLike<number>).length + (c.generation_token_ids as ArrayLike<number>).length;
      const s = Array.isArray(c.routed_experts)
        ? c.routed_experts.length
        : Number(String(c.routed_experts).split(":")[2].split("x")[0]);
      return s - n;
    });
    expect(new Set(lengths)).toEqual(new Set([-1, 0, 1, 2]));
    expect(calls.some((c) => Array.isArray(c.weight_version))).toBe(true);
    expect(calls.some((c) => typeof c.weight_version === "number")).toBe(true);
    expect(new Set(samples.map((r) => (r as unknown as Record<string, unknown>).group_id))).toContain("g-1");
    // shared prefixes across roots: some record holds several forest roots
    expect(results.some((x) => x.status === "ok" && x.trees!.some((t) => t.roots.length > 1))).toBe(true);
  });

  test("the v3 generators are unchanged: no v4 fields", () => {
    for (const r of fc.sample(rolloutArb({ maxActions: 10 }), { numRuns: 40, seed: 3 })) {
      expect("group_id" in r).toBe(false);
      expect(r.calls.some((c) => "weight_version" in c || "routed_experts" in c)).toBe(false);
    }
    for (const r of fc.sample(acceptedRolloutArb({ maxActions: 10 }), { numRuns: 20, seed: 4 }))
      checkTrie(r, ok(reference(r, { trees: true })));
  });

  test("referenceTrie is reference's trees", () => {
    expect(referenceTrie(example("routes-refit"))).toEqual(
      ok(reference(example("routes-refit"), { trees: true })).trees,
    );
    expect(() => referenceTrie({ rollout_id: "x", reward: 1, calls: [] })).toThrow(/no_trainable_calls/);
  });
});
