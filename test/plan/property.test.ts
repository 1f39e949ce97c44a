// Property tests: the reference (test/support/reference.ts) keeps SPEC's invariants, and the TS
// backend, the WASM SIMD build and the WASM scalar build each agree exactly with it and with
// each other, on generated call forests (test/support/arbitraries.ts) and on bench/generate.ts.
import { readFileSync } from "node:fs";
import fc from "fast-check";
import { beforeAll, describe, expect, test } from "vitest";
import type { Callforest } from "../../src/index.js";
import { maskToInts } from "../../src/output/jsonl.js";
import type { Plan, Rollout } from "../../src/types.js";
import { eligibleTokens, generateDeepRollout, generateRollout, generateSmallRollouts } from "../../bench/generate.js";
import { acceptedRolloutArb, invalidRolloutArb, rolloutArb } from "../support/arbitraries.js";
import { expectNamesCall } from "../support/names-call.js";
import { reference, type RefAccepted, type RefResult } from "../support/reference.js";
import { everyBackend } from "../support/backends.js";

const SEED = 20261130;
// CALLFOREST_PROPERTY_RUNS raises the run count for a longer hunt (the default keeps this file fast).
const RUNS = Number(process.env.CALLFOREST_PROPERTY_RUNS ?? 300);
if (!(RUNS >= 1))
  throw new Error(`CALLFOREST_PROPERTY_RUNS must be a positive number, got ${process.env.CALLFOREST_PROPERTY_RUNS}`);

interface Backend {
  name: string;
  cf: Callforest;
}
let backends: Backend[] = [];

beforeAll(async () => {
  backends = await everyBackend();
});

