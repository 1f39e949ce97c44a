// float32 → the exact text of src/codecs/float32.ts formatFloat32: for precision p = 1..9 take
// x.toPrecision(p) (nearest p-digit decimal, ties away from zero), keep the first whose
// Math.fround(Number(...)) is x, and print it as JavaScript's String(number) does.
// Exact integer arithmetic on the 10-digit truncation of x; magnitudes outside [1e-13, 1e10)
// (never logprobs in practice) and non-finite values go to the host's formatFloat32.
import { exactPow10 } from "./parse-float";
import { mulHigh, mulLow } from "./wide";
import { decimalLength, writeDigitsN } from "./digits";

// @ts-ignore: decorator
@external("env", "formatFloatSlow")
declare function formatFloatSlow(value: f32, address: usize): i32;

const POW5: StaticArray<u64> = [
  1, 5, 25, 125, 625, 3125, 15625, 78125, 390625, 1953125, 9765625, 48828125, 244140625,
  1220703125, 6103515625, 30517578125, 152587890625, 762939453125, 3814697265625,
  19073486328125, 95367431640625, 476837158203125, 2384185791015625, 11920928955078125,
];
const POW10_U64: StaticArray<u64> = [
  1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000, 10000000000,
];

/** floor(m · 2^k · 10^s) for m < 2^24, s in [0, 23], when the result is below 2^64. */
function scaledFloor(m: u64, k: i32, s: i32): u64 {
  const hi = mulHigh(m, unchecked(POW5[s]));
  const lo = mulLow;
  const shift = s + k;
  if (shift >= 0) return lo << <u64>shift;
  const r = -shift;
  if (r >= 64) return hi >> <u64>(r - 64);
  return (lo >> <u64>r) | (hi << <u64>(64 - r));
}

function digitCount(v: u32): i32 {
  return <i32>decimalLength(v);
}

/** Writes `digits·10^exp10` as String(number) would (digits has no trailing zeros). */
function writeJsNumber(at: usize, digits: u32, exp10: i32): usize {
  const k = digitCount(digits);
  const n = k + exp10; // position of the decimal point
  if (k <= n && n <= 21) {
    at = writeDigitsN(at, digits, k);
    for (let i = k; i < n; i++) store<u8>(at++, 0x30);
    return at;
  }
  if (0 < n && n <= 21) {
    const scale = <u32>unchecked(POW10_U64[k - n]);
    at = writeDigitsN(at, digits / scale, n);
    store<u8>(at++, 0x2e);
    // The fraction has exactly k - n digits, with leading zeros.
    return writeDigitsN(at, digits % scale, k - n);
  }
  if (-6 < n && n <= 0) {
    store<u8>(at++, 0x30);
    store<u8>(at++, 0x2e);
    for (let i = n; i < 0; i++) store<u8>(at++, 0x30);
    return writeDigitsN(at, digits, k);
  }
  // Exponential: d[.ddd]e±x
  const scale = <u32>unchecked(POW10_U64[k - 1]);
  store<u8>(at++, <u8>(0x30 + digits / scale));
  if (k > 1) {
    store<u8>(at++, 0x2e);
    at = writeDigitsN(at, digits % scale, k - 1);
  }
  store<u8>(at++, 0x65);
  const e = n - 1;
  store<u8>(at++, e < 0 ? 0x2d : 0x2b);
  const absE = <u32>(e < 0 ? -e : e);
  return writeDigitsN(at, absE, digitCount(absE));
}

/** t9 rounded to the leading digits above `div` (half away from zero), or 0 when too far from x. */
// @ts-ignore: decorator
@inline function candidate(t9: u32, div: u32, bound: u32): u32 {
  const q = t9 / div;
  const r = t9 - q * div;
  const up = r >= div >> 1;
  const distance = up ? div - r : r;
  return distance <= bound ? q + (up ? 1 : 0) : 0;
}

/**
 * Math.fround(Number(text)) === x for the text d·10^exp10: d and the power are exact, so one IEEE
 * operation rounds it right.
 */
