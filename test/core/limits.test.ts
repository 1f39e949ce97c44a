// Odd inputs and memory limits on both backends: what a rollout gets must depend on the rollout
// alone — not on size hints, on what a pooled core planned before, or on the array types used.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { init } from "../../src/index.js";
import { buildFrom } from "../support/worked-example.js";
import type { TokenIds } from "../../src/types.js";

const BACKENDS = ["wasm", "ts"] as const;
const MiB = 2 ** 20;

const call = (id: string, prompt: TokenIds, generation: TokenIds) => ({
  id,
  prompt_token_ids: prompt,
  generation_token_ids: generation,
  generation_log_probs: Array.from(generation, () => -1),
});
const reasonOf = (report: { status: string; reason?: string }) => report.reason ?? report.status;

describe("odd token arrays", () => {
  it(
    "a negative token in an Int32Array is invalid_token at once " + "(the TS core once followed another node's child)",
    async () => {
      const t = 3 - 2 ** 31;
      const typed = (id: string, gen: number[]) => ({
        ...call(id, new Int32Array(0), Int32Array.from(gen)),
        generation_log_probs: new Float32Array(gen.length),
      });
      const rollout = {
        rollout_id: "neg",
        reward: 0,
        calls: [typed("X", [1, 2, 3, 4]), typed("X2", [7, 3, 8]), typed("P", [1, 2]), typed("F", [7, t, 9])],
      };
      for (const backend of BACKENDS) {
        const plan = (await init({ backend })).plan(rollout);
        expect([backend, plan.report.reason, plan.report.detail]).toEqual([
          backend,
          "invalid_token",
          `call "F" (calls[3]): generation_token_ids[1] is ${t}, not an integer in [0, 2^31-1]`,
        ]);
      }
    },
  );

  it("a BigInt or a Symbol among plain token ids is invalid_token, not an exception", async () => {
    for (const backend of BACKENDS) {
      const cf = await init({ backend });
      for (const [value, shown] of [
        [5n, "5n"],
        [Symbol("s"), "symbol"],
      ] as const) {
        const plan = cf.plan({ rollout_id: "r", reward: 0, calls: [call("a", [1, value as unknown as number], [2])] });
        expect(plan.report.detail).toBe(
          `call "a" (calls[0]): prompt_token_ids[1] is ${shown}, not an integer in [0, 2^31-1]`,
        );
      }
    }
  });

  it("names the first bad token of prompt ++ generation whatever array types hold them", async () => {
    for (const backend of BACKENDS) {
      const cf = await init({ backend });
      for (const prompt of [[1, -2], Int32Array.of(1, -2)]) {
        const plan = cf.plan({ rollout_id: "r", reward: 0, calls: [call("a", prompt, [1.5])] });
        expect(plan.report.detail).toBe(
          'call "a" (calls[0]): prompt_token_ids[1] is -2, not an integer in [0, 2^31-1]',
        );
      }
    }
  });

  it(
    "a sparse array claiming 4 G entries is rollout_too_large on both backends, " + "without reserving gigabytes",
    async () => {
      // (The WASM host once passed 2^32 tokens to the core as an i32, which wrapped to 0.)
      const sparse: number[] = [];
      sparse.length = 2 ** 32 - 1;
      for (const backend of BACKENDS) {
        const plan = (await init({ backend })).plan({ rollout_id: "r", reward: 0, calls: [call("a", sparse, [1])] });
        expect(plan.report.detail).toBe(
          `the rollout does not fit in one core's memory ` +
            `(a call of ${2 ** 32} tokens: a core holds at most 2^31-1 tokens a call)`,
        );
      }
    },
  );
});

