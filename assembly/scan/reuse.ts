// Token arrays that repeat text already parsed on the same line are copied, not parsed again.
// An agent's prompts grow by appending: each call's prompt_token_ids starts with the text of an
// earlier call's prompt (and, often, its generation_token_ids right after). Comparing bytes runs
// at memory speed, parsing numbers does not, so a deep rollout's quadratic prompt text costs
// about one comparison instead of one parse. Only byte-identical text is reused, and only whole
// numbers ending at a comma: the values copied are exactly those a parse would give, and the
// rest of the array is parsed as before (so what is accepted or rejected does not change).
//
// When the values a prompt repeats are the newest tokens parsed (an earlier prompt and its
// generation, the usual case), they are not copied at all: the new array starts where they do
// and goes on after them (arena.ts keeps token data contiguous for this).
//
// The arrays parsed so far are found by their first 16 bytes: a table of BUCKETS buckets, each
// holding the header keys (arena.ts) of the SLOTS newest arrays that start alike.
import { countOf, dataOf, headerKey, headerOf, KIND_I32, kindOf, nextHeader, roomAbove, spanEnd, spanStart } from "./arena";

const COMMA: u32 = 0x2c;
/** Matches shorter than this are not worth their bookkeeping. */
const MIN_MATCH: usize = 32;

const BUCKET_BITS: u64 = 8;
const BUCKETS: usize = 1 << <usize>BUCKET_BITS;
const SLOTS: usize = 4;
const table = memory.data(<i32>(BUCKETS * SLOTS * 4));

/**
 * Arrays whose text starts before this line offset are gone (a line scanned as it is read keeps
 * only its newest text: see scan.ts's window mode); 0 when the whole line is in memory.
 */
let retainedFrom: u32 = 0;

/** Forgets every array (a new line). */
export function resetReuse(): void {
  memory.fill(table, 0, BUCKETS * SLOTS * 4);
  retainedFrom = 0;
}

/** The text of arrays that start before line offset `offset` is no longer in memory. */
export function forgetTextBefore(offset: u32): void {
  retainedFrom = offset;
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
  store<u32>(bucket, headerKey(header));
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

/** The next int array's header after `header` in line order, or 0 when none. */
function nextIntArray(header: usize): usize {
  let next = header;
  do {
    next = nextHeader(next);
  } while (next != 0 && kindOf(next) != KIND_I32);
  return next;
}

/** What reuse() leaves: the address after the last comma it took, and the values it wrote. */
export let reusedEnd: usize = 0;
export let reusedValues: usize = 0;
/** Where the array's values start: where it was to be written, or earlier when it extends the newest tokens. */
export let reusedStart: usize = 0;

// The values taken so far that still lie where they were parsed, contiguous: [runStart, runEnd).
// They are copied only if something that does not follow them is taken, or if they do not end at
// the tokens' top; otherwise the array is a view that starts at runStart.
let runStart: usize = 0;
let runEnd: usize = 0;
let deferring = false;
/** Where the next copied value goes. */
let written: usize = 0;

/** Copies the deferred run to `written`; false when memory is short. */
function flush(): bool {
  deferring = false;
  const bytes = runEnd - runStart;
  if (!roomAbove(written, bytes)) return false;
  memory.copy(written, runStart, bytes);
  written += bytes;
  return true;
}

/** Takes the `count` values at `from` as the array's next ones; false when memory is short. */
function take(from: usize, count: usize): bool {
  const bytes = count << 2;
  if (deferring && from == runEnd) {
    runEnd += bytes;
    return true;
  }
  if (deferring && !flush()) return false;
  if (!roomAbove(written, bytes)) return false;
  memory.copy(written, from, bytes);
  written += bytes;
  return true;
}

/**
 * For an int array whose text starts at `text` (after its `[`, at a digit), to be parsed into
 * `out` (the tokens' top): takes the values of the longest run of earlier text it repeats, up to
 * a comma, following on from one array into the next while they match whole. Sets reusedEnd
 * (after that comma; `text` when nothing matched), reusedValues and reusedStart (the values are
 * at [reusedStart, reusedStart + 4 * reusedValues), which ends at or after `out`). When memory is
 * short it takes nothing, and the parse finds memory short itself. `inputStart` is what the
 * headers' offsets count from, `inputEnd` where the line ends.
 */
export function reuse(text: usize, out: usize, inputStart: usize, inputEnd: usize): void {
  reusedEnd = text;
  reusedValues = 0;
  reusedStart = out;
  // The best of the bucket's arrays: the longest common prefix.
  const bucket = bucketOf(text);
  let best: usize = 0;
  let bestLength: usize = 0;
  for (let i: usize = 0; i < SLOTS; i++) {
    const key = load<u32>(bucket + (i << 2));
    if (key == 0) break;
    const header = headerOf(key);
    if (spanStart(header) < retainedFrom) continue; // its text is gone
    const from = inputStart + <usize>spanStart(header) + 1;
    const to = inputStart + <usize>spanEnd(header) - 1; // its `]`
    const length = commonPrefix(text, from, min(to - from, inputEnd - text));
    if (length > bestLength) {
      best = header;
      bestLength = length;
    }
  }
  if (bestLength < MIN_MATCH) return;
  runStart = dataOf(best);
  runEnd = runStart;
  deferring = true;
  written = out;
  let p = text;
  let header = best;
  let length = bestLength;
  let values: usize = 0;
  let end = text;
  while (true) {
    const from = inputStart + <usize>spanStart(header) + 1;
    const to = inputStart + <usize>spanEnd(header) - 1;
    const count = <usize>countOf(header);
    if (from + length == to && load<u8>(p + length) == COMMA) {
      // All of it, and the new array goes on: on into the next array, if it matches too. (take()
      // may move the stack the headers are on: the header is found again by its key.)
      const key = headerKey(header);
      if (!take(dataOf(header), count)) return;
      values += count;
      p += length + 1;
      end = p;
      header = nextIntArray(headerOf(key));
      if (header == 0) break;
      const nextFrom = inputStart + <usize>spanStart(header) + 1;
      const nextTo = inputStart + <usize>spanEnd(header) - 1;
      length = commonPrefix(p, nextFrom, min(nextTo - nextFrom, inputEnd - p));
      if (length < MIN_MATCH) break;
      continue;
    }
    // Part of it: up to the last comma both share; the number after it is parsed.
    let comma = p + length;
    while (comma > p && load<u8>(comma - 1) != COMMA) comma--;
    if (comma == p) break;
    const part = commas(p, comma);
    if (!take(dataOf(header), part)) return;
    values += part;
    end = comma;
    break;
  }
  if (values == 0) return;
  if (deferring) {
    // Values that end at the tokens' top are already where the array needs them.
    if (runEnd == out) reusedStart = runStart;
    else if (!flush()) return;
  }
  reusedValues = values;
  reusedEnd = end;
}
