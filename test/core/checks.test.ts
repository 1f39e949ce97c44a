// The cores' value checks at every position of every length (the SIMD loops take 8 logprobs and
// 16 tokens a step, so a bad value in any lane of any step must be found), the tied calls an
// ambiguous_parent names, release() (twice; rows after it), the builder against plan() on generated
// forests, and misuse of the API (bad options, throwing getters, builder slips, no instance left).
import fc from "fast-check";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { init, rowToJson, type Callforest } from "../../src/index.js";
import { init as browserInit } from "../../src/browser.js";
import type { Plan, Rollout } from "../../src/types.js";
import { acceptedRolloutArb } from "../support/arbitraries.js";
import { buildFrom, loadExample, typedExample } from "../support/worked-example.js";
import { WasmCorePool } from "../../src/core/wasm-core.js";
import { CoreUnavailableError } from "../../src/core/errors.js";
import { TsCore, TsCorePool } from "../../src/core/ts-core.js";
import { AMBIGUOUS_PARENT, INVALID_LOGPROB, INVALID_TOKEN, NOT_LINKED } from "../../src/core/types.js";
import { readFileSync } from "node:fs";
import { failureOf } from "../../src/cli/errors.js";
import { planRollout } from "../../src/plan/plan-rollout.js";
import { everyBackend } from "../support/backends.js";

let backends: { name: string; cf: Callforest }[] = [];
beforeAll(async () => {
  backends = await everyBackend();
});

const LENGTHS = Array.from({ length: 40 }, (_, i) => i + 1);
const range = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);

function outcome(cf: Callforest, rollout: Rollout): string {
  const plan = cf.plan(rollout);
  try {
    return plan.report.status === "ok" ? "ok" : `${plan.report.reason}: ${plan.report.detail}`;
  } finally {
    plan.release();
  }
}

/** Runs `rollout` on every backend; all must give `expected`. */
function expectEverywhere(rollout: Rollout, expected: string): void {
  for (const { name, cf } of backends) expect([name, outcome(cf, rollout)]).toEqual([name, expected]);
}

describe("value checks find a bad value in any lane of any SIMD step", () => {
  it("non-finite logprobs (Float32Array and Float64Array), at every position of generations of 1-40 tokens", () => {
    for (const n of LENGTHS) {
      for (let k = 0; k < n; k++) {
        for (const [bad, typed] of [
          [Number.NaN, Float32Array],
          [Number.POSITIVE_INFINITY, Float32Array],
          [Number.NEGATIVE_INFINITY, Float64Array],
          [1e39, Float64Array],
        ] as const) {
          const logprobs = new typed(n).fill(-1);
          logprobs[k] = bad;
          const rollout = {
            rollout_id: "r",
            reward: 0,
            calls: [
              {
                id: "c",
                prompt_token_ids: Int32Array.of(1, 2),
                generation_token_ids: Int32Array.from(range(n, 3)),
                generation_log_probs: logprobs,
              },
            ],
          };
          const why = bad === 1e39 ? "1e+39 overflows float32" : `${String(bad)} is not a finite number`;
          expectEverywhere(rollout, `invalid_logprob: call "c" (calls[0]): generation_log_probs[${k}] = ${why}`);
        }
      }
    }
  });

  it("negative token IDs in an Int32Array, at every position, in a fresh root and after a shared prefix", () => {
    // Plain logprobs stage every call (copied into the core); Float32Array ones let the TS core
    // read the typed arrays in place, where the tree walk crosses from prompt to generation.
    for (const logprobs of [() => [-1], () => Float32Array.of(-1)]) {
      const first = {
        id: "a",
        prompt_token_ids: Int32Array.from(range(24, 100)),
        generation_token_ids: Int32Array.of(7),
        generation_log_probs: logprobs(),
      };
      for (const n of LENGTHS) {
        for (let k = 0; k < n; k++) {
          const generation = Int32Array.from(range(n, 3));
          generation[k] = -5;
          const fresh = {
            rollout_id: "r",
            reward: 0,
            calls: [
              {
                id: "c",
                prompt_token_ids: Int32Array.of(1),
                generation_token_ids: generation,
                generation_log_probs: new Float32Array(n),
              },
            ],
          };
          expectEverywhere(
            fresh,
            `invalid_token: call "c" (calls[0]): generation_token_ids[${k}] is -5, not an integer in [0, 2^31-1]`,
          );
          // The prompt resends a's 25 tokens, then n new ones with the bad one among them.
          const prompt = Int32Array.from([...first.prompt_token_ids, 7, ...range(n, 500)]);
          prompt[25 + k] = -5;
          const continued = {
            rollout_id: "r",
            reward: 0,
            calls: [
              first,
              {
                id: "c",
                prompt_token_ids: prompt,
                generation_token_ids: Int32Array.of(9),
                generation_log_probs: logprobs(),
              },
            ],
          };
          expectEverywhere(
            continued,
            `invalid_token: call "c" (calls[1]): prompt_token_ids[${25 + k}] is -5, not an integer in [0, 2^31-1]`,
          );
          // The same prefix, then the bad token in the generation, past the seam.
          const tail = Int32Array.from(range(n, 600));
          tail[k] = -5;
          const pastSeam = {
            rollout_id: "r",
            reward: 0,
            calls: [
              first,
              {
                id: "c",
                prompt_token_ids: Int32Array.from([...first.prompt_token_ids, 7]),
                generation_token_ids: tail,
                generation_log_probs: Float32Array.from(tail, () => -1),
              },
            ],
          };
          expectEverywhere(
            pastSeam,
            `invalid_token: call "c" (calls[1]): generation_token_ids[${k}] is -5, not an integer in [0, 2^31-1]`,
          );
        }
      }
    }
  });

  it("in typed arrays a bad token outranks a NaN logprob, and a NaN logprob is found after a shared prefix", () => {
    const first = {
      id: "a",
      prompt_token_ids: Int32Array.of(1, 2, 3),
      generation_token_ids: Int32Array.of(4),
      generation_log_probs: Float32Array.of(-1),
    };
    const second = (generation: Int32Array, logprobs: Float32Array) => ({
      rollout_id: "r",
      reward: 0,
      calls: [
        first,
        {
          id: "c",
          prompt_token_ids: Int32Array.of(1, 2, 3, 4, 5),
          generation_token_ids: generation,
          generation_log_probs: logprobs,
        },
      ],
    });
    expectEverywhere(
      second(Int32Array.of(6, -1), Float32Array.of(NaN, -1)),
      'invalid_token: call "c" (calls[1]): generation_token_ids[1] is -1, not an integer in [0, 2^31-1]',
    );
    expectEverywhere(
      second(Int32Array.of(6, 7), Float32Array.of(-1, NaN)),
      'invalid_logprob: call "c" (calls[1]): generation_log_probs[1] = NaN is not a finite number',
    );
  });
});