describe("memory limits (init({ maxMemory }))", () => {
  it("any maxMemory past 4 GiB (even Infinity) is the 4 GiB of wasm32, not a wrapped page count", async () => {
    for (const maxMemory of [2 ** 32, 2 ** 47, 2 ** 48, Number.MAX_SAFE_INTEGER, Infinity]) {
      const plan = (await init({ maxMemory })).plan({ rollout_id: "r", reward: 0, calls: [call("a", [1, 2], [3])] });
      expect([maxMemory, plan.report.status]).toEqual([maxMemory, "ok"]);
    }
  });

  it("refuses a maxMemory that is not a positive whole number of bytes", async () => {
    for (const maxMemory of [1.5, 0, -1, Number.NaN, 2 ** 53 + 2]) {
      await expect(init({ maxMemory })).rejects.toThrow(
        `maxMemory must be a positive whole number of bytes (or Infinity: 4 GiB), got ${maxMemory}`,
      );
    }
  });

  it("route ids count against maxMemory on both backends (each linked call keeps one per token)", async () => {
    // A chain of 40 calls of ~50,000 tokens: its tokens are stored once (~0.2 MB), but each call's
    // route ids are its own (~8 MB in all).
    const chain = (routes: boolean) => {
      const calls = [];
      let prompt = Array.from({ length: 50_000 }, (_, i) => i % 1000);
      for (let i = 0; i < 40; i++) {
        const full = prompt.length + 1;
        const entries = Buffer.alloc(full - 1, 1).toString("base64"); // int8, every token to expert 1
        calls.push({
          ...call(`c${i}`, prompt, [7]),
          ...(routes ? { routed_experts: `nrlre1:int8:${full - 1}x1x1:${entries}` } : {}),
        });
        prompt = [...prompt, 7, 8];
      }
      return { rollout_id: routes ? "routed" : "plain", reward: 0, calls };
    };
    for (const backend of BACKENDS) {
      const cf = await init({ backend, maxMemory: 6 * MiB });
      expect([backend, reasonOf(cf.plan(chain(false)).report)]).toEqual([backend, "ok"]);
      expect([backend, reasonOf(cf.plan(chain(true)).report)]).toEqual([backend, "rollout_too_large"]);
      const roomy = await init({ backend, maxMemory: 64 * MiB });
      expect([backend, reasonOf(roomy.plan(chain(true)).report)]).toEqual([backend, "ok"]);
    }
  });

  it("the TS backend keeps to maxMemory too: past it rollout_too_large, not a process the system kills", async () => {
    // 20 MB of tokens to store
    const big = { rollout_id: "big", reward: 0, calls: [call("a", new Int32Array(5_000_000).fill(4), [2])] };
    for (const backend of BACKENDS) {
      const cf = await init({ backend, maxMemory: 16 * MiB });
      const plan = cf.plan(big);
      expect([backend, plan.report.status, plan.report.reason, plan.rows.length]).toEqual([
        backend,
        "rejected",
        "rollout_too_large",
        0,
      ]);
      // Refused before the call is copied in: its tokens alone need more than the core may hold.
      const bytes = backend === "ts" ? 12 * 5_000_001 : 16 * 5_000_001;
      expect(plan.report.detail).toBe(
        `the rollout does not fit in one core's memory (its longest call has 5000001 tokens; ` +
          `its calls need at least ${bytes} bytes of core memory, more than its 16777216)`,
      );
      // The builder too, however large a call it is asked to stage, and the next rollout plans.
      const builder = cf.builder({ rollout_id: "staged", reward: 0 });
      builder.stage(5_000_000, 1);
      expect(builder.commit({ id: "a" })).toBe(false);
      expect([backend, builder.finish().report.reason]).toEqual([backend, "rollout_too_large"]);
      expect([
        backend,
        reasonOf(cf.plan({ rollout_id: "small", reward: 0, calls: [call("a", [1, 2], [3])] }).report),
      ]).toEqual([backend, "ok"]);
    }
    // Size hints are only hints: unkept retries hinting 24 MB of logprobs do not make a 16 MiB core
    // refuse a small rollout.
    const retries = Array.from({ length: 6 }, (_, i) => ({
      ...call(`r${i}`, [], new Int32Array(1_000_000).fill(3)),
      kept: false,
      generation_log_probs: new Float32Array(1_000_000),
    }));
    for (const backend of BACKENDS) {
      const plan = (await init({ backend, maxMemory: 16 * MiB })).plan({
        rollout_id: "hinted",
        reward: 0,
        calls: [...retries, call("a", [1, 2], [3])],
      });
      expect([backend, reasonOf(plan.report)]).toEqual([backend, "ok"]);
    }
    // The default is 4 GiB on both; the TS backend checks maxMemory as the WASM one does.
    await expect(init({ backend: "ts", maxMemory: -1 })).rejects.toThrow(
      "maxMemory must be a positive whole number of bytes (or Infinity: 4 GiB), got -1",
    );
  });

  it("size hints never make a rollout too large: a big unkept retry among many calls fits under 64 MiB", async () => {
    const retry = {
      ...call("retry", new Int32Array(0), new Int32Array(4_150_000).fill(3)),
      kept: false,
      generation_log_probs: new Float32Array(4_150_000).fill(-1),
    };
    const empties = Array.from({ length: 20_000 }, (_, i) => ({ ...call(`e${i}`, [], []), kept: false }));
    const rollout = { rollout_id: "r", reward: 1, calls: [retry, ...empties, call("a", [1, 2], [3])] };
    for (const backend of BACKENDS) {
      const plan = (await init({ backend, maxMemory: 64 * MiB })).plan(rollout);
      expect([backend, reasonOf(plan.report), plan.report.rows]).toEqual([backend, "ok", 1]);
    }
  });

  it("what a pooled instance planned before does not change whether the next rollout fits", async () => {
    const longPrompt = { rollout_id: "A", reward: 1, calls: [call("a", new Int32Array(3_000_000).fill(1), [2])] };
    const longGeneration = {
      rollout_id: "B",
      reward: 1,
      calls: [
        {
          ...call("b", [], new Int32Array(1_900_000).fill(5)),
          generation_log_probs: new Float32Array(1_900_000).fill(-1),
        },
      ],
    };
    const cf = await init({ maxMemory: 64 * MiB });
    for (const rollout of [longPrompt, longGeneration, longPrompt, longGeneration]) {
      const plan = cf.plan(rollout);
      expect([rollout.rollout_id, reasonOf(plan.report)]).toEqual([rollout.rollout_id, "ok"]);
      plan.release();
    }
    // A wide forest (1,200 forks of one 4,000-token root: rows of ~19 MB) after a long prompt.
    const root = Array.from({ length: 4000 }, (_, i) => i);
    const wide = {
      rollout_id: "wide",
      reward: 0,
      calls: [call("r", root, [7]), ...Array.from({ length: 1200 }, (_, k) => call(`c${k}`, [...root, 7], [5000 + k]))],
    };
    for (const rollout of [
      wide,
      {
        ...longPrompt,
        calls: [
          call(
            "b",
            Int32Array.from({ length: 3_500_000 }, (_, i) => i),
            [1],
          ),
        ],
      },
      wide,
    ]) {
      const plan = cf.plan(rollout);
      expect([rollout.rollout_id, reasonOf(plan.report)]).toEqual([rollout.rollout_id, "ok"]);
      plan.release();
    }
    // A generous builder hint first changes nothing either.
    const builder = cf.builder({ rollout_id: "h", reward: 0 }, { callsHint: (64 * MiB) / 256 });
    const slot = builder.stage(1, 1);
    slot.generationTokenIds[0] = 1;
    builder.commit({ id: "x" });
    builder.finish().release();
    expect(reasonOf(cf.plan(longGeneration).report)).toBe("ok");
  });
});

