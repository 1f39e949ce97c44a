// Decimal → f64, correctly rounded like JSON.parse: Clinger's fast path, then Eisel–Lemire
// (Go's strconv port). NaN means "not sure": the caller asks the host (Number(text)) instead.
import { POW10_128, POW10_MAX, POW10_MIN } from "./pow10-table";
import { mulHigh, mulLow } from "./wide";

const EXACT_POW10: StaticArray<f64> = [
  1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
  1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/** 10^e as f64, exact for e in [0, 22]. */
// @ts-ignore: decorator
@inline export function exactPow10(e: i32): f64 {
  return unchecked(EXACT_POW10[e]);
}

/** man·10^exp10 (man holds at most 19 digits, exactly), or NaN when the fast methods cannot decide. */
// @ts-ignore: decorator
@inline export function decimalToF64(man: u64, exp10: i32, negative: bool): f64 {
  if (man == 0) return negative ? -0.0 : 0.0;
  if (man <= 9007199254740992 && exp10 >= -22 && exp10 <= 22) {
    // Both operands exact: one IEEE operation rounds correctly.
    let v = <f64>man;
    v = exp10 < 0 ? v / exactPow10(-exp10) : v * exactPow10(exp10);
    return negative ? -v : v;
  }
  return eiselLemire(man, exp10, negative);
}

function eiselLemire(man: u64, exp10: i32, negative: bool): f64 {
  if (exp10 < POW10_MIN || exp10 > POW10_MAX) return NaN;
  const zeros = clz<u64>(man);
  man <<= zeros;
  let retExp2: u64 = <u64>(<i64>(((217706 * exp10) >> 16) + 64 + 1023)) - zeros;
  const index = (exp10 - POW10_MIN) << 1;
  const powLow = unchecked(POW10_128[index]);
  const powHigh = unchecked(POW10_128[index + 1]);
  let xHi = mulHigh(man, powHigh);
  let xLo = mulLow;
  if ((xHi & 0x1ff) == 0x1ff && xLo + man < man) {
    const yHi = mulHigh(man, powLow);
    const yLo = mulLow;
    let mergedHi = xHi;
    const mergedLo = xLo + yHi;
    if (mergedLo < xLo) mergedHi++;
    if ((mergedHi & 0x1ff) == 0x1ff && mergedLo + 1 == 0 && yLo + man < man) return NaN;
    xHi = mergedHi;
    xLo = mergedLo;
  }
  const msb = xHi >> 63;
  let mantissa = xHi >> (msb + 9);
  retExp2 -= 1 ^ msb;
  if (xLo == 0 && (xHi & 0x1ff) == 0 && (mantissa & 3) == 1) return NaN; // halfway: ambiguous
  mantissa += mantissa & 1;
  mantissa >>= 1;
  if (mantissa >> 53 > 0) {
    mantissa >>= 1;
    retExp2 += 1;
  }
  if (retExp2 - 1 >= 0x7ff - 1) return NaN; // subnormal or overflow: let the host decide
  let bits = (retExp2 << 52) | (mantissa & 0x000fffffffffffff);
  if (negative) bits |= 0x8000000000000000;
  return reinterpret<f64>(bits);
}