describe("ambiguous_parent", () => {
  it("names the two tied calls, counting unkept and empty calls before them", () => {
    const call = (id: string, agent: string, prompt: number[], generation: number[], kept = true) => ({
      id,
      agent,
      kept,
      prompt_token_ids: prompt,
      generation_token_ids: generation,
      generation_log_probs: generation.map(() => -1),
    });
    const rollout = {
      rollout_id: "r",
      reward: 0,
      agents: [
        { id: "L", parent: null },
        { id: "A", parent: "L" },
        { id: "B", parent: "L" },
        { id: "C", parent: null },
      ],
      calls: [
        call("retry", "L", [1], [2], false),
        call("empty", "L", [1], []),
        call("l1", "L", [1], [2]),
        call("a1", "A", [1, 2, 3], [4]),
        call("b1", "B", [1, 2, 3], [4]),
        call("c1", "C", [1, 2, 3, 4, 5], [6]),
      ],
    };
    expectEverywhere(
      rollout,
      'ambiguous_parent: call "c1" (calls[5]): earlier calls "a1" and "b1" have identical full sequences, ' +
        "and neither its agent nor its parent agent singles one out",
    );
  });

  it("is settled by the parent agent's candidate, also when that agent is the first listed", () => {
    const call = (id: string, agent: string, prompt: number[], generation: number[]) => ({
      id,
      agent,
      prompt_token_ids: prompt,
      generation_token_ids: generation,
      generation_log_probs: generation.map(() => -1),
    });
    const rollout = {
      rollout_id: "r",
      reward: 0,
      agents: [
        { id: "L", parent: null },
        { id: "B", parent: "L" },
        { id: "F", parent: "L" },
      ],
      calls: [call("l1", "L", [1], [2]), call("b1", "B", [1], [2]), call("f1", "F", [1, 2, 3], [4])],
    };
    for (const { name, cf } of backends) {
      const plan = cf.plan(rollout);
      expect([name, plan.report.status, plan.rows.map((row) => row.calls.join(","))]).toEqual([
        name,
        "ok",
        ["b1", "l1,f1"],
      ]);
      plan.release();
    }
  });
});

