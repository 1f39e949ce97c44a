// Number exactness of assembly/scan's parser: decimal text → float32 exactly as
// Math.fround(Number(text)), on millions of random decimals.
import { beforeAll, describe, expect, it } from "vitest";
import { LineScanner } from "../../src/ingest/scanner.js";
// Seeded, so a failure reproduces.
import { mulberry32 as rng } from "../../src/random.js";

const f64 = new Float64Array(1);
const f64bits = new Uint32Array(f64.buffer);
const f32 = new Float32Array(1);
const f32bits = new Uint32Array(f32.buffer);

function randomDigits(random: () => number, n: number): string {
  let s = String(1 + Math.floor(random() * 9));
  for (let i = 1; i < n; i++) s += String(Math.floor(random() * 10));
  return s;
}

/** Exact decimal expansion of a double (toPrecision goes to 100 digits; enough for the values used). */
function exactDecimal(x: number): string {
  return x.toPrecision(100).replace(/\.?0+(e|$)/, "$1");
}

/** A mix of decimal strings that stress correct rounding. */
function decimalStrings(count: number, seed: number): string[] {
  const random = rng(seed);
  const out: string[] = [
    "-0." + "0".repeat(30) + "1234567890".repeat(3000),
    "1" + "0".repeat(400) + "e-400",
    "0",
    "-0",
    "0.0",
    "-0.0",
    "0e5",
    "-0E-5",
    "1e-400",
    "-1e-400",
    "4.9e-324",
    "2.2250738585072014e-308",
  ];
  while (out.length < count) {
    const kind = Math.floor(random() * 8);
    const sign = random() < 0.7 ? "-" : "";
    if (kind === 0) {
      // Any double's shortest text (as Python/JSON writers emit), any exponent.
      f64bits[0] = (random() * 2 ** 32) >>> 0;
      f64bits[1] = (random() * 2 ** 32) >>> 0;
      if (Number.isFinite(f64[0])) out.push(String(f64[0]));
    } else if (kind === 1) {
      // A logprob-like double: what vLLM writes (float32 values widened, 17 digits).
      f32[0] = -Math.exp(-random() * 25) * random();
      out.push(String(f32[0]));
    } else if (kind === 2) {
      // 1 to 25 significant digits, a point anywhere, maybe an exponent.
      const digits = randomDigits(random, 1 + Math.floor(random() * 25));
      const point = Math.floor(random() * (digits.length + 1));
      let text =
        point === 0
          ? `0.${"0".repeat(Math.floor(random() * 8))}${digits}`
          : `${digits.slice(0, point)}${point < digits.length ? "." + digits.slice(point) : ""}`;
      if (random() < 0.5)
        text += `${random() < 0.5 ? "e" : "E"}${["", "+", "-"][Math.floor(random() * 3)]}${Math.floor(random() * 40)}`;
      out.push(sign + text);
    } else if (kind === 3) {
      // Near a float32 rounding tie: the midpoint between two float32s, exactly and perturbed.
      f32bits[0] = (random() * 0x7f000000) >>> 0;
      const low = f32[0];
      f32bits[0] += 1;
      const mid = (low + f32[0]) / 2; // exact in double
      const exact = exactDecimal(mid);
      out.push(sign + exact);
      const [mantissa, exponent = "0"] = exact.split("e");
      const digits = mantissa.replace(".", "").replace(/^0+/, "");
      const cut = 9 + Math.floor(random() * 12); // 9..20 digits: just below/above the tie
      if (digits.length > cut) {
        const pointAt = mantissa.indexOf(".") < 0 ? mantissa.length : mantissa.indexOf(".");
        const lead = mantissa.replace(".", "").length - digits.length; // leading zeros
        const kept = BigInt(digits.slice(0, cut)) + BigInt(Math.floor(random() * 3) - 1);
        // value = kept · 10^(pointAt - lead - cut + exponent)
        out.push(`${sign}${kept}e${pointAt - lead - cut + Number(exponent)}`);
      }
    } else if (kind === 4) {
      // Subnormal float32 and double ranges.
      const digits = randomDigits(random, 1 + Math.floor(random() * 19));
      const e = random() < 0.5 ? -38 - Math.floor(random() * 10) : -300 - Math.floor(random() * 30);
      out.push(`${sign}${digits.slice(0, 1)}.${digits.slice(1) || "0"}e${e}`);
    } else if (kind === 5) {
      // 17 to 19 significant digits around ordinary magnitudes.
      const digits = randomDigits(random, 17 + Math.floor(random() * 3));
      out.push(`${sign}0.${"0".repeat(Math.floor(random() * 6))}${digits}`);
    } else if (kind === 6) {
      // Integers and exact powers, with exponents.
      out.push(`${sign}${Math.floor(random() * 1e6)}e${Math.floor(random() * 60) - 30}`);
    } else {
      // Exact float32 values written with all their digits.
      f32bits[0] = (random() * 0x7f800000) >>> 0;
      out.push(sign + exactDecimal(f32[0]));
    }
  }
  return out;
}

