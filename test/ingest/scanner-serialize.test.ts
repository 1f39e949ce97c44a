// RowSerializer: the bytes it emits are exactly `rowToJson(row, maskFormat) + "\n"`, in chunks no
// larger than asked, for real plans and for hand-made rows that stress every field.
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { RowSerializer } from "../../src/ingest/serialize.js";
import { init, type Callforest } from "../../src/index.js";
import { rowToJson, type MaskFormat } from "../../src/output/jsonl.js";
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
  const random = () => (a = (Math.imul(a, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  const tokenIds = Int32Array.from({ length: numTokens }, (_, i) =>
    i % 97 === 0 ? 2 ** 31 - 1 : Math.floor(random() * 200_000),
  );
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
    groupId: null,
    reward: -0.125,
    media: [],
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
      for (const mask of ["bits", "ints"] as const)
        expectSameBytes(serialize(serializer, row, mask).bytes, rowToJson(row, mask) + "\n");
    }
    plan.release();
  });

  it("rowToJson refuses a mask format it does not know instead of picking one", () => {
    const plan = cf.plan(loadExample());
    expect(() => rowToJson(plan.rows[0], "bit" as MaskFormat)).toThrow(
      'maskFormat must be "bits" or "ints", got "bit"',
    );
    plan.release();
  });

  it("writes every row of generated rollouts exactly as rowToJson", () => {
    fc.assert(
      fc.property(acceptedRolloutArb(), fc.constantFrom<MaskFormat>("bits", "ints"), (rollout, mask) => {
        const plan = cf.plan(rollout);
        for (const row of plan.rows)
          expectSameBytes(serialize(serializer, row, mask).bytes, rowToJson(row, mask) + "\n");
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
      const odd = {
        ...row,
        reward,
        rolloutId: "x😀".repeat(100_000),
        calls: Array.from({ length: 3000 }, (_, i) => `call-${i}`),
      };
      const { bytes, chunks } = serialize(serializer, odd, "bits");
      expectSameBytes(bytes, rowToJson(odd, "bits") + "\n");
      for (const size of chunks) expect(size).toBeLessThanOrEqual(256 * 1024);
    }
  });

  it("refuses a row whose tokens, logprobs or mask do not hold its numTokens, as rowToJson does", () => {
    // Each array is checked on its own: any one of them short would write a row that lies.
    const row = handRow(9, 4);
    for (const bad of [
      { ...row, logprobs: row.logprobs.subarray(0, 8) },
      { ...row, lossMask: row.lossMask.subarray(0, 1) },
      { ...row, tokenIds: row.tokenIds.subarray(1) },
    ]) {
      expect(() => rowToJson(bad)).toThrow("its arrays do not hold its 9 tokens");
      expect(() => serializer.writeRow(bad, "bits", () => {})).toThrow("its arrays do not hold its 9 tokens");
    }
  });

  it("never splits a surrogate pair where a long id is cut into slices", () => {
    // The two prefixes put a high surrogate at the end of a slice for either slice length parity.
    for (const prefix of ["", "x"]) {
      const row = { ...handRow(3, 5), rolloutId: prefix + "😀".repeat(200_000) };
      expectSameBytes(serialize(serializer, row, "bits").bytes, rowToJson(row, "bits") + "\n");
    }
  });

  it("reserves room for each field's widest text: a chunk never overflows", async () => {
    // The smallest chunk, so a field spans many; INT32_MIN, a 9-digit logprob below 1e-5 (the
    // fast path's longest), and masks (base64 and 0/1) longer than a chunk.
    const small = await RowSerializer.create({ simd, chunkBytes: 128 * 1024 });
    const wide = handRow(100_000, 6);
    wide.tokenIds.fill(-(2 ** 31));
    wide.logprobs.fill(-0.0000012345678);
    const zeros = {
      ...handRow(1_000_000, 7),
      tokenIds: new Int32Array(1_000_000),
      logprobs: new Float32Array(1_000_000),
    };
    zeros.lossMask.fill(0b1010_0101);
    for (const row of [wide, zeros]) {
      for (const mask of ["bits", "ints"] as const) {
        const { bytes, chunks } = serialize(small, row, mask);
        expectSameBytes(bytes, rowToJson(row, mask) + "\n");
        for (const size of chunks) expect(size).toBeLessThanOrEqual(128 * 1024);
      }
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
