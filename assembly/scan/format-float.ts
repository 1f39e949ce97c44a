// float32 → the exact text of src/output.ts formatFloat32: for precision p = 1..9 take
// x.toPrecision(p) (nearest p-digit decimal, ties away from zero), keep the first whose
// Math.fround(Number(...)) is x, and print it as JavaScript's String(number) does.
// Exact integer arithmetic on the 10-digit truncation of x; magnitudes outside [1e-13, 1e10)
// (never logprobs in practice) and non-finite values go to the host's formatFloat32.
import { exactPow10 } from "./parse-float";
import { mulHigh, mulLow } from "./wide";

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

/** Writes the decimal digits of v (v > 0) at `at`; returns the end. */
function writeDigits(at: usize, v: u64, digits: i32): usize {
  let q = at + <usize>digits;
  while (q > at) {
    store<u8>(--q, <u8>(0x30 + <u32>(v % 10)));
    v /= 10;
  }
  return at + <usize>digits;
}

function digitCount(v: u64): i32 {
  let n = 1;
  while (n < 10 && v >= unchecked(POW10_U64[n])) n++;
  return n;
}

/** Writes `digits·10^exp10` as String(number) would (digits has no trailing zeros). */
function writeJsNumber(at: usize, digits: u64, exp10: i32): usize {
  const k = digitCount(digits);
  const n = k + exp10; // position of the decimal point
  if (k <= n && n <= 21) {
    at = writeDigits(at, digits, k);
    for (let i = k; i < n; i++) store<u8>(at++, 0x30);
    return at;
  }
  if (0 < n && n <= 21) {
    const whole = digits / unchecked(POW10_U64[k - n]);
    const frac = digits % unchecked(POW10_U64[k - n]);
    at = writeDigits(at, whole, n);
    store<u8>(at++, 0x2e);
    // frac has exactly k - n digits, with leading zeros.
    return writeDigits(at, frac, k - n);
  }
  if (-6 < n && n <= 0) {
    store<u8>(at++, 0x30);
    store<u8>(at++, 0x2e);
    for (let i = n; i < 0; i++) store<u8>(at++, 0x30);
    return writeDigits(at, digits, k);
  }
  // Exponential: d[.ddd]e±x
  const lead = digits / unchecked(POW10_U64[k - 1]);
  store<u8>(at++, <u8>(0x30 + <u32>lead));
  if (k > 1) {
    store<u8>(at++, 0x2e);
    at = writeDigits(at, digits % unchecked(POW10_U64[k - 1]), k - 1);
  }
  store<u8>(at++, 0x65);
  const e = n - 1;
  store<u8>(at++, e < 0 ? 0x2d : 0x2b);
  const absE = <u64>(e < 0 ? -e : e);
  return writeDigits(at, absE, digitCount(absE));
}

/** Writes formatFloat32(x) at `at`; returns the end. At most 24 bytes. */
export function formatF32(x: f32, at: usize): usize {
  const bits = reinterpret<u32>(x);
  const magnitude = bits & 0x7fffffff;
  if (magnitude == 0) {
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
  // t: the first 10 significant digits of x, truncated. Rounding to p digits, half away from
  // zero, only needs them: the rest never changes a ≥ half comparison.
  const negative = bits >> 31 != 0;
  for (let p = 1; p <= 9; p++) {
    const div = unchecked(POW10_U64[10 - p]);
    let d = t / div;
    if ((t % div) * 2 >= div) d++;
    const exp10 = e10 - p + 1;
    // Number(text): d·10^exp10 with d and the power exact, so one IEEE operation rounds it right.
    const v = exp10 >= 0 ? <f64>d * exactPow10(exp10) : <f64>d / exactPow10(-exp10);
    if (<f32>v == reinterpret<f32>(magnitude)) {
      let digits = d;
      let e = exp10;
      while (digits % 10 == 0) {
        digits /= 10;
        e++;
      }
      if (negative) store<u8>(at++, 0x2d);
      return writeJsNumber(at, digits, e);
    }
  }
  return at + formatFloatSlow(x, at); // not reached: 9 digits always round-trip a float32
}
