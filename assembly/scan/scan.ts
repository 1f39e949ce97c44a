// The line scanner: finds the arrays under `prompt_token_ids` / `generation_token_ids` (as i32)
// and `generation_log_probs` (as f32) anywhere in one JSON line, parses them straight into linear
// memory, and builds the remaining metadata text with a placeholder string for each of them.
// An array that is not a plain list of the right numbers is left in the metadata untouched, so
// JSON.parse and the planner's normal checks see it exactly as the slow path would.
import { BASE, ensureMemory } from "./memory";
import { writeU32 } from "./digits";
import { numberEnd, parseNumberF32 } from "./number";
import { commaBits, digitBits, eightDigits, nonDigitBits } from "./swar";
import { forgetTextBefore, rememberArray, resetReuse, reuse, reusedEnd, reusedStart, reusedValues } from "./reuse";
import {
  countOf,
  dataOf,
  firstHeader,
  KIND_F32,
  KIND_I32,
  kindOf,
  nextHeader,
  pushLogprobs,
  pushTokens,
  resetArena,
  roomAbove,
  sideLow,
  spanEnd,
  spanStart,
} from "./arena";

export const STATUS_OK: i32 = 0;
export const STATUS_TOO_LARGE: i32 = 1;

const NOT_A_KEY: i32 = -1;

const QUOTE: u32 = 0x22;
const BACKSLASH: u32 = 0x5c;

/** Placeholder prefix set by the host (`"\u0000` + a random nonce); the array index follows. */
const PREFIX_CAP = 64;
const prefix = memory.data(PREFIX_CAP);
let prefixLength: i32 = 0;

/** Where line offset 0 is (headers keep offsets); in window mode that text may be gone. */
let inputStart: usize = 0;
/** The end of the line's text in memory (window mode: of what has been read so far). */
let inputEnd: usize = 0;
/** The tokens' top (arena.ts): where the next value is parsed. */
let write: usize = 0;
/** Where the int array being parsed starts (before `write` when it extends the newest tokens). */
let arrayData: usize = 0;
let arrays: i32 = 0;
let outOfMemory = false;
let metaStart: usize = 0;
let metaEnd: usize = 0;
let tableStart: usize = 0;

export function setPrefixByte(index: i32, byte: u8): void {
  store<u8>(prefix + index, byte);
  if (index >= prefixLength) prefixLength = index + 1;
}

/** Where the host copies a line of `length` bytes; 0 when memory cannot hold it. */
export function inputAddress(length: usize): usize {
  return ensureMemory(<u64>BASE + <u64>length + 64) ? BASE : 0;
}

export function metaAddress(): usize {
  return metaStart;
}
export function metaLength(): i32 {
  return <i32>(metaEnd - metaStart);
}
/** Table of `arrayCount()` entries of three u32: data address, element count, kind (0 i32, 1 f32). */
export function tableAddress(): usize {
  return tableStart;
}
export function arrayCount(): i32 {
  return arrays;
}

// @ts-ignore: decorator
@inline function isSpace(c: u32): bool {
  return c == 0x20 || c == 0x0a || c == 0x0d || c == 0x09;
}

function skipSpace(p: usize): usize {
  while (p < inputEnd && isSpace(load<u8>(p))) p++;
  return p;
}

/** From just after an opening quote: the address of the closing quote, or inputEnd. */
function stringEnd(p: usize): usize {
  const end = inputEnd;
  if (ASC_FEATURE_SIMD) {
    const quote = i8x16.splat(<i8>QUOTE);
    const backslash = i8x16.splat(<i8>BACKSLASH);
    while (p + 16 <= end) {
      const v = v128.load(p);
      const hits = i8x16.bitmask(v128.or(i8x16.eq(v, quote), i8x16.eq(v, backslash)));
      if (hits == 0) {
        p += 16;
        continue;
      }
      p += ctz(hits);
      if (load<u8>(p) == QUOTE) return p;
      p += 2; // an escape: the next byte is never the end
    }
  }
  while (p < end) {
    const c = load<u8>(p);
    if (c == QUOTE) return p;
    p += c == BACKSLASH ? 2 : 1;
  }
  return end;
}