function expectSameBits(actual: Float32Array, expected: Float32Array, texts: string[]): void {
  const a = new Uint32Array(actual.buffer, actual.byteOffset, actual.length);
  const b = new Uint32Array(expected.buffer, expected.byteOffset, expected.length);
  expect(actual.length).toBe(expected.length);
  for (let i = 0; i < a.length; i++) {
    if (a[i] !== b[i]) expect(`${texts[i]} -> ${actual[i]}`).toBe(`${texts[i]} -> ${expected[i]}`);
  }
}

describe.each([true, false])("decimal → float32 (simd %s)", (simd) => {
  let scanner: LineScanner;
  beforeAll(async () => {
    scanner = await LineScanner.create({ simd });
  });

  it(`rounds ${simd ? "2,000,000" : "300,000"} random decimals exactly like Math.fround(Number(text))`, () => {
    const total = simd ? 2_000_000 : 300_000;
    const perLine = 100_000;
    const encoder = new TextEncoder();
    for (let start = 0; start < total; start += perLine) {
      const texts = decimalStrings(perLine, 1000 + start).filter((t) => Number.isFinite(Math.fround(Number(t))));
      const expected = Float32Array.from(texts, (t) => Number(t));
      const line = `{"generation_log_probs":[${texts.join(",")}]}`;
      const result = scanner.scan(encoder.encode(line));
      if (!result.ok) throw new Error(result.detail);
      const actual = (result.value as { generation_log_probs: unknown }).generation_log_probs;
      expect(actual).toBeInstanceOf(Float32Array);
      expectSameBits(actual as Float32Array, expected, texts);
    }
  });

  it("reads an exponent too long to hold against a fraction's leading zeros exactly (finite or not)", () => {
    const encoder = new TextEncoder();
    const zeros = (n: number) => "0".repeat(n);
    // Each exponent has more digits than the parser holds; the leading zeros bring some back into range.
    const texts = [
      `-0.${zeros(100_000)}1e1000000000`, // 10^(1e9 - 100001): -Infinity
      `-0.${zeros(1000)}1e10002`, // 10^9001: -Infinity
      `0.${zeros(1_000_000)}15e1000002`, // 1.5
      `-0.${zeros(999_999)}25e+1000000`, // -0.25
      `1e-${zeros(200_000)}1`, // leading zeros in the exponent: 0.1
      `1e-1000000000`, // 0
      `-0.0e99999999999`, // -0
    ];
    for (const text of texts) {
      const expected = Math.fround(Number(text));
      const result = scanner.scan(encoder.encode(`{"generation_log_probs":[-1,${text}]}`));
      if (!result.ok) throw new Error(result.detail);
      const actual = (result.value as { generation_log_probs: unknown[] }).generation_log_probs;
      const label = `${text.slice(0, 12)}…${text.slice(-12)}`;
      if (Number.isFinite(expected)) {
        expect([label, actual instanceof Float32Array, Object.is(actual[1], expected)]).toEqual([label, true, true]);
      } else {
        // Not a float32: the array stays plain, for the planner to reject (invalid_logprob).
        expect([label, actual instanceof Float32Array]).toEqual([label, false]);
      }
    }
  });
});
