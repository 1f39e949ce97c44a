// The hot loops: token-sequence comparison and input checks, with v128 when built with SIMD.

/** Length of the common prefix of the i32 sequences at `a` and `b`, looking at most `n` tokens. */
export function commonPrefix(a: usize, b: usize, n: i32): i32 {
  let i: i32 = 0;
  if (ASC_FEATURE_SIMD) {
    // 16 tokens (64 bytes) a step: equality lanes ANDed, one branch per step.
    while (i + 16 <= n) {
      const o = (<usize>i) << 2;
      const e0 = i32x4.eq(v128.load(a + o), v128.load(b + o));
      const e1 = i32x4.eq(v128.load(a + o, 16), v128.load(b + o, 16));
      const e2 = i32x4.eq(v128.load(a + o, 32), v128.load(b + o, 32));
      const e3 = i32x4.eq(v128.load(a + o, 48), v128.load(b + o, 48));
      if (!i32x4.all_true(v128.and(v128.and(e0, e1), v128.and(e2, e3)))) break;
      i += 16;
    }
    while (i + 4 <= n) {
      const o = (<usize>i) << 2;
      if (!i32x4.all_true(i32x4.eq(v128.load(a + o), v128.load(b + o)))) break;
      i += 4;
    }
  } else {
    while (i + 2 <= n) {
      const o = (<usize>i) << 2;
      if (load<u64>(a + o) != load<u64>(b + o)) break;
      i += 2;
    }
  }
  while (i < n && load<i32>(a + ((<usize>i) << 2)) == load<i32>(b + ((<usize>i) << 2))) i++;
  return i;
}

/** Index of the first negative i32 at `p` (token IDs must be in [0, 2^31-1]), or -1. */
export function firstNegative(p: usize, n: i32): i32 {
  let i: i32 = 0;
  if (ASC_FEATURE_SIMD) {
    while (i + 16 <= n) {
      const o = (<usize>i) << 2;
      const any = v128.or(
        v128.or(v128.load(p + o), v128.load(p + o, 16)),
        v128.or(v128.load(p + o, 32), v128.load(p + o, 48)),
      );
      if (i32x4.bitmask(any) != 0) break;
      i += 16;
    }
  }
  for (; i < n; i++) if (load<i32>(p + ((<usize>i) << 2)) < 0) return i;
  return -1;
}

/** Index of the first f32 at `p` that is NaN or infinite, or -1. */
export function firstNonFinite(p: usize, n: i32): i32 {
  let i: i32 = 0;
  if (ASC_FEATURE_SIMD) {
    // Exponent bits all ones <=> NaN or infinity.
    const exponent = i32x4.splat(0x7f800000);
    while (i + 8 <= n) {
      const o = (<usize>i) << 2;
      const bad = v128.or(
        i32x4.eq(v128.and(v128.load(p + o), exponent), exponent),
        i32x4.eq(v128.and(v128.load(p + o, 16), exponent), exponent),
      );
      if (v128.any_true(bad)) break;
      i += 8;
    }
  }
  for (; i < n; i++) if ((load<u32>(p + ((<usize>i) << 2)) & 0x7f800000) == 0x7f800000) return i;
  return -1;
}

/** Sets bits [from, to) of the little-endian bitset at `mask` (SPEC's loss-mask layout). */
export function setBits(mask: usize, from: i32, to: i32): void {
  if (from >= to) return;
  const firstByte = from >> 3;
  const lastByte = (to - 1) >> 3;
  const headBits = <u32>(0xff << (from & 7)) & 0xff;
  const tailBits = <u32>0xff >> (7 - ((to - 1) & 7));
  if (firstByte == lastByte) {
    const p = mask + <usize>firstByte;
    store<u8>(p, load<u8>(p) | <u8>(headBits & tailBits));
    return;
  }
  store<u8>(mask + <usize>firstByte, load<u8>(mask + <usize>firstByte) | <u8>headBits);
  memory.fill(mask + <usize>firstByte + 1, 0xff, <usize>(lastByte - firstByte - 1));
  store<u8>(mask + <usize>lastByte, load<u8>(mask + <usize>lastByte) | <u8>tailBits);
}

/** Writes first, first + 1, ..., first + n - 1 as i32 at `p` (a segment's position ids). */
export function fillAscending(p: usize, first: i32, n: i32): void {
  let i: i32 = 0;
  if (ASC_FEATURE_SIMD) {
    let lanes = i32x4.add(i32x4.splat(first), v128(0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0));
    const step = i32x4.splat(4);
    while (i + 4 <= n) {
      v128.store(p + ((<usize>i) << 2), lanes);
      lanes = i32x4.add(lanes, step);
      i += 4;
    }
  }
  for (; i < n; i++) store<i32>(p + ((<usize>i) << 2), first + i);
}
