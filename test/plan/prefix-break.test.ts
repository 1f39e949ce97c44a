// SPEC's prefix_break (v3): the worked example, hand-made cases for each way the tree can hold a
// near parent, and every backend against the quadratic reference on forests made to break.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { beforeAll, describe, expect, test } from "vitest";
import type { Callforest } from "../../src/index.js";
import type { CanonicalCall, Diagnostic, Rollout } from "../../src/types.js";
import { acceptedRolloutArb, prefixSoupArb } from "../support/arbitraries.js";
import { ROOT } from "../support/fixtures.js";
import { reference } from "../support/reference.js";
import { generateBrokenRollout } from "../../bench/generate.js";
import { WasmCorePool } from "../../src/core/wasm-core.js";
import { TsCorePool } from "../../src/core/ts-core.js";
import { wasmUrl } from "../../src/core/wasm-file.js";
import { planRollout } from "../../src/plan/plan-rollout.js";
import { everyBackend } from "../support/backends.js";

const SEED = 20261203;
const RUNS = Number(process.env.CALLFOREST_PROPERTY_RUNS ?? 300);

let backends: { name: string; cf: Callforest }[] = [];

beforeAll(async () => {
  backends = await everyBackend();
});

const REASONING_DROPPED = join(ROOT, "examples", "reasoning-dropped.json");

/** Each backend's diagnostics and near parents for `rollout` (they must agree). */
function planned(rollout: unknown) {
  return backends.map(({ name, cf }) => {
    const plan = cf.plan(rollout);
    try {
      return {
        name,
        status: plan.report.status,
        diagnostics: plan.report.diagnostics,
        near: plan.forest.map((c) => [c.id, c.nearParent, c.breakAt]),
      };
    } finally {
      plan.release();
    }
  });
}

/** The one answer every backend gives, checked against the reference. */
function breaksOf(rollout: unknown): Diagnostic[] {
  const results = planned(rollout);
  const ref = reference(rollout);
  for (const result of results) {
    expect({ backend: result.name, status: result.status }).toEqual({ backend: result.name, status: ref.status });
    if (ref.status !== "ok") continue;
    expect({ backend: result.name, diagnostics: result.diagnostics }).toEqual({
      backend: result.name,
      diagnostics: ref.diagnostics,
    });
    expect({ backend: result.name, near: result.near }).toEqual({
      backend: result.name,
      near: ref.forest.map((c) => [c.id, c.nearParent, c.breakAt]),
    });
  }
  return results[0].diagnostics.filter((d) => d.code === "prefix_break");
}

let n = 0;
/** A call with made-up logprobs. */
function call(prompt: number[], generation: number[], agent = "L"): CanonicalCall {
  return {
    id: `c${++n}`,
    agent,
    prompt_token_ids: prompt,
    generation_token_ids: generation,
    generation_log_probs: generation.map(() => -0.5),
  };
}

function rollout(...calls: CanonicalCall[]): Rollout {
  return { rollout_id: "hand", reward: 1, calls };
}

describe("prefix_break: the worked example", () => {
  test("reasoning-dropped.json: C2 near C1 at 4, C3 near C2 at 9, on every backend", () => {
    const example = JSON.parse(readFileSync(REASONING_DROPPED, "utf8"));
    expect(breaksOf(example)).toEqual([
      {
        code: "prefix_break",
        call: "C2",
        near: "C1",
        at: 4,
        expected: [50, 11, 12, 51, 20, 21, 99],
        found: [20, 21, 99, 30, 31],
      },
      {
        code: "prefix_break",
        call: "C3",
        near: "C2",
        at: 9,
        expected: [50, 13, 51, 22, 99],
        found: [22, 99, 32],
      },
    ]);
    for (const { cf } of backends) {
      const plan = cf.plan(example);
      // "Three trees, three rows of 39 tokens"
      expect({ roots: plan.report.roots, rows: plan.report.rows, row_tokens: plan.report.row_tokens }).toEqual({
        roots: 3,
        rows: 3,
        row_tokens: 39,
      });
      expect(plan.forest.map((c) => c.nearParent)).toEqual([null, "C1", "C2"]);
      plan.release();
    }
  });

  test("the other examples give what the reference gives (and the canonical ones no break)", () => {
    // qwen3.json is explain's example (docs/breaks.md): a harness that re-renders its prompts.
    const broken = new Set(["qwen3.json"]);
    const files = readdirSync(join(ROOT, "examples")).filter(
      (f) => f.endsWith(".json") && f !== "reasoning-dropped.json",
    );
    expect(files.length).toBeGreaterThan(2);
    for (const file of files) {
      const example = JSON.parse(readFileSync(join(ROOT, "examples", file), "utf8"));
      const breaks = breaksOf(example);
      if (broken.has(file)) expect({ file, broken: breaks.length > 0 }).toEqual({ file, broken: true });
      else expect({ file, breaks }).toEqual({ file, breaks: [] });
    }
  });
});