// @ts-ignore: decorator
@inline function roundTrips(d: u32, exp10: i32, x: f32): bool {
  const v = exp10 >= 0 ? <f64>d * exactPow10(exp10) : <f64>d / exactPow10(-exp10);
  return <f32>v == x;
}

/** Writes sign and d·10^exp10 (trailing zeros dropped) as String(number). */
function emit(at: usize, bits: u32, d: u32, exp10: i32): usize {
  let digits = d;
  let e = exp10;
  while (digits % 10 == 0) {
    digits /= 10;
    e++;
  }
  if (bits >> 31 != 0) store<u8>(at++, 0x2d);
  return writeJsNumber(at, digits, e);
}

/** Writes formatFloat32(x) at `at`; returns the end. At most 24 bytes. */
export function formatF32(x: f32, at: usize): usize {
  const bits = reinterpret<u32>(x);
  const magnitude = bits & 0x7fffffff;
  if (magnitude == 0) {
    // -0 keeps its sign: "0" would read back as +0.
    if (bits != 0) store<u8>(at++, 0x2d);
    store<u8>(at, 0x30);
    return at + 1;
  }
  const a = <f64>reinterpret<f32>(magnitude);
  if (!(a >= 1e-13 && a < 1e10)) return at + formatFloatSlow(x, at);
  const m: u64 = (magnitude & 0x7fffff) | 0x800000;
  const k: i32 = <i32>(magnitude >> 23) - 150;
  // floor(log10(x)) is e10 or e10 + 1.
  let e10: i32 = ((k + 23) * 78913) >> 18;
  let s = 9 - e10;
  let t = scaledFloor(m, k, s);
  if (t >= 10000000000) {
    e10++;
    s--;
    t = scaledFloor(m, k, s);
  }
  // t: the first 10 significant digits of x, truncated. Rounding to p <= 9 digits, half away
  // from zero, only needs them (the rest never changes a >= half comparison). For p <= 8 the
  // first nine (t9) decide alone; the tenth only matters for p = 9.
  const t9 = <u32>(t / 10);
  const last = <u32>(t % 10);
  // A candidate farther from x than one float32 ulp (t9/m units, +2 for truncation) cannot read
  // back as x: most precisions are rejected with integer work only.
  const bound = (t9 >> 23) + 2; // m >= 2^23, so this is at least t9/m + 2
  const target = reinterpret<f32>(magnitude);
  // Shortest first: keep 1, 2, ... 8 of the 9 digits (dropping 8 ... 1 of them). A candidate
  // that drops 3 or more digits is t9 moved by its last three digits (r3) plus a multiple of
  // 1,000, so it is at least min(r3, 1000 - r3) from t9: when that exceeds `bound`, candidate()
  // would refuse all six, and the common case (most logprobs need 7-9 digits) skips their
  // divisions.
  const r3 = t9 % 1000;
  if (r3 > bound && r3 < 1000 - bound) {
    // The common case, with constant divisors (multiplications once compiled).
    let d = candidate(t9, 100, bound);
    if (d != 0 && roundTrips(d, e10 - 6, target)) return emit(at, bits, d, e10 - 6);
    d = candidate(t9, 10, bound);
    if (d != 0 && roundTrips(d, e10 - 7, target)) return emit(at, bits, d, e10 - 7);
  } else {
    let div: u32 = 100000000;
    for (let dropped = 8; dropped >= 1; dropped--) {
      const d = candidate(t9, div, bound);
      if (d != 0 && roundTrips(d, e10 + dropped - 8, target)) return emit(at, bits, d, e10 + dropped - 8);
      div /= 10;
    }
  }
  const d = t9 + (last >= 5 ? 1 : 0);
  if (roundTrips(d, e10 - 8, target)) return emit(at, bits, d, e10 - 8);
  return at + formatFloatSlow(x, at); // not reached: 9 digits always round-trip a float32
}
