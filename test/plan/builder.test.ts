// The builder (writing arrays in place) and header edge cases, on both backends: it must give
// exactly what plan() gives for the same calls, rejections included.
import { beforeAll, describe, expect, it } from "vitest";
import { init, type Callforest, type Rollout } from "../../src/index.js";
import { buildFrom, loadExample } from "../support/worked-example.js";

const range = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);

describe.each([{ backend: "ts" as const }, { backend: "wasm" as const }])("builder on $backend", (options) => {
  let cf: Callforest;
  beforeAll(async () => {
    cf = await init(options);
  });

  it("matches plan() when calls are unkept, empty, or the rollout is rejected", () => {
    const base = loadExample();
    const variants: Rollout[] = [
      { ...base, calls: base.calls.map((c, i) => (i === 3 ? { ...c, kept: false } : c)) },
      {
        ...base,
        calls: base.calls.map((c, i) => (i === 5 ? { ...c, generation_token_ids: [], generation_log_probs: [] } : c)),
      },
      { ...base, calls: base.calls.map((c, i) => (i === 7 ? { ...c, id: "C2" } : c)) },
      { ...base, calls: base.calls.map((c, i) => (i === 2 ? { ...c, agent: "Z" } : c)) },
      { ...base, calls: base.calls.map((c, i) => (i === 4 ? { ...c, prompt_token_ids: [400, -7, 402] } : c)) },
      { ...base, calls: base.calls.map((c) => ({ ...c, kept: false })) },
    ];
    for (const rollout of variants) {
      const planned = cf.plan(rollout);
      const built = buildFrom(cf, rollout);
      expect(built.report).toEqual(planned.report);
      expect(built.rows.map((r) => [r.leaf, r.trained, Array.from(r.lossMask)])).toEqual(
        planned.rows.map((r) => [r.leaf, r.trained, Array.from(r.lossMask)]),
      );
      planned.release();
      built.release();
    }
  });

  it("names the call in the reason of a rejection", () => {
    const base = loadExample();
    const rollout = {
      ...base,
      calls: base.calls.map((c, i) => (i === 4 ? { ...c, prompt_token_ids: [400, -7, 402] } : c)),
    };
    const plan = buildFrom(cf, rollout);
    expect(plan.report).toMatchObject({
      status: "rejected",
      reason: "invalid_token",
      detail: 'call "C5" (calls[4]): prompt_token_ids[1] is -7, not an integer in [0, 2^31-1]',
    });
    expect(plan.rows).toEqual([]);
  });

  it("rejects a bad header without throwing", () => {
    const b = cf.builder({ rollout_id: "", reward: 1 });
    const slot = b.stage(1, 1);
    slot.generationTokenIds[0] = 5;
    expect(b.commit({ id: "a" })).toBe(false);
    expect(b.finish().report).toMatchObject({ status: "rejected", reason: "invalid_rollout", rollout_id: null });
  });

  it("treats callsHint as a hint: one too large for memory is ignored", () => {
    const base = loadExample();
    // 2^23 calls once asked for a 1 GiB children table, past the old allocator's largest block.
    for (const callsHint of [5e8, 2 ** 31 - 1, 2 ** 23, 10_000_000, 0]) {
      const plan = buildFrom(cf, base, { callsHint });
      expect(plan.report.status).toBe("ok");
      expect(plan.rows.map((r) => r.leaf)).toEqual(["C4", "C6", "C9", "C10", "C12"]);
      plan.release();
    }
  });

  it("after a rejection, hands out scratch slots and leaves the core alone (the first problem stays)", async () => {
    const small = await init({ ...options, maxMemory: 16 * 2 ** 20 });
    const b = small.builder({ rollout_id: "r", reward: 1 });
    for (const id of ["a", "a"]) {
      const slot = b.stage(1, 1);
      slot.generationTokenIds[0] = 5;
      b.commit({ id });
    }
    const late = b.stage(8_000_000, 1); // 32 MB: past the cap, but the rollout is already rejected
    expect(late.promptTokenIds.length).toBe(8_000_000);
    expect(b.commit({ id: "c" })).toBe(false);
    expect(b.finish().report).toMatchObject({
      reason: "duplicate_call_id",
      detail: 'call "a" (calls[1]): id already used by calls[0]',
    });
  });

  it("refuses a call of more than 2^31-1 tokens, and any use after finish()", () => {
    const b = cf.builder({ rollout_id: "r", reward: 0 });
    expect(() => b.stage(2 ** 32, 1)).toThrow(/^a call holds at most 2\^31-1 tokens, got 4294967296 \+ 1$/);
    expect(() => b.stage(2 ** 31 - 1, 1)).toThrow(RangeError);
    const slot = b.stage(2, 1);
    slot.promptTokenIds.set([1, 2]);
    slot.generationTokenIds[0] = 3;
    b.commit({ id: "x" });
    const plan = b.finish();
    expect(() => b.stage(0, 1)).toThrow(/^stage\(\) after finish\(\)/);
    expect(() => b.commit({ id: "y" })).toThrow(/^commit\(\) after finish\(\)/);
    expect(() => b.finish()).toThrow(/^finish\(\) after finish\(\)/);
    expect(Array.from(plan.rows[0].tokenIds)).toEqual([1, 2, 3]);
  });

  it("refuses negative lengths and a commit without a stage", () => {
    const b = cf.builder({ rollout_id: "r", reward: 0 });
    expect(() => b.stage(-1, 2)).toThrow(RangeError);
    expect(() => b.commit({ id: "a" })).toThrow(/stage\(\) first/);
  });

  it("hands out room for every logprob when a call generates more than any before it but holds fewer tokens", () => {
    const b = cf.builder({ rollout_id: "r", reward: 0 }); // no hints: the staging area grows as calls come
    const fill = (prompt: number, generated: number, from: number) => {
      const slot = b.stage(prompt, generated);
      expect([slot.promptTokenIds.length, slot.generationTokenIds.length, slot.logprobs.length]).toEqual([
        prompt,
        generated,
        generated,
      ]);
      slot.promptTokenIds.set(range(prompt, from));
      slot.generationTokenIds.set(range(generated, from + prompt));
      slot.logprobs.set(range(generated, 1).map((i) => -i));
    };
    fill(1000, 10, 1);
    expect(b.commit({ id: "a" })).toBe(true);
    fill(500, 300, 5000);
    expect(b.commit({ id: "b" })).toBe(true);
    const plan = b.finish();
    const logprobs = plan.rows.map((row) => Array.from(row.logprobs.subarray(row.numTokens - 3)));
    expect([plan.report.status, logprobs]).toEqual([
      "ok",
      [
        [-8, -9, -10],
        [-298, -299, -300],
      ],
    ]);
    plan.release();
  });

  it("is three plain functions: they work detached, and nothing else of it shows", () => {
    const builder = cf.builder({ rollout_id: "r", reward: 0 });
    expect([Object.keys(builder), JSON.stringify(builder)]).toEqual([["stage", "commit", "finish"], "{}"]);
    const { stage, commit, finish } = builder;
    const slot = stage(2, 1);
    slot.promptTokenIds.set([1, 2]);
    slot.generationTokenIds[0] = 3;
    expect(commit({ id: "a" })).toBe(true);
    const plan = finish();
    expect([plan.report.status, Array.from(plan.rows[0].tokenIds)]).toEqual(["ok", [1, 2, 3]]);
    plan.release();
  });
});