/** Index of the first element where the two lists differ (=== per element), or -1. */
function firstDifference(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.max(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return -1;
}

/** The input's calls by id, with plain arrays: spans are checked against these, not the reference. */
function callsById(rollout: Rollout) {
  return new Map(
    rollout.calls.map((c) => [
      c.id,
      { agent: c.agent ?? "", prompt: Array.from(c.prompt_token_ids), generation: Array.from(c.generation_token_ids) },
    ]),
  );
}

/** SPEC's invariants, checked on an accepted reference result against the input rollout. */
function checkInvariants(rollout: Rollout, ref: RefAccepted): void {
  const byId = callsById(rollout);
  const eligibleIds = rollout.calls
    .filter((c) => c.kept !== false && c.generation_token_ids.length > 0)
    .map((c) => c.id);
  // "trained_tokens == captured_tokens"
  expect(ref.counts.trained_tokens).toBe(ref.counts.captured_tokens);
  // every eligible call trained exactly once across rows
  const trained = ref.rows.flatMap((r) => r.trained);
  expect([...trained].sort()).toEqual([...eligibleIds].sort());
  // rows ordered by the ledger order of their leaves
  const ledger = new Map(rollout.calls.map((c, i) => [c.id, i]));
  const leafPositions = ref.rows.map((r) => ledger.get(r.leaf)!);
  expect(leafPositions).toEqual([...leafPositions].sort((a, b) => a - b));
  for (const row of ref.rows) {
    const leaf = byId.get(row.leaf)!;
    expect(row.token_ids).toEqual([...leaf.prompt, ...leaf.generation]);
    expect(row.agent).toBe(leaf.agent);
    expect(row.calls[row.calls.length - 1]).toBe(row.leaf);
    expect([...row.trained, ...row.context].sort()).toEqual([...row.calls].sort());
    const onSpan = new Array<boolean>(row.num_tokens).fill(false);
    const onTrainedSpan = new Array<boolean>(row.num_tokens).fill(false);
    for (const id of row.calls) {
      const c = byId.get(id)!;
      // each path call's full sequence is a prefix of the row (it was resent exactly)
      expect(
        firstDifference([...c.prompt, ...c.generation], row.token_ids.slice(0, c.prompt.length + c.generation.length)),
      ).toBe(-1);
      for (let i = c.prompt.length; i < c.prompt.length + c.generation.length; i++) {
        onSpan[i] = true;
        if (row.trained.includes(id)) onTrainedSpan[i] = true;
      }
    }
    // mask bits exactly on the generated spans of the trained path calls; logprobs 0 off the spans
    row.loss_mask.forEach((bit, i) => expect(bit).toBe(onTrainedSpan[i] ? 1 : 0));
    row.logprobs.forEach((lp, i) => {
      if (!onSpan[i]) expect(lp).toBe(0);
    });
  }
}

function describeRollout(rollout: unknown): string {
  return JSON.stringify(rollout, (_k, v: unknown) =>
    ArrayBuffer.isView(v) ? { [v.constructor.name]: Array.from(v as unknown as ArrayLike<number>) } : v,
  );
}

/** One backend's plan against the reference, field by field. */
function expectMatchesReference(plan: Plan, expected: RefResult, line: number | undefined): void {
  const report = plan.report;
  expect(report.line).toBe(line);
  if (expected.status === "rejected") {
    expect({ status: report.status, reason: report.reason }).toEqual({ status: "rejected", reason: expected.reason });
    if (expected.rollout_id !== null) expect(report.rollout_id).toBe(expected.rollout_id);
    if (expected.call !== null) expectNamesCall(report.detail, expected.call);
    expect(plan.rows).toEqual([]);
    return;
  }
  expect(report.status).toBe("ok");
  expect(report.reason).toBeUndefined();
  expect(report.rollout_id).toBe(expected.rollout_id);
  const { diagnostics, ...counts } = report;
  expect({ ...counts, line: undefined, status: undefined, rollout_id: undefined }).toEqual({
    ...expected.counts,
    line: undefined,
    status: undefined,
    rollout_id: undefined,
  });
  // "at least empty_generation for each kept call that generated nothing, media_mismatch ... and
  // prefix_break"
  expect(diagnostics).toEqual(expected.diagnostics);
  expect(plan.rows.length).toBe(expected.rows.length);
  plan.rows.forEach((row, i) => {
    const want = expected.rows[i];
    expect({
      index: row.index,
      rolloutId: row.rolloutId,
      leaf: row.leaf,
      agent: row.agent,
      calls: row.calls,
      trained: row.trained,
      context: row.context,
      reward: row.reward,
      numTokens: row.numTokens,
      media: row.media,
    }).toEqual({
      index: want.index,
      rolloutId: expected.rollout_id,
      leaf: want.leaf,
      agent: want.agent,
      calls: want.calls,
      trained: want.trained,
      context: want.context,
      reward: want.reward,
      numTokens: want.num_tokens,
      media: want.media,
    });
    expect(row.tokenIds).toBeInstanceOf(Int32Array);
    expect(row.logprobs).toBeInstanceOf(Float32Array);
    expect(row.lossMask).toBeInstanceOf(Uint8Array);
    expect({ row: i, field: "token_ids", at: firstDifference(row.tokenIds, want.token_ids) }).toEqual({
      row: i,
      field: "token_ids",
      at: -1,
    });
    expect({ row: i, field: "logprobs", at: firstDifference(row.logprobs, want.logprobs) }).toEqual({
      row: i,
      field: "logprobs",
      at: -1,
    });
    expect(row.lossMask.length).toBe(Math.ceil(row.numTokens / 8));
    const mask = maskToInts(row.lossMask, row.numTokens);
    expect({ row: i, field: "loss_mask", at: firstDifference(mask, want.loss_mask) }).toEqual({
      row: i,
      field: "loss_mask",
      at: -1,
    });
  });
  expect(
    plan.forest.map((c) => ({
      id: c.id,
      agent: c.agent,
      index: c.index,
      kept: c.kept,
      eligible: c.eligible,
      promptLength: c.promptLength,
      generationLength: c.generationLength,
      parent: c.parent,
      children: c.children,
      root: c.root,
      leaf: c.leaf,
      ownerRow: c.ownerRow,
      media: c.media,
      mediaMismatch: c.mediaMismatch,
      routeMismatch: c.routeMismatch,
      nearParent: c.nearParent,
      breakAt: c.breakAt,
    })),
  ).toEqual(expected.forest);
}

/** Reports deep-equal and rows' arrays equal elementwise, across every backend. */
function expectBackendsAgree(plans: Plan[]): void {
  const [first, ...rest] = plans;
  for (const other of rest) {
    expect(other.report).toEqual(first.report);
    expect(other.rows.length).toBe(first.rows.length);
    other.rows.forEach((row, i) => {
      const base = first.rows[i];
      const { tokenIds, logprobs, lossMask, ...meta } = row;
      const { tokenIds: t0, logprobs: l0, lossMask: m0, ...meta0 } = base;
      expect(meta).toEqual(meta0);
      expect(firstDifference(tokenIds, t0)).toBe(-1);
      expect(firstDifference(logprobs, l0)).toBe(-1);
      expect(firstDifference(lossMask, m0)).toBe(-1);
    });
    expect(other.forest).toEqual(first.forest);
  }
}

/** Plans on every backend, checks each against the reference and all against each other. */
function checkAllBackends(rollout: unknown, line = 1): RefResult {
  const expected = reference(rollout);
  const plans = backends.map((b) => b.cf.plan(rollout, { line }));
  try {
    const listed = (rollout as Rollout | null)?.agents;
    plans.forEach((plan, i) => {
      try {
        expectMatchesReference(plan, expected, line);
        // "The rollout's agents as given (empty when it lists none)"
        if (expected.status === "ok") expect(plan.agents).toEqual(listed ?? []);
      } catch (error) {
        (error as Error).message = `[backend ${backends[i].name}] ${(error as Error).message}`;
        throw error;
      }
    });
    expectBackendsAgree(plans);
  } finally {
    for (const p of plans) p.release();
  }
  return expected;
}

describe("reference", () => {
  test("gives SPEC's five rows for the worked example", () => {
    const example = JSON.parse(
      readFileSync(new URL("../../examples/login-bug.json", import.meta.url), "utf8"),
    ) as Rollout;
    const ref = reference(example);
    if (ref.status !== "ok") throw new Error(`worked example rejected: ${ref.message}`);
    expect(ref.rows.map((r) => [r.leaf, r.calls.join(" "), r.trained.join(" "), r.context.join(" ")])).toEqual([
      ["C4", "C2 C4", "C2 C4", ""],
      ["C6", "C5 C6", "C5 C6", ""],
      ["C9", "C1 C3 C7 C8 C9", "C8 C9", "C1 C3 C7"],
      ["C10", "C1 C3 C7 C10", "C1 C3 C7 C10", ""],
      ["C12", "C11 C12", "C11 C12", ""],
    ]);
    expect(ref.counts).toMatchObject({ calls: 12, eligible: 12, roots: 4, leaves: 5, rows: 5 });
    checkInvariants(example, ref);
  });

  test("keeps SPEC's invariants on generated call forests", () => {
    fc.assert(
      fc.property(rolloutArb(), (rollout) => {
        const ref = reference(rollout);
        if (ref.status === "ok") checkInvariants(rollout, ref);
        else expect(ref.reason).toBe("ambiguous_parent"); // the only rejection valid scenarios can hit
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  test("rejects each injected fault with its code, naming the call", () => {
    fc.assert(
      fc.property(invalidRolloutArb(), (c) => {
        const ref = reference(c.rollout);
        expect(ref.status === "rejected" && { reason: ref.reason, call: ref.call }).toEqual({
          reason: c.code,
          call: c.call,
        });
      }),
      { seed: SEED, numRuns: 300 },
    );
  });
});

describe("backends agree with the reference and with each other", () => {
  test("the three backends are what they claim", () => {
    expect(backends.map((b) => [b.cf.backend, b.cf.simd])).toEqual([
      ["ts", false],
      ["wasm", true],
      ["wasm", false],
    ]);
  });

  test("the worked example", () => {
    const example = JSON.parse(
      readFileSync(new URL("../../examples/login-bug.json", import.meta.url), "utf8"),
    ) as Rollout;
    expect(checkAllBackends(example, 3).status).toBe("ok");
  });

  test("the ownership walk follows the agent of the call it is at", () => {
    // c1 (L) has one child, the fork's c2 (F); c2 has children c3 (L) and c4 (F). From c1 the walk
    // goes to c2, then to c4: "the child in the same agent as the current call" (c2's agent F).
    const walk: Rollout = {
      rollout_id: "walk",
      reward: 1,
      agents: [
        { id: "L", parent: null, mode: "leader" },
        { id: "F", parent: "L", mode: "fork" },
      ],
      calls: [
        { id: "c1", agent: "L", prompt_token_ids: [1], generation_token_ids: [2], generation_log_probs: [-1] },
        { id: "c2", agent: "F", prompt_token_ids: [1, 2, 3], generation_token_ids: [4], generation_log_probs: [-1] },
        {
          id: "c3",
          agent: "L",
          prompt_token_ids: [1, 2, 3, 4, 5],
          generation_token_ids: [6],
          generation_log_probs: [-1],
        },
        {
          id: "c4",
          agent: "F",
          prompt_token_ids: [1, 2, 3, 4, 7],
          generation_token_ids: [8],
          generation_log_probs: [-1],
        },
      ],
    };
    const ref = checkAllBackends(walk);
    expect(ref.status === "ok" && ref.rows.map((r) => [r.leaf, r.trained])).toEqual([
      ["c3", ["c3"]],
      ["c4", ["c1", "c2", "c4"]],
    ]);
  });

  test("generated call forests (accepted and ambiguous)", () => {
    fc.assert(
      fc.property(rolloutArb(), fc.integer({ min: 1, max: 1000 }), (rollout, line) => {
        checkAllBackends(rollout, line);
      }),
      { seed: SEED, numRuns: RUNS, reporter: (details) => reportFailure(details) },
    );
  });

  test("accepted call forests", () => {
    fc.assert(
      fc.property(acceptedRolloutArb(), (rollout) => {
        expect(checkAllBackends(rollout).status).toBe("ok");
      }),
      { seed: SEED + 1, numRuns: RUNS, reporter: (details) => reportFailure(details) },
    );
  });

  test("invalid rollouts: every rejection code", () => {
    fc.assert(
      fc.property(invalidRolloutArb(), (c) => {
        const ref = checkAllBackends(c.rollout);
        expect(ref.status === "rejected" && ref.reason).toBe(c.code);
      }),
      { seed: SEED + 2, numRuns: RUNS, reporter: (details) => reportFailure(details) },
    );
  });

  test("plans kept alive together stay right, released in any order", () => {
    fc.assert(
      fc.property(
        fc.array(rolloutArb({ maxActions: 15 }), { minLength: 2, maxLength: 6 }),
        fc.nat(),
        (rollouts, order) => {
          for (const { name, cf } of backends) {
            const plans = rollouts.map((r) => cf.plan(r));
            const released = new Set<number>();
            try {
              // check every plan after all were made, releasing one after another in a shuffled order
              const sequence = rollouts
                .map((_, i) => i)
                .sort((a, b) => ((a * 7919 + order) % 13) - ((b * 7919 + order) % 13));
              for (const k of sequence) {
                for (let i = 0; i < plans.length; i++) {
                  if (released.has(i)) continue;
                  try {
                    expectMatchesReference(plans[i], reference(rollouts[i]), undefined);
                  } catch (error) {
                    (error as Error).message =
                      `[backend ${name}, plan ${i}, released so far ${[...released]}] ${(error as Error).message}`;
                    throw error;
                  }
                }
                plans[k].release();
                released.add(k);
              }
            } finally {
              for (const p of plans) p.release(); // idempotent
            }
          }
        },
      ),
      { seed: SEED + 3, numRuns: 60, reporter: (details) => reportFailure(details) },
    );
  });

  test("WASM (SIMD and scalar) and TS agree on the full 10-million-token deep rollout", () => {
    const deep = generateDeepRollout();
    const plans = backends.map((b) => b.cf.plan(deep));
    try {
      expect(plans[0].report.status).toBe("ok");
      expect(plans[0].report.trained_tokens).toBe(plans[0].report.captured_tokens);
      expectBackendsAgree(plans);
    } finally {
      for (const p of plans) p.release();
    }
  });

  test("bench/generate.ts rollouts: every feature, a few hundred calls", () => {
    for (const seed of [1, 2]) {
      for (const arrays of ["typed", "plain"] as const) {
        const rollout = generateRollout({ calls: 200, seed: seed * 2 + (arrays === "plain" ? 1 : 0), arrays });
        expect(checkAllBackends(rollout).status).toBe("ok");
      }
    }
  });

  test("bench/generate.ts small rollouts", () => {
    for (const rollout of generateSmallRollouts(60, 5)) expect(checkAllBackends(rollout).status).toBe("ok");
  });

  test("bench/generate.ts deep rollout, scaled down", () => {
    const rollout = generateDeepRollout({ targetTokens: 400_000, seed: 3 });
    expect(eligibleTokens(rollout)).toBeGreaterThanOrEqual(400_000);
    expect(checkAllBackends(rollout).status).toBe("ok");
  });
});

/** fast-check's default report, plus the counterexample with typed arrays spelled out. */
function reportFailure<T>(details: fc.RunDetails<T>): void {
  if (!details.failed) return;
  const example = details.counterexample ? describeRollout(details.counterexample) : "(none)";
  const cause = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
  throw new Error(
    `${fc.defaultReportMessage(details)}\n${cause}\ncounterexample (typed arrays spelled out): ${example}`,
  );
}

describe("generators", () => {
  test("the deep rollout holds >= 10 million eligible tokens in typed arrays, deterministically", () => {
    const deep = generateDeepRollout();
    expect(eligibleTokens(deep)).toBeGreaterThanOrEqual(10_000_000);
    for (const c of deep.calls) {
      expect(c.prompt_token_ids).toBeInstanceOf(Int32Array);
      expect(c.generation_log_probs).toBeInstanceOf(Float32Array);
    }
    const modes = new Set(deep.agents!.map((a) => a.mode));
    expect(modes).toEqual(new Set(["leader", "fork", "fresh", "background"]));
    const again = generateDeepRollout();
    expect(again.calls.length).toBe(deep.calls.length);
    expect(eligibleTokens(again)).toBe(eligibleTokens(deep));
  });

  test("generateSmallRollouts gives `count` rollouts, deterministic per seed", () => {
    const a = generateSmallRollouts(1000, 9);
    expect(a.length).toBe(1000);
    expect(new Set(a.map((r) => r.rollout_id)).size).toBe(1000);
    const b = generateSmallRollouts(3, 9);
    expect(describeRollout(b)).toBe(describeRollout(a.slice(0, 3)));
  });

  test("generateRollout covers every feature and the reference accepts it", () => {
    const rollout = generateRollout({ calls: 300, seed: 11 });
    const ref = reference(rollout);
    if (ref.status !== "ok") throw new Error(ref.message);
    // (the simulator has no agent that resumes another agent's context, so no walk subtleties,
    // every call adds a tool result or a task to its parent's sequence, and its twins are two
    // new subagents, never the leader and one of its own; it is text only: generateMediaRollout
    // makes the bench's media)
    const {
      walkReadingsDiffer: _subtle,
      promptIsParentFull: _bare,
      twinsByFirstListedAgent: _leaderTwin,
      callsWithMedia: _media,
      mediaMismatchRoots: _swapRoots,
      mediaMismatchShorterParent: _swapParents,
      mediaSettledTies: _mediaTies,
      ...f
    } = features(rollout, ref);
    for (const name of Object.keys(f) as (keyof typeof f)[]) expect({ [name]: f[name] > 0 }).toEqual({ [name]: true });
  });

  test("the arbitraries cover every feature and every tie-break outcome", () => {
    const totals: Record<string, number> = {};
    let ambiguous = 0;
    for (const rollout of fc.sample(rolloutArb(), { seed: SEED, numRuns: 400 })) {
      const ref = reference(rollout);
      if (ref.status !== "ok") {
        ambiguous++;
        continue;
      }
      // (generateRollout resends every history exactly: only the arbitraries make breaks)
      const all = { ...features(rollout, ref), ...breakFeatures(rollout, ref) };
      for (const [k, v] of Object.entries(all)) totals[k] = (totals[k] ?? 0) + v;
    }
    expect(ambiguous).toBeGreaterThan(0);
    expect(Object.keys(totals).length).toBeGreaterThan(0);
    for (const [name, total] of Object.entries(totals)) expect({ [name]: total > 0 }).toEqual({ [name]: true });
  });
});

/** Calls whose parent ties another earlier call by tokens, when the media clause rules that one out. */
function mediaSettledTies(rollout: Rollout): number {
  const stripped = reference({ ...rollout, calls: rollout.calls.map(({ media: _media, ...c }) => c) });
  if (stripped.status === "ok") return 0;
  return stripped.reason === "ambiguous_parent" ? 1 : 0;
}

/** Counts of the SPEC situations a rollout exercises, read off the input and the reference. */
function features(rollout: Rollout, ref: RefAccepted) {
  const byId = callsById(rollout);
  const agentMode = new Map((rollout.agents ?? []).map((a) => [a.id, a.mode]));
  const fulls = new Map([...byId].map(([id, c]) => [id, [...c.prompt, ...c.generation].join(",")]));
  const fullOf = (id: string) => fulls.get(id)!;
  const forestById = new Map(ref.forest.map((c) => [c.id, c]));
  const eligible = ref.forest.filter((c) => c.eligible);
  let twinsBySameAgent = 0;
  let twinsByParentAgent = 0;
  let twinsByFirstListedAgent = 0; // the parent agent that settles it is agents[0] (index 0 in the cores)
  const firstListed = rollout.agents?.[0]?.id;
  for (const c of eligible) {
    if (c.parent === null) continue;
    const p = forestById.get(c.parent)!;
    const tied = eligible.some((q) => q.index < c.index && q.id !== p.id && fullOf(q.id) === fullOf(p.id));
    if (!tied) continue;
    if (p.agent === c.agent) twinsBySameAgent++;
    else twinsByParentAgent++;
    if (p.agent !== c.agent && p.agent === firstListed) twinsByFirstListedAgent++;
  }
  // SPEC's walk follows "the same agent as the current call"; count the calls where reading it
  // as "the same agent as the call being owned" would pick another child somewhere on the way
  let walkReadingsDiffer = 0;
  for (const c of eligible) {
    for (let cur = c; cur.children.length > 0; ) {
      const kids = cur.children.map((id) => forestById.get(id)!);
      const literal = kids.find((k) => k.agent === cur.agent) ?? kids[0];
      const other = kids.find((k) => k.agent === c.agent) ?? kids[0];
      if (literal !== other) {
        walkReadingsDiffer++;
        break;
      }
      cur = literal;
    }
  }
  return {
    walkReadingsDiffer,
    forks: eligible.filter((c) => c.parent !== null && byId.get(c.parent)!.agent !== c.agent).length,
    rootsBeyondFirst: ref.counts.roots - 1,
    sharedCalls: ref.rows.filter((r) => r.context.length > 0).length,
    unkept: ref.forest.filter((c) => !c.kept).length,
    emptyGenerations: ref.diagnostics.filter((d) => d.code === "empty_generation").length,
    callsWithMedia: ref.forest.filter((c) => c.media.length > 0).length,
    // SPEC's media clause: a swapped image makes a new root, or a shorter parent that still had it
    mediaMismatchRoots: ref.forest.filter((c) => c.mediaMismatch && c.root).length,
    mediaMismatchShorterParent: ref.forest.filter((c) => c.mediaMismatch && !c.root).length,
    // twins that tokens tie and media settle (the other twin's image differs)
    mediaSettledTies: mediaSettledTies(rollout),
    twinsBySameAgent,
    twinsByParentAgent,
    twinsByFirstListedAgent,
    rerenderedForkRoots: eligible.filter((c) => c.root && agentMode.get(c.agent) === "fork").length,
    typedArrays: rollout.calls.filter((c) => c.prompt_token_ids instanceof Int32Array).length,
    background: (rollout.agents ?? []).filter((a) => a.mode === "background").length,
    // Long enough for the cores' SIMD loops (16 tokens, 8 logprobs a step) and whole mask bytes.
    generationsOf16: eligible.filter((c) => byId.get(c.id)!.generation.length >= 16).length,
    // A prompt that is exactly its parent's full sequence (a fork resending it, a retry's twin).
    promptIsParentFull: eligible.filter(
      (c) => c.parent !== null && byId.get(c.id)!.prompt.join(",") === fullOf(c.parent),
    ).length,
  };
}

/** The prefix_break situations a rollout exercises (SPEC "Prefix breaks"). */
function breakFeatures(rollout: Rollout, ref: RefAccepted) {
  const byId = callsById(rollout);
  const full = (id: string) => [...byId.get(id)!.prompt, ...byId.get(id)!.generation];
  const lcp = (a: number[], b: number[]) => {
    let n = 0;
    while (n < a.length && n < b.length && a[n] === b[n]) n++;
    return n;
  };
  const forestById = new Map(ref.forest.map((c) => [c.id, c]));
  const breaks = ref.diagnostics.filter((d) => d.code === "prefix_break");
  let ties = 0;
  let notDeepest = 0;
  for (const d of breaks) {
    const c = forestById.get(d.call!)!;
    const prompt = byId.get(c.id)!.prompt;
    const earlier = ref.forest.filter((q) => q.eligible && q.index < c.index);
    const at = (q: (typeof earlier)[number]) => lcp(full(q.id), prompt);
    // another near parent parts at the same token (the latest wins)
    if (earlier.some((q) => q.id !== d.near && at(q) === d.at && q.promptLength <= d.at && full(q.id).length > d.at))
      ties++;
    // an earlier call shares more of the prompt but parts inside its own prompt (not near)
    if (earlier.some((q) => at(q) > d.at! && at(q) < Math.min(full(q.id).length, prompt.length))) notDeepest++;
  }
  return {
    prefixBreakRoots: breaks.filter((d) => forestById.get(d.call!)!.root).length,
    prefixBreakUnderParent: breaks.filter((d) => !forestById.get(d.call!)!.root).length,
    prefixBreakAtGenerationStart: breaks.filter((d) => d.at === forestById.get(d.near!)!.promptLength).length,
    prefixBreakLongQuotes: breaks.filter((d) => d.expected!.length === 8 && d.found!.length === 8).length,
    prefixBreakShortQuotes: breaks.filter((d) => d.expected!.length < 8 || d.found!.length < 8).length,
    prefixBreakTies: ties,
    prefixBreakNotDeepest: notDeepest,
    prefixBreakWithMediaMismatch: ref.forest.filter((c) => c.mediaMismatch && c.nearParent !== null).length,
  };
}
