// Number exactness of assembly/scan's formatter: float32 → text exactly as formatFloat32 (the
// shortest of toPrecision(1..9) that reads back), on a million random float32 values.
import { afterEach, describe, expect, it, vi } from "vitest";
import { RowSerializer } from "../../src/ingest/serialize.js";
import { formatFloat32, fromBase64, maskBit, maskToInts, rowToJson, toBase64 } from "../../src/output/jsonl.js";
import type { Row } from "../../src/types.js";
// Seeded, so a failure reproduces.
import { mulberry32 as rng } from "../../src/random.js";

function randomFloat32s(count: number, seed: number): Float32Array {
  const random = rng(seed);
  const out = new Float32Array(count);
  const bits = new Uint32Array(out.buffer);
  for (let i = 0; i < count; i++) {
    const kind = i % 4;
    if (kind === 0) {
      // Any finite float32.
      do bits[i] = (random() * 2 ** 32) >>> 0;
      while (!Number.isFinite(out[i]));
    } else if (kind === 1) {
      out[i] = -Math.exp(-random() * 30); // logprob-like
    } else if (kind === 2) {
      out[i] = -random() * 20;
    } else {
      // Values with short decimal forms, near powers of two and ten.
      const pick = Math.floor(random() * 5);
      if (pick === 4) {
        // A few ulps around a power of ten or two (where shortest forms and rounding intervals change).
        out[i] = random() < 0.5 ? 10 ** (Math.floor(random() * 40) - 20) : 2 ** (Math.floor(random() * 120) - 60);
        bits[i] += Math.floor(random() * 7) - 3;
        continue;
      }
      if (pick === 0) out[i] = -Math.round(random() * 1e4) / 10 ** Math.floor(random() * 8);
      else if (pick === 1) out[i] = 2 ** (Math.floor(random() * 250) - 140) * (random() < 0.5 ? -1 : 1);
      else if (pick === 2) out[i] = 10 ** (Math.floor(random() * 70) - 45);
      else bits[i] = ((random() * 0x400000) >>> 0) | (random() < 0.5 ? 0x80000000 : 0); // subnormals
    }
  }
  return out;
}

function rowWith(logprobs: Float32Array): Row {
  return {
    index: 0,
    rolloutId: "r",
    leaf: "c",
    agent: "",
    calls: ["c"],
    trained: ["c"],
    context: [],
    groupId: null,
    reward: 1,
    media: [],
    numTokens: logprobs.length,
    tokenIds: new Int32Array(logprobs.length),
    logprobs,
    lossMask: new Uint8Array((logprobs.length + 7) >> 3),
  };
}

describe("formatFloat32 edge values", () => {
  it("keeps the sign of -0 (it reads back as -0), and every edge value reads back exactly", () => {
    expect([formatFloat32(0), formatFloat32(-0)]).toEqual(["0", "-0"]);
    expect(Object.is(Math.fround(JSON.parse(formatFloat32(-0))), -0)).toBe(true);
    const edges = [
      2 ** -149,
      -(2 ** -149),
      2 ** -126,
      3.4028234663852886e38,
      -3.4028234663852886e38,
      2 ** -96,
      2 ** 87,
      1,
      -1,
    ];
    for (const x of edges) expect([x, Math.fround(JSON.parse(formatFloat32(x)))]).toEqual([x, x]);
  });

  it("bisects to the same text as trying 1, 2, 3, ... significant digits in turn (300,000 values)", () => {
    const shortestByTrying = (x: number): string => {
      if (x === 0) return Object.is(x, -0) ? "-0" : "0";
      for (let precision = 1; precision < 10; precision++) {
        const candidate = Number(x.toPrecision(precision));
        if (Math.fround(candidate) === x) return String(candidate);
      }
      return String(x);
    };
    const values = randomFloat32s(300_000, 7);
    const differing = Array.from(values).filter((x) => formatFloat32(x) !== shortestByTrying(x));
    expect(differing).toEqual([]);
    expect([formatFloat32(0.1), formatFloat32(Math.fround(0.1)), formatFloat32(Infinity)]).toEqual([
      "0.1",
      "0.1",
      "Infinity",
    ]);
  });
});

describe("base64 and mask bits without Buffer (the browser's loops)", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it("toBase64 and fromBase64 agree with Buffer at every length mod 3 and every byte value", () => {
    // Every byte value, at lengths that end on a whole group, one byte past it (==) and two (=).
    const all = Uint8Array.from({ length: 256 }, (_, i) => (i * 167 + 13) & 255);
    const cases = [0, 1, 2, 3, 4, 5, 254, 255, 256].map((n) => all.subarray(0, n));
    const withBuffer = cases.map((bytes) => toBase64(bytes));
    vi.stubGlobal("Buffer", undefined);
    expect(cases.map((bytes) => toBase64(bytes))).toEqual(withBuffer);
    for (const [i, text] of withBuffer.entries()) expect(Array.from(fromBase64(text))).toEqual(Array.from(cases[i]));
  });

  it("maskBit reads SPEC's bit order (bit i is bit i % 8 of byte i / 8), as maskToInts does", () => {
    const mask = Uint8Array.of(0b1000_0001, 0b0100_0000, 0b0000_0010);
    expect(Array.from({ length: 24 }, (_, i) => maskBit(mask, i))).toEqual(Array.from(maskToInts(mask, 24)));
    expect([0, 7, 14, 17].map((i) => maskBit(mask, i))).toEqual([1, 1, 1, 1]);
    expect(Array.from({ length: 24 }, (_, i) => maskBit(mask, i)).filter((b) => b === 1)).toHaveLength(4);
  });
});

describe.each([true, false])("float32 → text (simd %s)", (simd) => {
  it("writes -0 and +0 as formatFloat32 does", async () => {
    const serializer = await RowSerializer.create({ simd });
    let text = "";
    serializer.writeRow(rowWith(Float32Array.of(-0, 0, -1.5)), "bits", (chunk) => {
      text += new TextDecoder().decode(chunk);
    });
    expect(text).toContain('"logprobs":[-0,0,-1.5]');
  });

  it(`writes ${simd ? "1,000,000" : "200,000"} random float32 values exactly as formatFloat32`, async () => {
    const serializer = await RowSerializer.create({ simd });
    const decoder = new TextDecoder();
    const total = simd ? 1_000_000 : 200_000;
    const perRow = 100_000;
    for (let start = 0; start < total; start += perRow) {
      const values = randomFloat32s(perRow, 77 + start);
      let text = "";
      serializer.writeRow(rowWith(values), "bits", (chunk) => {
        text += decoder.decode(chunk);
      });
      const written = text.slice(text.indexOf('"logprobs":[') + 12, text.indexOf('],"loss_mask"')).split(",");
      for (let i = 0; i < values.length; i++) {
        const expected = formatFloat32(values[i]);
        if (written[i] !== expected) expect(`${values[i]}: ${written[i]}`).toBe(`${values[i]}: ${expected}`);
      }
      if (start === 0) expect(text).toBe(rowToJson(rowWith(values), "bits") + "\n");
    }
  });
});
