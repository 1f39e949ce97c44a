// RowSerializer: the bytes it emits are exactly `rowToJson(row, maskFormat) + "\n"`, in chunks no
// larger than asked, for real plans and for hand-made rows that stress every field.
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { RowSerializer } from "../../src/ingest/serialize.js";
import { init, type Callforest } from "../../src/index.js";
import { rowToJson, type MaskFormat } from "../../src/output.js";
import type { Row } from "../../src/types.js";
import { acceptedRolloutArb } from "../support/arbitraries.js";
import { loadExample } from "../support/worked-example.js";

const decoder = new TextDecoder();

function serialize(serializer: RowSerializer, row: Row, mask: MaskFormat): { bytes: Uint8Array; chunks: number[] } {
  const parts: Uint8Array[] = [];
  serializer.writeRow(row, mask, (chunk) => parts.push(chunk.slice())); // a chunk is valid until the next
  const bytes = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    bytes.set(p, at);
    at += p.length;
  }
  return { bytes, chunks: parts.map((p) => p.length) };
}

function expectSameBytes(actual: Uint8Array, expected: string): void {
  const want = new TextEncoder().encode(expected);
  if (actual.length !== want.length || actual.some((b, i) => b !== want[i])) {
    const text = decoder.decode(actual);
    let i = 0;
    while (i < text.length && text[i] === expected[i]) i++;
    expect(text.slice(Math.max(0, i - 40), i + 40)).toBe(expected.slice(Math.max(0, i - 40), i + 40));
  }
}

function handRow(numTokens: number, seed: number): Row {
  let a = seed;
  const random = () => ((a = (Math.imul(a, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const tokenIds = Int32Array.from({ length: numTokens }, (_, i) => (i % 97 === 0 ? 2 ** 31 - 1 : Math.floor(random() * 200_000)));
  const logprobs = Float32Array.from({ length: numTokens }, (_, i) => (i % 3 === 0 ? 0 : -Math.exp(-random() * 20)));
  const lossMask = Uint8Array.from({ length: (numTokens + 7) >> 3 }, () => Math.floor(random() * 256));
  return {
    index: 3,
    rolloutId: 'r-"ü€😀\\\n\u2028',
    leaf: "C9",
    agent: "fork/F",
    calls: ["C1", "C3", 'x"y'],
    trained: ["C3", 'x"y'],
    context: ["C1"],
    reward: -0.125,
    numTokens,
    tokenIds,
    logprobs,
    lossMask,
  };
}

describe.each([true, false])("RowSerializer (simd %s)", (simd) => {
  let serializer: RowSerializer;
  let cf: Callforest;
  beforeAll(async () => {
    serializer = await RowSerializer.create({ simd });
    cf = await init();
  });

  it("writes SPEC's worked example exactly as rowToJson, in both mask formats", () => {
    const plan = cf.plan(loadExample());
    expect(plan.rows.length).toBe(5);
    for (const row of plan.rows) {
      for (const mask of ["bits", "ints"] as const) expectSameBytes(serialize(serializer, row, mask).bytes, rowToJson(row, mask) + "\n");
    }
    plan.release();
  });

  it("rowToJson refuses a mask format it does not know instead of picking one", () => {
    const plan = cf.plan(loadExample());
    expect(() => rowToJson(plan.rows[0], "bit" as MaskFormat)).toThrow('maskFormat must be "bits" or "ints", got "bit"');
    plan.release();
  });

  it("writes every row of generated rollouts exactly as rowToJson", () => {
    fc.assert(
      fc.property(acceptedRolloutArb(), fc.constantFrom<MaskFormat>("bits", "ints"), (rollout, mask) => {
        const plan = cf.plan(rollout);
        for (const row of plan.rows) expectSameBytes(serialize(serializer, row, mask).bytes, rowToJson(row, mask) + "\n");
        plan.release();
      }),
      { numRuns: 150 },
    );
  });

  it("splits a long row into bounded chunks with the same bytes (every mask length mod 3 and 8)", () => {
    for (const numTokens of [0, 1, 2, 3, 7, 8, 9, 4095, 4096, 4097, 24_577, 300_001]) {
      const row = handRow(numTokens, numTokens + 1);
      for (const mask of ["bits", "ints"] as const) {
        const { bytes, chunks } = serialize(serializer, row, mask);
        expectSameBytes(bytes, rowToJson(row, mask) + "\n");
        for (const size of chunks) expect(size).toBeLessThanOrEqual(256 * 1024);
        if (numTokens > 100_000) expect(chunks.length).toBeGreaterThan(4);
      }
    }
  });

  it("writes reward and ids the way JSON.stringify does (non-finite reward, long strings)", () => {
    const row = handRow(5, 9);
    for (const reward of [NaN, Infinity, 1e21, 5e-7, -0]) {
      const odd = { ...row, reward, rolloutId: "x😀".repeat(100_000), calls: Array.from({ length: 3000 }, (_, i) => `call-${i}`) };
      const { bytes, chunks } = serialize(serializer, odd, "bits");
      expectSameBytes(bytes, rowToJson(odd, "bits") + "\n");
      for (const size of chunks) expect(size).toBeLessThanOrEqual(256 * 1024);
    }
  });

  it("emits views over its own workspace, not copies (the receiver copies what it keeps)", () => {
    const views: Uint8Array[] = [];
    serializer.writeRow(handRow(300_001, 3), "bits", (chunk) => views.push(chunk));
    expect(views.length).toBeGreaterThan(4);
    // One workspace in linear memory: every chunk is a view over the same buffer, at the same place.
    for (const view of views) {
      expect(view.buffer).toBe(views[0].buffer);
      expect(view.byteOffset).toBe(views[0].byteOffset);
      expect(view.byteOffset).toBeGreaterThan(0);
    }
  });
});