describe("a pooled instance after a big plan", () => {
  it("builds the next rollout right with a builder and a large callsHint, on a 64 MiB cap", async () => {
    // A plan of 1.5 M generated tokens (staging, token and logprob stores of 6 MB each), then a
    // builder whose callsHint asks for ~10 MB of tables, on the same instance: the builder's
    // plan starts from its own sizes and gives the rows a fresh instance gives.
    const g = 1_500_000;
    const huge = {
      rollout_id: "A",
      reward: 1,
      calls: [{ ...call("a", [], new Int32Array(g).fill(5)), generation_log_probs: new Float32Array(g).fill(-1) }],
    };
    const small = {
      rollout_id: "B",
      reward: 1,
      calls: Array.from({ length: 4 }, (_, i) =>
        call(
          `c${i}`,
          Int32Array.from({ length: 1000 + i * 1010 }, (_, k) => k % 997),
          [7, 8, 9, 10, 11, 12, 13, 14, 15, 16],
        ),
      ),
    };
    const rowsOf = (plan: {
      rows: { leaf: string; tokenIds: Int32Array; logprobs: Float32Array; lossMask: Uint8Array }[];
    }) => plan.rows.map((r) => [r.leaf, Array.from(r.tokenIds), Array.from(r.logprobs), Array.from(r.lossMask)]);
    const expected = rowsOf((await init()).plan(small));
    const cf = await init({ maxMemory: 64 * MiB });
    const first = cf.plan(huge);
    expect(first.report.status).toBe("ok");
    first.release();
    const built = buildFrom(cf, small, { callsHint: 60_000 });
    expect(built.report.status).toBe("ok");
    expect(rowsOf(built)).toEqual(expected);
  });
});

