// 64×64→128-bit multiplication (WebAssembly has no such instruction).

/** Low 64 bits of the last mulHigh(). */
export let mulLow: u64 = 0;

/** High 64 bits of a·b; the low half goes to mulLow. */
// @ts-ignore: decorator
@inline export function mulHigh(a: u64, b: u64): u64 {
  const aL = a & 0xffffffff, aH = a >> 32, bL = b & 0xffffffff, bH = b >> 32;
  const ll = aL * bL, lh = aL * bH, hl = aH * bL, hh = aH * bH;
  const mid = (ll >> 32) + (lh & 0xffffffff) + (hl & 0xffffffff);
  mulLow = (mid << 32) | (ll & 0xffffffff);
  return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}
