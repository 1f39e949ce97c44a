// Memory growth detaches typed-array views. A plan's row arrays must stay valid until its own
// release(), whatever other plans do meanwhile.
import { describe, expect, it } from "vitest";
import { init } from "../../src/index.js";
import type { Rollout } from "../../src/types.js";

/** A leader whose context grows call by call: `calls` calls adding `step` tokens each. */
function growingRollout(id: string, calls: number, step: number, seed: number): Rollout {
  const history = new Int32Array(calls * (step + 64));
  let length = 0;
  const out: Rollout = { rollout_id: id, reward: 1, calls: [] };
  for (let c = 0; c < calls; c++) {
    for (let i = 0; i < step; i++) history[length++] = (seed * 7919 + c * 104729 + i * 31) % 150000;
    const generation = Int32Array.from({ length: 64 }, (_, i) => (seed + c * 64 + i) % 150000);
    out.calls.push({
      id: `${id}-${c}`,
      prompt_token_ids: history.slice(0, length),
      generation_token_ids: generation,
      generation_log_probs: Float32Array.from(generation, (t) => -(t % 1000) / 997),
    });
    history.set(generation, length);
    length += generation.length;
    // Every fourth call forks off a side branch that ends there: more leaves, more rows.
    if (c % 4 === 3) {
      out.calls.push({
        id: `${id}-${c}-side`,
        prompt_token_ids: Int32Array.from([...history.subarray(0, length), 1, 2, 3]),
        generation_token_ids: Int32Array.of(7, 8),
        generation_log_probs: Float32Array.of(-0.5, -0.25),
      });
    }
  }
  return out;
}

describe("views handed out by a plan", () => {
  it("still read right after a second, larger plan grows memory", async () => {
    const cf = await init();
    const first = cf.plan(growingRollout("first", 40, 2000, 1)); // ~1.7M tokens in, 11 rows out
    expect(first.report.status).toBe("ok");
    const views = first.rows.map((r) => [r.tokenIds, r.logprobs, r.lossMask] as const);
    const copies = first.rows.map((r) => [r.tokenIds.slice(), r.logprobs.slice(), r.lossMask.slice()] as const);
    const firstBuffer = first.rows[0].tokenIds.buffer;
    const sizeBefore = firstBuffer.byteLength;

    const second = cf.plan(growingRollout("second", 50, 3000, 2)); // ~3.9M tokens, larger rows
    expect(second.report.status).toBe("ok");
    expect(second.rows[0].tokenIds.buffer).not.toBe(firstBuffer);

    // Nothing detached, nothing overwritten.
    expect(firstBuffer.byteLength).toBe(sizeBefore);
    views.forEach(([tokens, logprobs, mask], i) => {
      expect(tokens.length).toBe(copies[i][0].length);
      expect(tokens).toEqual(copies[i][0]);
      expect(logprobs).toEqual(copies[i][1]);
      expect(mask).toEqual(copies[i][2]);
    });
    second.release();
    first.release();
  });

  it("recycles a released plan's memory for the next plan", async () => {
    const cf = await init();
    const a = cf.plan(growingRollout("a", 10, 100, 3));
    const buffer = a.rows[0].tokenIds.buffer;
    a.release();
    const b = cf.plan(growingRollout("b", 10, 100, 4));
    expect(b.rows[0].tokenIds.buffer).toBe(buffer);
    b.release();
  });

  it("gives a plan that is still held its own memory", async () => {
    const cf = await init();
    const a = cf.plan(growingRollout("a", 10, 100, 3));
    const b = cf.plan(growingRollout("b", 10, 100, 4));
    expect(b.rows[0].tokenIds.buffer).not.toBe(a.rows[0].tokenIds.buffer);
    expect(a.rows[0].tokenIds[0]).toBe(growingRollout("a", 1, 100, 3).calls[0].prompt_token_ids[0]);
    a.release();
    b.release();
  });
});

describe("a rollout too large for one instance", () => {
  it("is rejected with rollout_too_large, and the next rollout plans normally", async () => {
    const cf = await init({ maxMemory: 8 * 2 ** 20 });
    // Its longest call fits (16 bytes a token: 5.8 MB), its rows (~1.6 M tokens) do not: the core aborts.
    const big = cf.plan(growingRollout("big", 30, 12_000, 5));
    expect(big.report).toMatchObject({ rollout_id: "big", status: "rejected", reason: "rollout_too_large", rows: 0 });
    expect(big.report.detail).toBe(
      "the rollout does not fit in one core's memory " +
        "(the WebAssembly core ran out of memory at init's maxMemory of 8 MiB)",
    );
    // Its longest call alone (1.2 M tokens) cannot fit: refused before it is copied in.
    const longer = cf.plan(growingRollout("longer", 30, 40_000, 5));
    expect(longer.report.detail).toMatch(
      new RegExp(
        /^the rollout does not fit in one core's memory \(its longest call has \d+ tokens; /.source +
          /its calls need at least \d+ bytes of core memory, more than its 8388608\)$/.source,
      ),
    );
    const small = cf.plan(growingRollout("small", 5, 100, 6));
    expect(small.report).toMatchObject({ status: "ok", rows: 2 });
    small.release();
  });
});