describe("prefix comparison", () => {
  it("finds where a run of one repeated token breaks, at every position of every SIMD step", () => {
    // Runs make lanes of different blocks equal (a[8..11] == b[12..15]): a compare that mixed up
    // its lanes would still see a match where the sequences differ.
    for (let length = 1; length <= 48; length++) {
      for (let breakAt = 0; breakAt < length; breakAt++) {
        const run = Array<number>(length).fill(5);
        const broken = run.map((token, i) => (i < breakAt ? token : 6));
        for (const [first, second] of [
          [run, broken],
          [broken, run],
        ]) {
          const call = (id: string, prompt: number[], generation: number[]) => ({
            id,
            prompt_token_ids: prompt,
            generation_token_ids: generation,
            generation_log_probs: generation.map(() => -1),
          });
          const rollout = {
            rollout_id: "r",
            reward: 0,
            calls: [call("c1", first, [7]), call("c2", second, [7]), call("c3", [...second, 7, 9], [8])],
          };
          const want = [
            ["c1", [...first, 7]],
            ["c2,c3", [...second, 7, 9, 8]],
          ];
          for (const { name, cf } of backends) {
            const plan = cf.plan(rollout);
            const got = plan.rows.map((row) => [row.calls.join(","), Array.from(row.tokenIds)]);
            plan.release();
            if (JSON.stringify(got) !== JSON.stringify(want))
              expect([name, length, breakAt, got]).toEqual([name, length, breakAt, want]);
          }
        }
      }
    }
  });
});

describe("release()", () => {
  it("twice gives the instance back once: two later plans never share memory", () => {
    const small = (id: string, token: number): Rollout => ({
      rollout_id: id,
      reward: 0,
      calls: [{ id: "c", prompt_token_ids: [token, token], generation_token_ids: [token], generation_log_probs: [-1] }],
    });
    for (const { name, cf } of backends) {
      const p = cf.plan(small("p", 1));
      p.release();
      p.release();
      const q = cf.plan(small("q", 2));
      const r = cf.plan(small("r", 3));
      expect([name, Array.from(q.rows[0].tokenIds), Array.from(r.rows[0].tokenIds)]).toEqual([
        name,
        [2, 2, 2],
        [3, 3, 3],
      ]);
      // A row kept past release() is empty, on every backend: never another rollout's tokens.
      const row = p.rows[0];
      expect([name, row.tokenIds.length, row.logprobs.length, row.lossMask.length, row.rolloutId]).toEqual([
        name,
        0,
        0,
        0,
        "p",
      ]);
      // ... and writing it says so, rather than writing a row without tokens.
      expect(() => rowToJson(row)).toThrow(
        'row 0 of "p": its arrays do not hold its 3 tokens (was its plan released? write rows before release())',
      );
      if (name !== "ts") expect(r.rows[0].tokenIds.buffer).not.toBe(q.rows[0].tokenIds.buffer);
      q.release();
      r.release();
    }
  });

  it("empties every row of a plan, not only the first", () => {
    for (const { name, cf } of backends) {
      const plan = cf.plan(loadExample());
      const rows = plan.rows;
      plan.release();
      expect([name, rows.map((row) => [row.tokenIds.length, row.logprobs.length, row.lossMask.length])]).toEqual([
        name,
        rows.map(() => [0, 0, 0]),
      ]);
      expect([name, rows.map((row) => row.numTokens)]).toEqual([name, [8, 8, 19, 19, 9]]);
    }
  });
});

describe("the builder", () => {
  /** Everything a plan says, arrays as plain lists. */
  const contents = (plan: Plan) => ({
    report: plan.report,
    forest: plan.forest,
    rows: plan.rows.map((row) => ({
      ...row,
      tokenIds: Array.from(row.tokenIds),
      logprobs: Array.from(row.logprobs),
      lossMask: Array.from(row.lossMask),
    })),
  });

  it("gives plan()'s report, forest and rows on generated forests, on every backend", () => {
    fc.assert(
      fc.property(acceptedRolloutArb(), (rollout) => {
        for (const { cf } of backends) {
          const planned = cf.plan(rollout);
          const built = buildFrom(cf, rollout);
          expect(contents(built)).toEqual(contents(planned));
          built.release();
          planned.release();
        }
      }),
      { seed: 20261130, numRuns: 150 },
    );
  });
});

