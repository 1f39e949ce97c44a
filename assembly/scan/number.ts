// One JSON number → f32, rounded exactly as Math.fround(JSON.parse(text)): digits into a 19-digit
// mantissa (eight at a time), then decimalToF64; more digits, or a case Eisel–Lemire cannot
// decide, go to the host's Number(text).
import { decimalToF64 } from "./parse-float";
import { eightDigits, nonDigitBits } from "./swar";

// @ts-ignore: decorator
@external("env", "parseFloatSlow")
declare function parseFloatSlow(address: usize, length: i32): f64;

/** Where the last parseNumberF32() stopped. */
export let numberEnd: usize = 0;
const POW10_INT: StaticArray<u64> = [1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000];
/** One JSON number at p as f32 rounded like Math.fround(JSON.parse); sets `numberEnd`; NaN when not a number. */
// @ts-ignore: decorator
@inline export function parseNumberF32(p: usize): f32 {
  // No bounds checks: the zero sentinel at inputEnd is not a digit, `.`, `e` or sign, so every
  // loop below stops there; 8-byte loads past it stay inside the slack.
  const start = p;
  const negative = load<u8>(p) == 0x2d;
  if (negative) p++;
  let mantissa: u64 = 0;
  // Digits taken into `mantissa` (leading zeros not counted); > 19 (or set so by an exponent too
  // long to hold): the host decides.
  let significant = 0;
  let exp10: i32 = 0;
  let x = load<u64>(p) ^ 0x3030303030303030;
  let n = <i32>(ctz(nonDigitBits(x)) >> 3);
  if (n == 0) return NaN;
  if ((x & 0xff) == 0) {
    p++; // "0" (a leading zero before more digits is not JSON: the separator check fails)
  } else if (n < 8) {
    mantissa = eightDigits(x, n);
    significant = n;
    p += <usize>n;
  } else {
    while (true) {
      const digit = <u32>load<u8>(p) - 0x30;
      if (digit > 9) break;
      if (significant < 19) mantissa = mantissa * 10 + digit;
      else exp10++; // dropped integer digit (only matters for the count: > 19 goes to the host)
      significant++;
      p++;
    }
  }
  let c = <u32>load<u8>(p);
  if (c == 0x2e) {
    p++;
    const first = p;
    if (mantissa == 0) {
      // Leading zeros of the fraction, eight bytes at a time (a zero byte of z is a '0').
      while (true) {
        const zeros = <i32>(ctz(load<u64>(p) ^ 0x3030303030303030) >> 3);
        p += <usize>zeros;
        exp10 -= zeros;
        if (zeros < 8) break;
      }
    }
    // Eight digits at a time while they fit the 19-digit mantissa.
    while (true) {
      x = load<u64>(p) ^ 0x3030303030303030;
      n = <i32>(ctz(nonDigitBits(x)) >> 3);
      if (n == 0 || significant + n > 19) break;
      mantissa = mantissa * unchecked(POW10_INT[n]) + eightDigits(x, n);
      significant += n;
      exp10 -= n;
      p += <usize>n;
      if (n < 8) break;
    }
    while (true) {
      const digit = <u32>load<u8>(p) - 0x30;
      if (digit > 9) break;
      if (significant < 19) {
        mantissa = mantissa * 10 + digit;
        exp10--;
      }
      significant++;
      p++;
    }
    if (p == first) return NaN;
    c = load<u8>(p);
  }
  if ((c | 0x20) == 0x65) {
    p++;
    c = load<u8>(p);
    const expNegative = c == 0x2d;
    if (c == 0x2d || c == 0x2b) p++;
    const first = p;
    let e: i32 = 0;
    while (true) {
      const digit = <u32>load<u8>(p) - 0x30;
      if (digit > 9) break;
      // Past the cap (no i32 overflow) the exponent is not known: the host decides, since a
      // fraction with as many leading zeros can bring even such an exponent back into range.
      if (e < 100000) e = e * 10 + <i32>digit;
      else significant = 20;
      p++;
    }
    if (p == first) return NaN;
    exp10 += expNegative ? -e : e;
  }
  numberEnd = p;
  let value: f64 = NaN;
  if (significant <= 19) value = decimalToF64(mantissa, exp10, negative);
  if (isNaN(value)) value = parseFloatSlow(start, <i32>(p - start));
  return <f32>value;
}

