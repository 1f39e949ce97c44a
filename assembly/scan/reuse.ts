// Token arrays that repeat text already parsed on the same line are copied, not parsed again.
// An agent's prompts grow by appending: each call's prompt_token_ids starts with the text of an
// earlier call's prompt (and, often, its generation_token_ids right after). Comparing bytes runs
// at memory speed, parsing numbers does not, so a deep rollout's quadratic prompt text costs
// about one comparison instead of one parse. Only byte-identical text is reused, and only whole
// numbers ending at a comma: the values copied are exactly those a parse would give, and the
// rest of the array is parsed as before (so what is accepted or rejected does not change).
//
// The arrays parsed so far are found by their first 16 bytes: a table of BUCKETS buckets, each
// holding the headers (see scan.ts) of the SLOTS newest arrays that start alike.
import { ensureMemory } from "./memory";

/** An array's header in the arena: span start, span end (input offsets), count, kind; then its data. */
const HEADER: usize = 16;
const KIND_I32: u32 = 0;
const COMMA: u32 = 0x2c;
/** Matches shorter than this are not worth their bookkeeping. */
const MIN_MATCH: usize = 32;

const BUCKET_BITS: u64 = 8;
const BUCKETS: usize = 1 << <usize>BUCKET_BITS;
const SLOTS: usize = 4;
const table = memory.data(<i32>(BUCKETS * SLOTS * 4));

/** Forgets every array (a new line). */
export function resetReuse(): void {
  memory.fill(table, 0, BUCKETS * SLOTS * 4);
}

// @ts-ignore: decorator
@inline function bucketOf(text: usize): usize {
  const key = load<u64>(text) * 0x9e3779b97f4a7c15 + load<u64>(text, 8) * 0xc2b2ae3d27d4eb4f;
  return table + (<usize>(key >> (64 - BUCKET_BITS)) * SLOTS << 2);
}

/** Remembers a parsed int array (its header; its text starts after the `[` at `open`). */
export function rememberArray(header: usize, open: usize): void {
  const bucket = bucketOf(open + 1);
  // Newest first: the oldest falls out.
  memory.copy(bucket + 4, bucket, (SLOTS - 1) << 2);
  store<u32>(bucket, <u32>header);
}

/** Bytes from a and b that are equal, at most `most`. */
function commonPrefix(a: usize, b: usize, most: usize): usize {
  let n: usize = 0;
  if (ASC_FEATURE_SIMD) {
    while (n + 16 <= most) {
      const same = i8x16.bitmask(i8x16.eq(v128.load(a + n), v128.load(b + n)));
      if (same != 0xffff) return n + <usize>ctz(~same);
      n += 16;
    }
  } else {
    while (n + 8 <= most) {
      const diff = load<u64>(a + n) ^ load<u64>(b + n);
      if (diff != 0) return n + <usize>(ctz(diff) >> 3);
      n += 8;
    }
  }
  while (n < most && load<u8>(a + n) == load<u8>(b + n)) n++;
  return n;
}

/** Commas in [from, to). */
function commas(from: usize, to: usize): usize {
  let count: usize = 0;
  let p = from;
  if (ASC_FEATURE_SIMD) {
    const comma = i8x16.splat(<i8>COMMA);
    while (p + 16 <= to) {
      count += <usize>popcnt(i8x16.bitmask(i8x16.eq(v128.load(p), comma)));
      p += 16;
    }
  }
  while (p < to) count += <usize>(load<u8>(p++) == COMMA);
  return count;
}

/** The next int array's header after `header` in the arena, or 0 when none is before `before`. */
function nextIntArray(header: usize, before: usize): usize {
  let next = header;
  do {
    next = (next + HEADER + (<usize>load<u32>(next, 8) << 2) + 3) & ~3;
    if (next >= before) return 0;
  } while (load<u32>(next, 12) != KIND_I32);
  return next;
}

/** What reuse() leaves: the address after the last comma it took, and the values it wrote. */
export let reusedEnd: usize = 0;
export let reusedValues: usize = 0;

/**
 * For an int array whose text starts at `text` (after its `[`, at a digit), being parsed into
 * `out` (its header at `current`): copies the values of the longest run of earlier text it
 * repeats, up to a comma, following on from one array into the next while they match whole.
 * Sets reusedEnd (after that comma; `text` when nothing matched) and reusedValues. `inputStart`
 * is what the headers' offsets count from, `inputEnd` where the line ends.
 */
export function reuse(text: usize, out: usize, current: usize, inputStart: usize, inputEnd: usize): void {
  reusedEnd = text;
  reusedValues = 0;
  // The best of the bucket's arrays: the longest common prefix.
  const bucket = bucketOf(text);
  let best: usize = 0;
  let bestLength: usize = 0;
  for (let i: usize = 0; i < SLOTS; i++) {
    const header = <usize>load<u32>(bucket + (i << 2));
    if (header == 0) break;
    const from = inputStart + <usize>load<u32>(header) + 1;
    const to = inputStart + <usize>load<u32>(header, 4) - 1; // its `]`
    const length = commonPrefix(text, from, min(to - from, inputEnd - text));
    if (length > bestLength) {
      best = header;
      bestLength = length;
    }
  }
  if (bestLength < MIN_MATCH) return;
  let p = text;
  let header = best;
  let length = bestLength;
  while (true) {
    const from = inputStart + <usize>load<u32>(header) + 1;
    const to = inputStart + <usize>load<u32>(header, 4) - 1;
    const count = <usize>load<u32>(header, 8);
    if (from + length == to && load<u8>(p + length) == COMMA) {
      // All of it, and the new array goes on: on into the next array, if it matches too.
      if (!ensureMemory(<u64>out + (<u64>count << 2))) return; // the parse finds memory short itself
      memory.copy(out, header + HEADER, count << 2);
      out += count << 2;
      reusedValues += count;
      p += length + 1;
      reusedEnd = p;
      header = nextIntArray(header, current);
      if (header == 0) return;
      const nextFrom = inputStart + <usize>load<u32>(header) + 1;
      const nextTo = inputStart + <usize>load<u32>(header, 4) - 1;
      length = commonPrefix(p, nextFrom, min(nextTo - nextFrom, inputEnd - p));
      if (length < MIN_MATCH) return;
      continue;
    }
    // Part of it: up to the last comma both share; the number after it is parsed.
    let comma = p + length;
    while (comma > p && load<u8>(comma - 1) != COMMA) comma--;
    if (comma == p) return;
    const values = commas(p, comma);
    if (!ensureMemory(<u64>out + (<u64>values << 2))) return;
    memory.copy(out, header + HEADER, values << 2);
    reusedValues += values;
    reusedEnd = comma;
    return;
  }
}