describe("misuse of the API", () => {
  const good: Rollout = {
    rollout_id: "r",
    reward: 0,
    calls: [{ id: "c", prompt_token_ids: [1], generation_token_ids: [2], generation_log_probs: [-1] }],
  };

  it("plan options: null is none; a line that is not a positive integer is a TypeError", () => {
    for (const { name, cf } of backends) {
      const plan = cf.plan(good, null as never);
      expect([name, plan.report.status, plan.report.line]).toEqual([name, "ok", undefined]);
      plan.release();
      expect(() => cf.plan(good, { line: "x" as never })).toThrow(TypeError);
      expect(() => cf.plan(good, { line: 0 })).toThrow("plan(): options.line must be a positive integer, got 0");
    }
  });

  it(
    "a caller's getter that throws passes its error on, " +
      "even a RangeError (it is not rollout_too_large), and gives its core back",
    () => {
      const call = {
        id: "c",
        prompt_token_ids: [1],
        generation_log_probs: [-1],
        get generation_token_ids(): number[] {
          throw new RangeError("my bug");
        },
      };
      for (const { name, cf } of backends) {
        // The memory a plan's rows are views into: the same buffer again means the same pooled core.
        const memoryOf = () => {
          const plan = cf.plan(good);
          const buffer = plan.rows[0].tokenIds.buffer;
          plan.release();
          return buffer;
        };
        const before = memoryOf();
        expect(() => cf.plan({ rollout_id: "r", reward: 0, calls: [call] })).toThrow("my bug");
        // Read once to size the plan, then it throws: by then a core was taken.
        let reads = 0;
        const late = {
          id: "c",
          prompt_token_ids: [1],
          generation_log_probs: [-1],
          get generation_token_ids(): number[] {
            if (reads++ > 0) throw new RangeError("my late bug");
            return [2];
          },
        };
        expect(() => cf.plan({ rollout_id: "r", reward: 0, calls: [late] })).toThrow("my late bug");
        expect([name, reads, memoryOf() === before]).toEqual([name, 2, true]);
      }
    },
  );

  it("init() refuses what is not an options object, and checks every option whatever the backend", async () => {
    await expect(init(null as never)).rejects.toThrow(
      new TypeError('init() takes an options object such as { backend: "ts" }, got null'),
    );
    await expect(init("ts" as never)).rejects.toThrow(
      new TypeError('init() takes an options object such as { backend: "ts" }, got "ts"'),
    );
    // Misused options are TypeErrors (a maxMemory number out of range a RangeError), as Node's own checks.
    for (const [options, message] of [
      [{ backend: "ts", simd: "x" }, 'simd must be true or false, got "x"'],
      [{ simd: "x" }, 'simd must be true or false, got "x"'],
      [{ backend: "gpu" }, 'unknown backend "gpu" (expected "wasm" or "ts")'],
      [{ maxMemory: "16" }, 'maxMemory must be a positive whole number of bytes (or Infinity: 4 GiB), got "16"'],
      [
        { backend: "ts", maxMemory: true },
        "maxMemory must be a positive whole number of bytes (or Infinity: 4 GiB), got true",
      ],
    ] as const) {
      const error = await init(options as never).catch((e: unknown) => e);
      expect([options, error instanceof TypeError, (error as Error).message]).toEqual([options, true, message]);
    }
    const range = await init({ backend: "ts", maxMemory: 0.5 }).catch((e: unknown) => e);
    expect([range instanceof RangeError, (range as Error).message]).toEqual([
      true,
      "maxMemory must be a positive whole number of bytes (or Infinity: 4 GiB), got 0.5",
    ]);
    // The browser entry's own option (its loader runs here too: it uses no Node built-in).
    const url = await browserInit({ wasmUrl: "core.wasm" as never }).catch((e: unknown) => e);
    expect([url instanceof TypeError, (url as Error).message]).toEqual([
      true,
      "wasmUrl must be a function from simd (true or false) to the .wasm file's URL, got string",
    ]);
  });

  it("the builder: stage() lengths that are not non-negative integers are a RangeError saying what they were", () => {
    for (const { cf } of backends) {
      const b = cf.builder({ rollout_id: "r", reward: 0 });
      expect(() => b.stage("3" as never, 0)).toThrow(
        new RangeError('promptLength must be a non-negative integer, got "3"'),
      );
      expect(() => b.stage(1, -1)).toThrow(new RangeError("generationLength must be a non-negative integer, got -1"));
      expect(() => b.stage(1.5, 0)).toThrow(new RangeError("promptLength must be a non-negative integer, got 1.5"));
      expect(() => b.stage(2 ** 31, 0)).toThrow(
        new RangeError(`a call holds at most 2^31-1 tokens, got ${2 ** 31} + 0`),
      );
    }
  });

  it("the builder: a commit() whose argument's getter throws changes nothing (the call can be committed again)", () => {
    for (const { name, cf } of backends) {
      const b = cf.builder({ rollout_id: "r", reward: 0 });
      const slot = b.stage(1, 1);
      slot.promptTokenIds.set([1]);
      slot.generationTokenIds.set([2]);
      const meta = {
        get id(): string {
          throw new Error("my getter");
        },
      };
      expect(() => b.commit(meta)).toThrow("my getter");
      expect(b.commit({ id: "c" })).toBe(true);
      const plan = b.finish();
      expect([name, plan.report.status, plan.report.calls, plan.rows.length]).toEqual([name, "ok", 1, 1]);
      plan.release();
    }
  });

  it("the builder: kept must be a boolean (as in plan()), commit() needs its call's fields and a stage()", () => {
    for (const { name, cf } of backends) {
      const b = cf.builder({ rollout_id: "r", reward: 0 });
      expect(() => b.commit({ id: "early" })).toThrow("commit() needs a stage() first");
      b.stage(1, 1);
      expect(() => b.commit(undefined as never)).toThrow(
        "commit() takes the call's { id, agent?, kept?, media?, routed_experts?, weight_version? }, got undefined",
      );
      const slot = b.stage(1, 1);
      slot.promptTokenIds.set([1]);
      slot.generationTokenIds.set([2]);
      expect(b.commit({ id: "c", kept: "no" as never })).toBe(false);
      const plan = b.finish();
      expect([name, plan.report.calls, plan.report.reason, plan.report.detail]).toEqual([
        name,
        1,
        "invalid_rollout",
        'call "c" (calls[0]): kept must be a boolean, got "no"',
      ]);
    }
  });

  it("the builder checks a call's id and agent with plan()'s words, and finish()'s options as plan() does", () => {
    for (const { name, cf } of backends) {
      for (const [meta, field] of [
        [{ id: "" }, "id"],
        [{ id: "c", agent: 5 }, "agent"],
      ] as const) {
        const b = cf.builder({ rollout_id: "r", reward: 0 });
        b.stage(1, 1);
        expect(b.commit(meta as never)).toBe(false);
        const built = b.finish().report.detail!;
        const planned = cf.plan({
          rollout_id: "r",
          reward: 0,
          calls: [{ ...meta, prompt_token_ids: [1], generation_token_ids: [2], generation_log_probs: [-1] }],
        });
        expect([name, field, built.slice(built.indexOf(": "))]).toEqual([
          name,
          field,
          planned.report.detail!.slice(planned.report.detail!.indexOf(": ")),
        ]);
        planned.release();
      }
      const b = cf.builder({ rollout_id: "r", reward: 0 });
      expect(() => b.finish({ line: -3 })).toThrow("finish(): options.line must be a positive integer, got -3");
      const plan = b.finish({ line: 4 }); // the refused call did not end the builder
      expect([name, plan.report.line]).toEqual([name, 4]);
      plan.release();
    }
  });

  it("a released TS core's holder cannot reach it again: a second release() does not hand it to two plans", () => {
    const pool = new TsCorePool();
    const hints = { calls: 0, generated: 0, longestCall: 0 };
    const first = pool.acquire();
    first.begin(new Int32Array(0), hints);
    first.release();
    expect(() => first.stage(1, 1)).toThrow("this core was released");
    const second = pool.acquire(); // the first's core, recycled
    second.begin(new Int32Array(0), hints);
    first.release(); // a stale holder lets go again: must not give the second's core back
    const third = pool.acquire();
    third.begin(new Int32Array(0), hints);
    expect(third.stage(4, 0).tokens).not.toBe(second.stage(4, 0).tokens);
  });

  it("a released core is pooled for the next plan unless a large rollout grew it past the pool's limit", () => {
    const keepBytes = 4 * 2 ** 20;
    const module = new WebAssembly.Module(readFileSync(new URL("../../build/core-simd.wasm", import.meta.url)));
    const pools: [string, { acquire(): ReturnType<TsCorePool["acquire"]> }][] = [
      ["ts", new TsCorePool(2 ** 32, keepBytes)],
      ["wasm", new WasmCorePool(module, 2 ** 32, keepBytes)],
    ];
    const small = good;
    const large: Rollout = {
      rollout_id: "large",
      reward: 0,
      calls: [
        {
          id: "c",
          agent: "main",
          prompt_token_ids: new Int32Array(2_000_000).fill(7),
          generation_token_ids: [1],
          generation_log_probs: [-1],
        },
      ],
    };
    for (const [name, pool] of pools) {
      // The memory a plan's rows are views into: the same buffer again means the same core.
      const memoryOf = (rollout: Rollout) => {
        const plan = planRollout(() => pool.acquire(), rollout);
        expect([name, plan.report.status]).toEqual([name, "ok"]);
        const buffer = plan.rows[0].tokenIds.buffer;
        plan.release();
        return buffer;
      };
      const first = memoryOf(small);
      expect([name, memoryOf(small) === first]).toEqual([name, true]);
      const grown = memoryOf(large);
      expect([name, grown.byteLength > keepBytes]).toEqual([name, true]);
      expect([name, memoryOf(small) === grown]).toEqual([name, false]);
    }
  });

  it("the WebAssembly builds export the commit() codes the host reads them by", () => {
    for (const build of ["core-simd", "core-scalar"]) {
      const module = new WebAssembly.Module(readFileSync(new URL(`../../build/${build}.wasm`, import.meta.url)));
      const exports = new WebAssembly.Instance(module, { env: { abort() {} } }).exports as Record<
        string,
        WebAssembly.Global
      >;
      const codes = Object.fromEntries(
        ["AMBIGUOUS_PARENT", "INVALID_TOKEN", "INVALID_LOGPROB", "NOT_LINKED"].map((name) => [
          name,
          exports[name]?.value,
        ]),
      );
      expect([build, codes]).toEqual([build, { AMBIGUOUS_PARENT, INVALID_TOKEN, INVALID_LOGPROB, NOT_LINKED }]);
    }
  });

  it("an agent without a string id is refused saying what it got", () => {
    for (const { name, cf } of backends) {
      const details = [[{ id: 5 }], [{ mode: "fork" }], [7]].map(
        (agents) => cf.plan({ rollout_id: "r", reward: 0, agents, calls: [] } as never).report.detail,
      );
      expect([name, ...details]).toEqual([
        name,
        "agents[0].id must be a string, got 5",
        "agents[0].id is missing (it must be a string)",
        "agents[0] must be an object with a string id, got 7",
      ]);
    }
  });

  it("the TS core reads typed arrays in place (no staging copy), plain ones staged, with the WASM core's rows", () => {
    const rollout = typedExample();
    const direct = vi.spyOn(TsCore.prototype, "commitArrays");
    const staged = vi.spyOn(TsCore.prototype, "commit");
    try {
      const [ts, wasm] = [backends[0].cf.plan(rollout), backends[1].cf.plan(rollout)];
      expect([direct.mock.calls.length, staged.mock.calls.length]).toEqual([rollout.calls.length, 0]);
      expect(ts.rows.map((row) => rowToJson(row))).toEqual(wasm.rows.map((row) => rowToJson(row)));
      ts.release();
      wasm.release();
      backends[0].cf.plan(loadExample()).release();
      expect(staged.mock.calls.length).toBe(rollout.calls.length);
    } finally {
      direct.mockRestore();
      staged.mockRestore();
    }
  });

  it("init({ simd }) takes a boolean only", async () => {
    await expect(init({ simd: "no" as never })).rejects.toThrow('simd must be true or false, got "no"');
  });

  it(
    "no core instance to be had (as with too many live plans) " + "is an error naming the cause, not rollout_too_large",
    () => {
      // A module whose instantiation fails (it imports a function nobody gives it).
      const failing = new WebAssembly.Module(
        new Uint8Array([
          0, 97, 115, 109, 1, 0, 0, 0, 1, 4, 1, 96, 0, 0, 2, 12, 1, 3, 101, 110, 118, 4, 110, 111, 112, 101, 0, 0,
        ]),
      );
      const pool = new WasmCorePool(failing);
      expect(() => planRollout(() => pool.acquire(), good)).toThrow(CoreUnavailableError);
      expect(() => planRollout(() => pool.acquire(), good)).toThrow(
        new RegExp(
          /^cannot create another WebAssembly core instance \(each reserves address space; /.source +
            /0 plans of this init\(\) are not released, and a limit such as ulimit -v counts every instance\): /.source,
        ),
      );
      expect(failureOf(new CoreUnavailableError("cannot create another WebAssembly core instance (...)"))).toEqual({
        exitCode: 2,
        message: "cannot create another WebAssembly core instance (...)",
      });
    },
  );
});