/** Outside strings only quotes matter (a key is a string followed by a colon). */
function nextQuote(p: usize): usize {
  const end = inputEnd;
  if (ASC_FEATURE_SIMD) {
    const quote = i8x16.splat(<i8>QUOTE);
    while (p + 16 <= end) {
      const hits = i8x16.bitmask(i8x16.eq(v128.load(p), quote));
      if (hits != 0) return p + ctz(hits);
      p += 16;
    }
  }
  while (p < end && load<u8>(p) != QUOTE) p++;
  return p;
}

// "prompt_token_ids", "generation_token_ids", "generation_log_probs" as little-endian words.
function keyKind(s: usize, length: usize): i32 {
  if (length == 16) {
    // prompt_t | oken_ids
    if (load<u64>(s) == 0x745f74706d6f7270 && load<u64>(s, 8) == 0x7364695f6e656b6f) return <i32>KIND_I32;
    return NOT_A_KEY;
  }
  if (length != 20) return NOT_A_KEY;
  // generati | on_token / on_log_p | _ids / robs
  if (load<u64>(s) != 0x69746172656e6567) return NOT_A_KEY;
  const middle = load<u64>(s, 8);
  const tail = load<u32>(s, 16);
  if (middle == 0x6e656b6f745f6e6f && tail == 0x7364695f) return <i32>KIND_I32;
  if (middle == 0x705f676f6c5f6e6f && tail == 0x73626f72) return <i32>KIND_F32;
  return NOT_A_KEY;
}

/** How far tokens may grow: the side stack's bottom, refreshed whenever it moves. */
let limit: usize = 0;

/** Room for `bytes` more bytes at `write`. */
// @ts-ignore: decorator
@inline function roomFor(bytes: usize): bool {
  if (write + bytes <= limit) return true;
  if (roomAbove(write, bytes)) {
    limit = sideLow;
    return true;
  }
  outOfMemory = true;
  return false;
}

/**
 * SIMD: 64 bytes at a time, classify digits and commas, then parse every comma-terminated
 * number of the block from the masks (no number waits for the previous one's end). Returns the
 * start of the first number it left (p itself when the block is not plain `d,d,...`), or 0 for
 * a leading zero. Only called with p at a digit.
 */
function blockTokens(p: usize): usize {
  const end = inputEnd;
  let w = write;
  while (p + 64 <= end) {
    const b0 = v128.load(p);
    const b1 = v128.load(p, 16);
    const b2 = v128.load(p, 32);
    const b3 = v128.load(p, 48);
    const digits = digitBits(b0) | (digitBits(b1) << 16) | (digitBits(b2) << 32) | (digitBits(b3) << 48);
    const separators = commaBits(b0) | (commaBits(b1) << 16) | (commaBits(b2) << 32) | (commaBits(b3) << 48);
    if ((digits & 1) == 0) break;
    const other = ~(digits | separators);
    let commas = other == 0 ? separators : separators & ((<u64>1 << ctz(other)) - 1);
    if (commas == 0 || (commas & (commas >> 1)) != 0) break; // no whole number, or `,,`
    if (w + 256 > limit) {
      write = w;
      if (!roomFor(256)) return 0;
      w = write;
    }
    let start: i32 = 0;
    let stop = false;
    while (commas != 0) {
      const comma = <i32>ctz(commas);
      const n = comma - start;
      if (n > 8) {
        stop = true; // a 9- or 10-digit number: the one-number path takes it
        break;
      }
      const x = load<u64>(p + <usize>start) ^ 0x3030303030303030;
      if ((x & 0xff) == 0 && n > 1) {
        write = w;
        return 0; // leading zero: not JSON
      }
      store<i32>(w, <i32>eightDigits(x, n));
      w += 4;
      start = comma + 1;
      commas &= commas - 1;
    }
    p += <usize>start;
    if (stop || <u32>load<u8>(p) - 0x30 > 9) break;
  }
  write = w;
  return p;
}