describe("prefix_break: how the tree holds a near parent", () => {
  test("the deepest near parent, though a deeper call parts inside its own prompt", () => {
    const a = call([1, 2], [3, 4, 5, 6]);
    const b = call([1, 2, 3, 4, 5, 9], [7]); // parts from a inside a's generation, at 4
    // c resends a's prompt and 3 4 5, parting from a at 5, and from b inside b's prompt at 5 too;
    // b's prompt is not resent (L(b) = 5 < len(prompt(b)) = 6)
    const c = call([1, 2, 3, 4, 5, 8], [9]);
    expect(breaksOf(rollout(a, b, c))).toEqual([
      { code: "prefix_break", call: b.id, near: a.id, at: 5, expected: [6], found: [9] },
      { code: "prefix_break", call: c.id, near: a.id, at: 5, expected: [6], found: [8] },
    ]);
  });

  test("a shallower near parent when the deepest calls part inside their prompts", () => {
    const a = call([1], [2, 3, 4]);
    const b = call([1, 2, 3, 4, 5, 6, 7], [8]); // continues a
    const c = call([1, 2, 3, 4, 5, 6, 9], [1]); // parts from b at 6, inside b's prompt: not near b
    expect(breaksOf(rollout(a, b, c))).toEqual([]);
    // ...and one whose generation parts from c's prompt further up is found
    const d = call([1, 2], [3, 5, 5]);
    const e = call([1, 2, 3, 5, 6, 6, 6], [0]);
    expect(breaksOf(rollout(d, a, b, e))).toEqual([
      { code: "prefix_break", call: e.id, near: d.id, at: 4, expected: [5], found: [6, 6, 6] },
    ]);
  });

  test("ties: the latest near parent in ledger order, across several children", () => {
    // three samples from one prompt (samples of one prompt are no breaks of each other)
    const a = call([1, 2], [3, 4]);
    const b = call([1, 2], [3, 5]);
    const c = call([1, 2], [3, 6, 7]);
    const d = call([1, 2, 3, 9], [1]); // parts from all three at 3: the latest
    // parts from c at its prompt's end (not near c: it did not go past c's prompt) and from a and
    // b at 3, through c's child: the latest of the other children's
    const e = call([1, 2, 3, 6], [7]);
    expect(breaksOf(rollout(a, b, c, d, e)).map((x) => [x.call, x.near, x.at])).toEqual([
      [d.id, c.id, 3],
      [e.id, b.id, 3],
    ]);
    // twins (identical full sequences): the later twin
    const t1 = call([4, 4], [5, 5], "T1");
    const t2 = call([4, 4], [5, 5], "T2");
    const after = call([4, 4, 5, 6], [7], "T1");
    expect(breaksOf(rollout(t1, t2, after)).map((x) => [x.call, x.near, x.at])).toEqual([[after.id, t2.id, 3]]);
  });

  test("no break at or above the parent's sequence; one below it", () => {
    const a = call([1, 2], [3, 4, 5]);
    const b = call([1, 2, 3, 4, 5, 6], [7]); // continues a
    const c = call([1, 2, 3, 4, 5, 6, 7, 8], [9]); // continues b
    // parts from a's sibling x only above b's end: b is the parent, no break
    const x = call([1, 2], [3, 4, 5, 6, 0, 0]);
    expect(breaksOf(rollout(a, b, x, c))).toEqual([]);
    // parts from y inside y's generation below c's parent's end
    const y = call([1, 2, 3, 4, 5, 6, 7], [8, 8, 8, 8, 8, 8, 8, 8, 8, 8]);
    const z = call([1, 2, 3, 4, 5, 6, 7, 8, 2], [9]);
    expect(breaksOf(rollout(a, b, c, y, z))).toEqual([
      { code: "prefix_break", call: z.id, near: y.id, at: 8, expected: [8, 8, 8, 8, 8, 8, 8, 8], found: [2] },
    ]);
  });

  test("a generation that runs along earlier sequences, and prompts ending inside edges", () => {
    const a = call([1, 2, 3, 4, 5, 6, 7, 8], [9]);
    // b's prompt ends inside a's edge, its generation runs along a's prompt
    const b = call([1, 2, 3], [4, 5, 6, 7, 0]);
    // c parts from b inside b's generation (and from a inside a's prompt)
    const c = call([1, 2, 3, 4, 5, 6, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], [2]);
    expect(breaksOf(rollout(a, b, c))).toEqual([
      { code: "prefix_break", call: c.id, near: b.id, at: 6, expected: [7, 0], found: [1, 1, 1, 1, 1, 1, 1, 1] },
    ]);
  });

  test("an empty prompt, a call identical to an earlier one, unkept and empty calls take no part", () => {
    const a = call([], [1, 2, 3]);
    const same = call([], [1, 2, 3]);
    const unkept = { ...call([7], [1, 2]), kept: false };
    const empty = call([1, 2, 4], []);
    const b = call([1, 2, 4], [5]);
    expect(breaksOf(rollout(a, same, unkept, empty, b))).toEqual([
      { code: "prefix_break", call: b.id, near: same.id, at: 2, expected: [3], found: [4] },
    ]);
  });
});