describe("headers", () => {
  it("reads an agent without a parent as a top-level agent", async () => {
    const cf = await init();
    const base = loadExample();
    const agents = base.agents!.map((a) => (a.id === "L" ? { id: "L", mode: "leader" } : a));
    const plan = cf.plan({ ...base, agents });
    expect(plan.report.status).toBe("ok");
    expect(plan.agents.find((a) => a.id === "L")).toEqual({ id: "L", parent: null, mode: "leader" });
  });

  it("rejects an agent whose parent is not listed", async () => {
    const cf = await init();
    const base = loadExample();
    const agents = [...base.agents!, { id: "X", parent: "nobody", mode: "fork" }];
    expect(cf.plan({ ...base, agents }).report).toMatchObject({
      status: "rejected",
      reason: "invalid_rollout",
      detail: 'agent "X": parent "nobody" is not a listed agent',
    });
  });
});

describe("values quoted in rejections and the forest survive memory changes", () => {
  it("quotes a bad token of a call whose linking grew memory", async () => {
    const cf = await init(); // a fresh instance: small memory, so this call makes it grow
    const b = cf.builder({ rollout_id: "big", reward: 0 });
    const slot = b.stage(300_000, 2);
    slot.promptTokenIds.set(Int32Array.from({ length: 300_000 }, (_, i) => i % 50_000));
    slot.generationTokenIds.set([5, -7]);
    slot.logprobs.set([-1, -1]);
    expect(b.commit({ id: "a" })).toBe(false);
    expect(b.finish().report.detail).toBe(
      'call "a" (calls[0]): generation_token_ids[1] is -7, not an integer in [0, 2^31-1]',
    );
  });

  it("keeps a released plan's forest right while its memory serves the next plan", async () => {
    const cf = await init();
    const example = loadExample();
    const expected = cf.plan(example);
    const wanted = expected.forest.map((c) => [c.id, c.ownerRow, c.parent]);
    const released = cf.plan(example);
    released.release();
    // The next plan reuses the released plan's instance and overwrites its memory.
    const other = cf.plan({ ...example, calls: [...example.calls].reverse().map((c, i) => ({ ...c, id: `x${i}` })) });
    expect(released.forest.map((c) => [c.id, c.ownerRow, c.parent])).toEqual(wanted);
    other.release();
    expect.assertions(1);
  });

  it("reports a bad token in a typed array before a bad logprob of the same call", async () => {
    for (const backend of ["wasm", "ts"] as const) {
      const cf = await init({ backend });
      const plan = cf.plan({
        rollout_id: "r",
        reward: 0,
        calls: [
          { id: "a", prompt_token_ids: Int32Array.of(1, -2), generation_token_ids: [3], generation_log_probs: ["z"] },
        ],
      });
      expect(plan.report).toMatchObject({
        reason: "invalid_token",
        detail: 'call "a" (calls[0]): prompt_token_ids[1] is -2, not an integer in [0, 2^31-1]',
      });
    }
  });
});