/**
 * Parses `[int, ...]` of integers in [0, 2^31-1] written plainly; returns the address after `]`,
 * or 0. Eight bytes at a time (SWAR): the input ends with a zero sentinel and has 64 bytes of
 * slack, so reading past a number is safe and stops at the sentinel.
 */
function parseTokens(p: usize): usize {
  const end = inputEnd;
  arrayData = write;
  p = skipSpace(p + 1);
  if (load<u8>(p) == 0x5d) return p + 1;
  // Text this line already parsed is taken from its values (reuse.ts); the parse goes on after it.
  if (<u32>load<u8>(p) - 0x30 <= 9) {
    reuse(p, write, inputStart, inputEnd);
    limit = sideLow;
    if (reusedValues > 0) {
      arrayData = reusedStart;
      write = reusedStart + (reusedValues << 2);
      p = skipSpace(reusedEnd);
    }
  }
  // Locals, not globals, in the hot loop: `w` is written back on every exit.
  let w = write;
  let room = limit;
  while (true) {
    if (ASC_FEATURE_SIMD) {
      write = w;
      p = blockTokens(p);
      if (p == 0) return 0;
      p = skipSpace(p); // the block may stop after a comma, before whitespace
      w = write;
      room = limit;
    }
    // One number. Bytes 0..9 where the input has digits; the first byte > 9 ends the number.
    const x = load<u64>(p) ^ 0x3030303030303030;
    const n = <i32>(ctz(nonDigitBits(x)) >> 3); // digits in this word (8 = all)
    if (n == 0) break;
    let value: u64;
    if (n < 8) {
      if ((x & 0xff) == 0 && n > 1) break; // leading zero: not JSON
      value = eightDigits(x, n);
      p += n;
    } else {
      if ((x & 0xff) == 0) break;
      value = eightDigits(x, 8);
      p += 8;
      // Up to two more digits; a third means the value is out of range.
      let more = 0;
      while (more < 3) {
        const d = <u32>load<u8>(p) - 0x30;
        if (d > 9) break;
        value = value * 10 + d;
        p++;
        more++;
      }
      if (more == 3 || value > 0x7fffffff) break;
    }
    if (w + 4 > room) {
      write = w;
      if (!roomFor(4)) return 0;
      room = limit;
    }
    store<i32>(w, <i32>value);
    w += 4;
    // Separator: `,` or `]`, maybe after whitespace; `.`/`e` or anything else is not plain.
    let c = <u32>load<u8>(p);
    if (c == 0x2c) {
      c = load<u8>(++p);
      if (c - 0x30 > 9) p = skipSpace(p);
      continue;
    }
    if (c == 0x5d) {
      write = w;
      return p + 1;
    }
    if (!isSpace(c)) break;
    p = skipSpace(p);
    if (p >= end) break;
    c = load<u8>(p++);
    if (c == 0x5d) {
      write = w;
      return p;
    }
    if (c != 0x2c) break;
    p = skipSpace(p);
  }
  write = w;
  return 0;
}

/** Parses `[number, ...]` into f32; returns the address after `]`, or 0 (not plain, or not finite in f32). */
function parseLogprobs(p: usize): usize {
  const end = inputEnd;
  p = skipSpace(p + 1);
  if (p < end && load<u8>(p) == 0x5d) return p + 1;
  while (true) {
    const value = parseNumberF32(p);
    if (!isFinite(value)) return 0; // NaN: not a number; ±Infinity: left for the planner's message
    p = numberEnd;
    if (write + 4 > limit && !roomFor(4)) return 0;
    store<f32>(write, value);
    write += 4;
    let c = <u32>load<u8>(p); // the sentinel at inputEnd is neither `,` nor `]`
    if (c == 0x2c) {
      c = load<u8>(++p);
      if (c != 0x2d && c - 0x30 > 9) p = skipSpace(p);
      continue;
    }
    if (isSpace(c)) {
      p = skipSpace(p);
      if (p >= end) return 0;
      c = load<u8>(p);
    }
    p++;
    if (c == 0x2c) {
      p = skipSpace(p);
      continue;
    }
    if (c == 0x5d) return p;
    return 0;
  }
  return 0;
}