describe("plans and the caller's arrays", () => {
  it("a plan does not keep the rollout's arrays alive (its rows are the core's own)", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    for (const backend of BACKENDS) {
      const cf = await init({ backend });
      const plans: unknown[] = [];
      const refs: WeakRef<number[]>[] = [];
      // In a function, so that no frame of this test still holds the last rollout.
      const planOne = () => {
        const prompt = Array.from({ length: 100_000 }, (_, i) => i % 1000);
        refs.push(new WeakRef(prompt));
        plans.push(cf.plan({ rollout_id: "r", reward: 1, calls: [call("a", prompt, [1])] }));
      };
      for (let i = 0; i < 4; i++) planOne();
      await new Promise((resolve) => setTimeout(resolve, 0));
      gc();
      expect([backend, refs.map((ref) => ref.deref() === undefined)]).toEqual([backend, [true, true, true, true]]);
      expect(plans).toHaveLength(4);
    }
  });

  it("nor does a pooled core after release(), when it read the caller's typed arrays in place (TS)", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    for (const backend of BACKENDS) {
      const cf = await init({ backend });
      const refs: WeakRef<Int32Array>[] = [];
      const planOne = () => {
        const prompt = Int32Array.from({ length: 100_000 }, (_, i) => i % 1000);
        const generation = Int32Array.of(1);
        refs.push(new WeakRef(prompt), new WeakRef(generation));
        cf.plan({
          rollout_id: "r",
          reward: 1,
          calls: [
            {
              id: "a",
              prompt_token_ids: prompt,
              generation_token_ids: generation,
              generation_log_probs: Float32Array.of(-1),
            },
          ],
        }).release();
      };
      planOne();
      await new Promise((resolve) => setTimeout(resolve, 0));
      gc();
      expect([backend, refs.map((ref) => ref.deref() === undefined)]).toEqual([backend, [true, true]]);
    }
  });
});

describe("a call too long for the core", () => {
  it("is rollout_too_large before its arrays are copied in, naming the bound", async () => {
    const { init } = await import("../../src/index.js");
    // WASM stages the longest call, stores it and writes it in a row: 16 bytes a token at least.
    const cf = await init({ maxMemory: 2 ** 20 });
    const tokens = new Int32Array(70_000);
    const plan = cf.plan({
      rollout_id: "long",
      reward: 0,
      calls: [{ id: "c", prompt_token_ids: tokens, generation_token_ids: [1], generation_log_probs: [-1] }],
    });
    expect([plan.report.reason, plan.report.detail]).toEqual([
      "rollout_too_large",
      "the rollout does not fit in one core's memory (its longest call has 70001 tokens; " +
        "its calls need at least 1120016 bytes of core memory, more than its 1048576)",
    ]);
    // and the core it did not use serves the next plan
    const small = cf.plan({
      rollout_id: "s",
      reward: 0,
      calls: [{ id: "c", prompt_token_ids: [1], generation_token_ids: [2], generation_log_probs: [-1] }],
    });
    expect(small.report.status).toBe("ok");
    small.release();
  });
});

describe("the early refusal counts only what a core must hold", () => {
  it("an unkept retry longer than a linked call may be is only staged: it does not refuse the rollout", async () => {
    // 5 M tokens: staged, 20 MB; were it linked, 80 MB (16 a token) would pass 64 MiB.
    const retry = {
      id: "retry",
      prompt_token_ids: new Int32Array(0),
      generation_token_ids: new Int32Array(5_000_000).fill(3),
      generation_log_probs: new Float32Array(5_000_000),
      kept: false,
    };
    for (const backend of ["wasm", "ts"] as const) {
      const cf = await init({ backend, maxMemory: 64 * 2 ** 20 });
      const plan = cf.plan({
        rollout_id: "r",
        reward: 0,
        calls: [retry, { id: "a", prompt_token_ids: [1], generation_token_ids: [2], generation_log_probs: [-1] }],
      });
      expect([backend, plan.report.status]).toEqual([backend, "ok"]);
      plan.release();
    }
  });
});