describe("prefix_break: every backend against the reference", () => {
  test("prefix soup: prompts cut earlier sequences anywhere", () => {
    let broken = 0;
    fc.assert(
      fc.property(prefixSoupArb(), (r) => {
        broken += breaksOf(r).length;
      }),
      { seed: SEED, numRuns: RUNS * 3 },
    );
    expect(broken).toBeGreaterThan(RUNS);
  });

  test("harness forests with re-rendered histories", () => {
    fc.assert(
      fc.property(acceptedRolloutArb({ maxActions: 16 }), (r) => {
        breaksOf(r);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });
});

describe("prefix_break: the bench's workloads and switch", () => {
  test("generateBrokenRollout: every call but each context's first breaks, near the call before it", () => {
    const broken = generateBrokenRollout({ targetTokens: 60_000, maxContext: 12_000, arrays: "plain" });
    const breaks = breaksOf(broken);
    const firsts = broken.calls.filter(
      (c, i) => i === 0 || c.prompt_token_ids.length < broken.calls[i - 1].prompt_token_ids.length,
    );
    expect(firsts.length).toBeGreaterThan(1);
    expect(breaks.length).toBe(broken.calls.length - firsts.length);
    for (const d of breaks) expect(Number(d.near!.slice(1))).toBe(Number(d.call!.slice(1)) - 1);
    const exact = generateBrokenRollout({ targetTokens: 60_000, maxContext: 12_000, arrays: "plain", exact: true });
    expect(breaksOf(exact)).toEqual([]);
  });

  test("cores with the diagnostic off (the bench's baseline) plan the same rows, without breaks", async () => {
    const module = new WebAssembly.Module(readFileSync(wasmUrl(true)));
    const example = JSON.parse(readFileSync(REASONING_DROPPED, "utf8"));
    const soup = fc.sample(prefixSoupArb(), { seed: SEED, numRuns: 60 });
    for (const pool of [
      new WasmCorePool(module, undefined, undefined, false),
      new TsCorePool(undefined, undefined, false),
    ]) {
      for (const rollout of [example, ...soup]) {
        const off = planRollout(() => pool.acquire(), rollout);
        const on = backends[0].cf.plan(rollout);
        expect(off.report).toEqual({
          ...on.report,
          diagnostics: on.report.diagnostics.filter((d) => d.code !== "prefix_break"),
        });
        expect(off.rows.map((r) => Array.from(r.tokenIds))).toEqual(on.rows.map((r) => Array.from(r.tokenIds)));
        off.release();
        on.release();
      }
    }
  });
});