/** Tries the array at p (a `[`); on success records it and returns the address after `]`, else 0. */
function tryArray(p: usize, kind: i32): usize {
  const top = write;
  const after = kind == <i32>KIND_I32 ? parseTokens(p) : parseLogprobs(p);
  if (after == 0) {
    write = top;
    return 0;
  }
  const start = <u32>(p - inputStart);
  const end = <u32>(after - inputStart);
  let header: usize;
  if (kind == <i32>KIND_I32) {
    header = pushTokens(write, start, end, arrayData, <u32>((write - arrayData) >> 2));
    if (header != 0) rememberArray(header, p);
  } else {
    // Logprobs were parsed at the tokens' top; they live on the side stack.
    header = pushLogprobs(top, start, end, <u32>((write - top) >> 2));
    write = top;
  }
  limit = sideLow;
  if (header == 0) {
    outOfMemory = true;
    return 0;
  }
  if (streaming) {
    emitText(p);
    emitPlaceholder(arrays);
    copied = after;
    if (kind == <i32>KIND_I32 && end - start >= LONG_ARRAY) longArray = start;
  }
  arrays++;
  return after;
}

/** Metadata text (segments between scanned arrays, placeholders in between), then the table. */
function buildMeta(): bool {
  // Size: the input minus spans plus placeholders: at most that + arrays * (prefix + 12).
  let spans: u64 = 0;
  for (let h = firstHeader(); h != 0; h = nextHeader(h)) spans += <u64>(spanEnd(h) - spanStart(h));
  const bound = <u64>(inputEnd - inputStart) - spans + <u64>arrays * (<u64>prefixLength + 12) + 16;
  const needed = bound + <u64>arrays * 12 + 32;
  // Between the tokens and the side stack, which moves up to make room if need be.
  metaStart = (write + 15) & ~15;
  if (<u64>metaStart + needed > 0xffffffff || !roomAbove(metaStart, <usize>needed)) return false;
  let out = metaStart;
  let copied = inputStart;
  tableStart = (metaStart + <usize>bound + 3) & ~3;
  let header = firstHeader();
  for (let i = 0; i < arrays; i++) {
    const start = inputStart + spanStart(header);
    memory.copy(out, copied, start - copied);
    out += start - copied;
    memory.copy(out, prefix, prefixLength);
    out += prefixLength;
    out = writeU32(out, <u32>i);
    store<u8>(out++, <u8>QUOTE);
    copied = inputStart + spanEnd(header);
    header = nextHeader(header);
  }
  memory.copy(out, copied, inputEnd - copied);
  out += inputEnd - copied;
  metaEnd = out;
  writeTable();
  return true;
}

/** The table at tableStart: each array's data address, count and kind, in line order. */
function writeTable(): void {
  let header = firstHeader();
  for (let i = 0; i < arrays; i++) {
    const entry = tableStart + <usize>i * 12;
    store<u32>(entry, <u32>dataOf(header));
    store<u32>(entry, countOf(header), 4);
    store<u32>(entry, kindOf(header), 8);
    header = nextHeader(header);
  }
}

/** Scans the line the host copied to inputAddress(). */
export function scan(length: usize): i32 {
  streaming = false;
  inputStart = BASE;
  inputEnd = BASE + length;
  store<u64>(inputEnd, 0); // sentinel: ends any digit run, never a separator
  const arenaStart = (inputEnd + 64 + 15) & ~15;
  if (!resetArena(arenaStart, length)) return STATUS_TOO_LARGE;
  startArrays(arenaStart);
  scanText(inputStart, true);
  if (outOfMemory) return STATUS_TOO_LARGE;
  return buildMeta() ? STATUS_OK : STATUS_TOO_LARGE;
}

