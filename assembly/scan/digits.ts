// Decimal digit writing shared by the int and float formatters.

/** "00".."99" as 200 bytes. */
export const PAIRS = memory.data<u8>([
  48, 48, 48, 49, 48, 50, 48, 51, 48, 52, 48, 53, 48, 54, 48, 55, 48, 56, 48, 57,
  49, 48, 49, 49, 49, 50, 49, 51, 49, 52, 49, 53, 49, 54, 49, 55, 49, 56, 49, 57,
  50, 48, 50, 49, 50, 50, 50, 51, 50, 52, 50, 53, 50, 54, 50, 55, 50, 56, 50, 57,
  51, 48, 51, 49, 51, 50, 51, 51, 51, 52, 51, 53, 51, 54, 51, 55, 51, 56, 51, 57,
  52, 48, 52, 49, 52, 50, 52, 51, 52, 52, 52, 53, 52, 54, 52, 55, 52, 56, 52, 57,
  53, 48, 53, 49, 53, 50, 53, 51, 53, 52, 53, 53, 53, 54, 53, 55, 53, 56, 53, 57,
  54, 48, 54, 49, 54, 50, 54, 51, 54, 52, 54, 53, 54, 54, 54, 55, 54, 56, 54, 57,
  55, 48, 55, 49, 55, 50, 55, 51, 55, 52, 55, 53, 55, 54, 55, 55, 55, 56, 55, 57,
  56, 48, 56, 49, 56, 50, 56, 51, 56, 52, 56, 53, 56, 54, 56, 55, 56, 56, 56, 57,
  57, 48, 57, 49, 57, 50, 57, 51, 57, 52, 57, 53, 57, 54, 57, 55, 57, 56, 57, 57,
]);

/** Number of decimal digits of v. */
// @ts-ignore: decorator
@inline export function decimalLength(v: u32): usize {
  if (v < 100000) {
    if (v < 100) return v < 10 ? 1 : 2;
    return v < 1000 ? 3 : v < 10000 ? 4 : 5;
  }
  if (v < 10000000) return v < 1000000 ? 6 : 7;
  return v < 100000000 ? 8 : v < 1000000000 ? 9 : 10;
}

/** Writes exactly `length` digits of v (leading zeros when v is shorter); returns the end. */
// @ts-ignore: decorator
@inline export function writeDigitsN(at: usize, v: u32, length: usize): usize {
  let q = at + length;
  while (q >= at + 2) {
    const r = v % 100;
    v /= 100;
    q -= 2;
    store<u16>(q, load<u16>(PAIRS + (r << 1)));
  }
  if (q > at) store<u8>(at, <u8>(0x30 + (v % 10)));
  return at + length;
}

/** Writes v in decimal; returns the end. */
// @ts-ignore: decorator
@inline export function writeU32(at: usize, v: u32): usize {
  return writeDigitsN(at, v, decimalLength(v));
}
