// Eight bytes at a time (SWAR) and sixteen (v128): digit and comma masks, and Lemire's
// eight-digit parse. Shared by the token and logprob parsers.

/** Bit i set where byte i of the 16 at v is an ASCII digit / a comma. */
// @ts-ignore: decorator
@inline export function digitBits(v: v128): u64 {
  return <u64>i8x16.bitmask(i8x16.lt_u(i8x16.sub(v, i8x16.splat(0x30)), i8x16.splat(10)));
}
// @ts-ignore: decorator
@inline export function commaBits(v: v128): u64 {
  return <u64>i8x16.bitmask(i8x16.eq(v, i8x16.splat(0x2c)));
}

// @ts-ignore: decorator
@inline export function eightDigits(x: u64, n: i32): u64 {
  // x: digit values in its low n bytes (first digit lowest). Right-align them as an 8-digit
  // number with leading zeros, then combine pairs, quads, octets (Lemire's SWAR).
  let v = x << (<u64>(8 - n) << 3);
  v = v * 10 + (v >> 8);
  return ((v & 0x000000ff000000ff) * 0x000f424000000064 + ((v >> 16) & 0x000000ff000000ff) * 0x0000271000000001) >> 32;
}

// @ts-ignore: decorator
@inline export function nonDigitBits(x: u64): u64 {
  return ((x + 0x7676767676767676) | x) & 0x8080808080808080;
}