function startArrays(arenaStart: usize): void {
  write = arenaStart;
  limit = sideLow;
  arrays = 0;
  outOfMemory = false;
  resetReuse();
}

/**
 * Scans the text from `p` (outside any string) to inputEnd. With `last` the text ends there;
 * otherwise more follows, and the scan stops at the opening quote of the first string (a key,
 * with its array) it cannot see the end of yet: returns where it stopped, to go on from once
 * more is read. The text before that quote holds no string, so it is done with.
 */
function scanText(p: usize, last: bool): usize {
  const end = inputEnd;
  // Every `]` before this one is in reach: an array whose `[` is before it can be parsed whole.
  const reach = last ? end : lastClose(p, end);
  while (true) {
    p = nextQuote(p);
    if (p >= end) return end;
    const quote = p;
    const keyStart = p + 1;
    const keyEnd = stringEnd(keyStart);
    if (keyEnd >= end) return last ? end : quote;
    p = keyEnd + 1;
    const kind = keyKind(keyStart, keyEnd - keyStart);
    if (kind == NOT_A_KEY) continue;
    let q = skipSpace(p);
    if (q >= end) return last ? end : quote;
    if (load<u8>(q) != 0x3a) continue;
    q = skipSpace(q + 1);
    if (q >= end) return last ? end : quote;
    if (load<u8>(q) != 0x5b) continue;
    if (q >= reach) return quote;
    const after = tryArray(q, kind);
    if (outOfMemory) return quote;
    // Not plain: go on from the `[` (its strings are still tracked by nextQuote/stringEnd).
    p = after != 0 ? after : q;
  }
}

/** The address of the last `]` in [from, end), or `from` when there is none. */
function lastClose(from: usize, end: usize): usize {
  let p = end;
  while (p > from && load<u8>(p - 1) != 0x5d) p--;
  return p > from ? p - 1 : from;
}

// Window mode: a long line scanned as it is read, a piece at a time, in a region of memory that
// is reused, so its text never needs fresh memory (a page's first touch costs more than scanning
// it). Once a piece does not fit after the text, the text still needed moves down to the
// region's start: what is not scanned yet, and — room allowing — `history` bytes of scanned text
// and the newest long token array (an agent's next prompt repeats its last one), so a repeated
// prompt is still compared with the earlier text (reuse.ts); when that text is gone the prompt is
// parsed. A string or array longer than the region does not fit: the host reads that line whole.
// The metadata leaves through a small scratch area the host empties (flushMeta); a run of text
// that overflows it and is longer than half of it goes to the host straight from the region.
// Layout: [BASE: region][slack][scratch][arena].

// @ts-ignore: decorator
@external("env", "flushMeta")
declare function flushMeta(address: usize, length: usize): void;

const SCRATCH: usize = 64 << 10;
/** A token array at least this long is kept when text moves (a prompt the next one may repeat). */
const LONG_ARRAY: u32 = 16 << 10;

let streaming = false;
let regionEnd: usize = 0;
let history: usize = 0;
/** Line offset of the newest long token array's text (see LONG_ARRAY); 0 when none. */
let longArray: u32 = 0;
/** The text up to here is scanned, and went into the metadata (window mode). */
let scanned: usize = 0;
/** Text before this went into the metadata (window mode). */
let copied: usize = 0;
let metaOut: usize = 0;

/**
 * Starts a line in window mode with a region of `regionBytes` that keeps `historyBytes` of
 * scanned text; returns the region's address, 0 when memory cannot hold it.
 */
export function streamBegin(regionBytes: usize, historyBytes: usize): usize {
  if (<u64>BASE + <u64>regionBytes + <u64>SCRATCH + 4096 > 0xffffffff) return 0; // past 4 GiB
  regionEnd = BASE + regionBytes;
  metaStart = (regionEnd + 64 + 15) & ~15;
  const arenaStart = (<u64>metaStart + SCRATCH + 15) & ~(<u64>15);
  if (arenaStart > 0xffffffff || !resetArena(<usize>arenaStart, regionBytes)) return 0;
  startArrays(<usize>arenaStart);
  streaming = true;
  history = historyBytes;
  longArray = 0;
  inputStart = BASE;
  inputEnd = BASE;
  scanned = BASE;
  copied = BASE;
  metaOut = metaStart;
  return BASE;
}

/**
 * Room after the text in the region for up to `most` more bytes of the line, and at least
 * `least`, moving the text still needed down to the region's start when `most` does not fit.
 * Returns where the bytes go (an offset in the region; the room ends at the region's end), or -1
 * when not even `least` fits beside the text not scanned yet.
 */
export function streamRoom(most: usize, least: usize): i32 {
  const size = <u64>(regionEnd - BASE);
  if (<u64>inputEnd + <u64>most > <u64>regionEnd && scanned > BASE) {
    const withHistory = scanned - BASE > history ? scanned - history : BASE;
    let keep = withHistory;
    const long = inputStart + <usize>longArray;
    if (longArray > BASE - inputStart && long < keep) keep = long; // not gone, and older
    // Keeping all that must leave room for at least `least` (the piece may be cut down to it);
    // else keep the history only, else only what is not scanned yet.
    if (<u64>(inputEnd - keep) + <u64>least > size) keep = withHistory;
    if (<u64>(inputEnd - keep) + <u64>least > size) keep = scanned;
    const moved = keep - BASE;
    if (moved > 0) {
      memory.copy(BASE, keep, inputEnd - keep);
      inputStart -= moved; // offsets stay: what was at `keep` is at BASE now
      inputEnd -= moved;
      scanned -= moved;
      copied -= moved;
      forgetTextBefore(<u32>(BASE - inputStart));
    }
  }
  if (<u64>inputEnd + <u64>least > <u64>regionEnd) return -1;
  return <i32>(inputEnd - BASE);
}

/**
 * Scans `got` more bytes the host put where streamRoom() said; `last`: the line ends with them
 * (then the table is built, as scan() builds it). The metadata goes to the host's flushMeta.
 */
export function streamScan(got: usize, last: bool): i32 {
  inputEnd += got;
  store<u64>(inputEnd, 0); // the sentinel (in the next read's place, or the slack)
  limit = sideLow;
  scanned = scanText(scanned, last);
  if (outOfMemory) return STATUS_TOO_LARGE;
  emitText(scanned);
  flushScratch();
  if (!last) return STATUS_OK;
  streaming = false;
  tableStart = (write + 3) & ~3;
  if (!roomAbove(tableStart, <usize>arrays * 12)) return STATUS_TOO_LARGE;
  writeTable();
  return STATUS_OK;
}

function flushScratch(): void {
  if (metaOut > metaStart) flushMeta(metaStart, metaOut - metaStart);
  metaOut = metaStart;
}

/** Window mode: the text from `copied` to `to` into the metadata. */
function emitText(to: usize): void {
  const bytes = to - copied;
  if (metaOut + bytes > metaStart + SCRATCH) {
    flushScratch();
    if (bytes > SCRATCH >> 1) {
      flushMeta(copied, bytes); // long text goes straight from the region
      copied = to;
      return;
    }
  }
  memory.copy(metaOut, copied, bytes);
  metaOut += bytes;
  copied = to;
}

/** Window mode: the placeholder of array `index` into the metadata. */
function emitPlaceholder(index: i32): void {
  if (metaOut + <usize>prefixLength + 11 > metaStart + SCRATCH) flushScratch();
  memory.copy(metaOut, prefix, prefixLength);
  metaOut = writeU32(metaOut + prefixLength, <u32>index);
  store<u8>(metaOut++, <u8>QUOTE);
}
