// The streaming line reader: bytes from a file or stdin, cut into batches of whole lines.
//
// Bounded memory by design: bytes are read straight into chunk-sized buffers (recycled through a
// BufferPool); once a buffer holds a newline, everything up to its last newline leaves as a
// batch (the buffer itself, no copy) and only the unfinished tail (< one chunk) is copied into
// the next buffer. A line longer than a buffer fills a list of full buffers and leaves as one
// batch of those `parts`, never joined here: whoever plans it copies the parts straight into the
// scanner's memory, so a line of n bytes costs n of memory in the reader (plus a chunk), whatever
// the file size. A line longer than any reader takes is not kept at all: its bytes are dropped as
// they are read and only its length is passed on (`dropped`), so no line, however long (a stray
// binary file, /dev/zero), costs more than the reader's limit. Each batch owns its ArrayBuffers
// (byteOffset 0), so it can be transferred to a worker thread without a copy.
import { open } from "node:fs/promises";
import { FileError } from "../files/file-error.js";
import {
  DOCUMENT_SNIFF_LIMIT,
  documentStart,
  isBlankLine,
  isByteOrderMark,
  type DocumentSniff,
} from "../formats/text.js";
import type { Readable } from "node:stream";

/** Whole lines: every line ends with `\n`, except possibly the last line of the input. */
export interface Batch {
  /** Starts at byteOffset 0 of its own ArrayBuffer (transferable). Empty when `parts` is set. */
  bytes: Uint8Array;
  /**
   * One line longer than a chunk, in the buffers it was read into (each at byteOffset 0, the
   * `\n` at the end of the last one, if the line has one); `lineCount` is then 1.
   */
  parts?: Uint8Array[];
  /** One line longer than readBatches' `maxLineBytes`, dropped as it was read; `lineCount` is then 1. */
  dropped?: DroppedLine;
  /**
   * One line longer than a chunk, read straight into the room readBatches' `longLines` gave (see
   * LongLines), not into `bytes`; `lineCount` is then 1.
   */
  placed?: PlacedLine;
  /** 1-based number of the first line in `bytes`. */
  firstLine: number;
  /** Number of lines in `bytes` (blank ones included), so line numbers stay true. */
  lineCount: number;
}

/**
 * A line read into a LongLines room: its length there (without its `\n`), and whether a `\n`
 * ended it. `streamed`: it was scanned as it was read instead (its place's stream(): see
 * StreamedLine), and its value waits in the scanner.
 */
export interface PlacedLine {
  bytes: number;
  newline: boolean;
  streamed?: true;
  /** A streamed line of at most its place's `again` bytes: its bytes, read again. */
  text?: Uint8Array;
}

/** What is left of a line too long to keep. */
export interface DroppedLine {
  /** The line's length, without its `\n`. */
  bytes: number;
  /** Whether a `\n` ended it (not: the input ended). */
  newline: boolean;
  /** Whether every byte was a blank (such a line is skipped, as a short blank line is). */
  blank: boolean;
}

/**
 * Somewhere to read a line longer than a chunk straight into, instead of into batch buffers that
 * its reader would then copy (the scanner's input buffer: see LineProcessor.longLineRoom).
 * `room(length)` is a view of at least `length` bytes that starts with the bytes written to the
 * views before it, or null when there is no such room (the line is then dropped: see
 * Batch.dropped). The views hold one line at a time: readBatches asks for the place of the
 * `index`th batch it yields, and the place is given once every batch before it is planned.
 */
export type LongLines = (index: number) => Promise<LongLinePlace | null>;

export interface LongLinePlace {
  room(length: number): Uint8Array | null;
  /**
   * A line scanned as it is read instead (window mode), in pieces of up to `pieceBytes`, when the
   * source can be read again at a position (`readAgain`), for the lines this cannot take: null
   * when there is none.
   */
  stream?(pieceBytes: number): StreamedLine | null;
  /** A streamed line of at most this many bytes comes with its bytes too (PlacedLine.text). */
  again?: number;
}

/**
 * A long line scanned as it is read (the scanner's LineStream): space(n) is where the line's
 * next bytes go (up to n: its length), scanned(got, last) scans them, finish() ends the line.
 * Each says false (null) when it cannot take the line; the reader then reads the line whole
 * into the room.
 */
export interface StreamedLine {
  space(length: number): Uint8Array | null;
  scanned(got: number, last: boolean): boolean;
  finish(): boolean;
}

/** Where bytes come from: reads up to `length` bytes into `into` at `offset`; 0 = end of input. */
export interface ByteSource {
  read(into: Uint8Array, offset: number, length: number): Promise<number>;
  /**
   * Reads again (a file, not a stream): the `length` bytes at `position`, counted as read() counts
   * them, without moving where read() goes on; throws when there are fewer now.
   */
  readAgain?(into: Uint8Array, offset: number, length: number, position: number): Promise<void>;
  close(): Promise<void>;
}

export const DEFAULT_CHUNK = 2 << 20;

const NEWLINE = 10;
const EMPTY = new Uint8Array(0);

/** Bytes in the batch (its lines and their newlines). */
export function batchLength(batch: Batch): number {
  if (batch.dropped !== undefined) return batch.dropped.bytes + (batch.dropped.newline ? 1 : 0);
  if (batch.placed !== undefined) return batch.placed.bytes + (batch.placed.newline ? 1 : 0);
  return lineLength(batch.parts ?? batch.bytes);
}

/** Bytes of a line given whole or in the parts it was read into. */
export function lineLength(line: Uint8Array | readonly Uint8Array[]): number {
  if (line instanceof Uint8Array) return line.length;
  let total = 0;
  for (const part of line) total += part.length;
  return total;
}

/** The buffers a batch owns (to transfer it, or give them back once it is planned). */
export function batchBuffers(batch: Batch): ArrayBuffer[] {
  if (batch.dropped !== undefined || batch.placed !== undefined) return [];
  return (batch.parts ?? [batch.bytes]).map((part) => part.buffer as ArrayBuffer);
}

/** A long-line batch's line without its newline: the parts, the last one shortened (or dropped). */
export function lineParts(batch: Batch): Uint8Array[] {
  const parts = batch.parts!;
  const last = parts[parts.length - 1];
  if (last.length === 0 || last[last.length - 1] !== NEWLINE) return parts;
  return last.length === 1 ? parts.slice(0, -1) : [...parts.slice(0, -1), last.subarray(0, last.length - 1)];
}

/** The parts as one array (a copy: for readers that need the whole line, e.g. JSON.parse). */
export function joinParts(parts: readonly Uint8Array[]): Uint8Array {
  return parts.length === 1 ? parts[0] : Buffer.concat(parts);
}

/** Node's Buffer view of the same bytes: its indexOf is memchr, much faster than TypedArray's. */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Counts `\n` in bytes[0, end). */
function countNewlines(bytes: Uint8Array, end: number): number {
  const buffer = asBuffer(bytes.subarray(0, end));
  let count = 0;
  let at = buffer.indexOf(NEWLINE);
  while (at !== -1) {
    count++;
    at = buffer.indexOf(NEWLINE, at + 1);
  }
  return count;
}

function allocate(size: number): Uint8Array {
  // Never Node's shared pool: a batch must own its ArrayBuffer to be transferable. Not zeroed:
  // every byte handed on was read into it first.
  const buffer = Buffer.allocUnsafeSlow(size);
  return new Uint8Array(buffer.buffer, 0, size);
}

/**
 * Writes a byte into each 4 KiB page of `room` in [from, to) (bytes no read has filled yet), and
 * returns `to`. For a long line read whole (from stdin or a pipe, or one window mode gave up on),
 * a page's first touch is what reading it into fresh memory costs (about 12 µs a page on this
 * project's VMs, against 7 ms for 90 MB of warm copies): touched here while the read into other
 * fresh pages runs on libuv's thread, they fault in on two cores at once. A page the read filled
 * fresh still costs this thread about 5 µs at its first access (the memchr after the read:
 * bench/floor.ts measures it), less than touching it here; touching fewer of the pages here was
 * slower, more no faster (measured when bench/floor.ts's read stage read long lines whole). Warm
 * pages (a scanner that held a long line before) cost next to nothing here.
 */
function touchPages(room: Uint8Array, from: number, to: number): number {
  for (let at = from; at < to; at += 4096) room[at] = 0;
  return Math.max(from, to);
}

/**
 * Chunk-sized batch buffers, given back once planned (by a worker: transferred back), so a long
 * run reuses a few instead of faulting in fresh memory for every batch.
 */
export class BufferPool {
  private readonly free: ArrayBuffer[] = [];

  constructor(
    readonly size: number,
    private readonly keep = 16,
  ) {}

  /** A buffer of `size` bytes (its own ArrayBuffer, from offset 0). */
  take(): Uint8Array {
    const recycled = this.free.pop();
    return recycled === undefined ? allocate(this.size) : new Uint8Array(recycled, 0, this.size);
  }

  /** Takes back a batch's buffer once nothing refers to it. */
  give(buffer: ArrayBuffer): void {
    if (buffer.byteLength === this.size && this.free.length < this.keep) this.free.push(buffer);
  }
}

/** `source` without the UTF-8 byte order mark it may start with (see src/formats/text.ts). */
export function withoutLeadingMark(source: ByteSource): ByteSource {
  let checked: ByteSource | null = null;
  let mark = 0; // bytes of the mark: where this source's bytes start in `source`
  const readAgain = source.readAgain;
  return {
    async read(into, offset, length) {
      if (checked === null) {
        const first = await readUpTo(source, 3);
        mark = isByteOrderMark(first) ? first.length : 0;
        checked = prepend(mark > 0 ? EMPTY : first, source);
      }
      return checked.read(into, offset, length);
    },
    ...(readAgain === undefined
      ? {}
      : {
          readAgain: (into, offset, length, position) => readAgain.call(source, into, offset, length, position + mark),
        }),
    close: () => source.close(),
  };
}

/** `head` (bytes read from `source` to look at), then the rest of `source`. */
function prepend(head: Uint8Array, source: ByteSource): ByteSource {
  return {
    ...(source.readAgain === undefined ? {} : { readAgain: source.readAgain.bind(source) }), // positions are the source's
    async read(into, offset, length) {
      if (head.length === 0) return source.read(into, offset, length);
      const n = Math.min(length, head.length);
      into.set(head.subarray(0, n), offset);
      head = head.subarray(n);
      return n;
    },
    close: () => source.close(),
  };
}

/** The first `count` bytes of `source` (fewer at its end), or fewer once `enough` says so. */
async function readUpTo(
  source: ByteSource,
  count: number,
  enough?: (head: Uint8Array) => boolean,
): Promise<Uint8Array> {
  const head = new Uint8Array(count);
  let got = 0;
  while (got < count) {
    const n = await source.read(head, got, count - got);
    if (n === 0) break;
    got += n;
    if (enough?.(head.subarray(0, got))) break;
  }
  return head.subarray(0, got);
}

/** Whether `head` is the start of a byte order mark, and no more of it. */
function isMarkStart(head: Uint8Array): boolean {
  return head.length < 3 && head.every((byte, i) => byte === [0xef, 0xbb, 0xbf][i]);
}

/** sniffDocument reads in windows of this size, and gives up (JSONL) past DOCUMENT_SNIFF_LIMIT. */
const SNIFF_WINDOW = 64 << 10;

/**
 * Whether an input with no name to go by (stdin, /dev/stdin, a pipe) holds one pretty-printed
 * JSON value (or array) rather than JSONL: its first line that is not blank is `{` or `[` alone
 * (see documentStart). As JSONL that line would be malformed, so no valid JSONL reads differently.
 * Reads only as far as it takes to tell (blank lines, then that line: at most
 * DOCUMENT_SNIFF_LIMIT, past which it is JSONL); the source returned yields every byte again.
 */
export async function sniffDocument(source: ByteSource): Promise<{ document: boolean; source: ByteSource }> {
  const parts: Uint8Array[] = [];
  let seen: { opens: boolean | null; state: DocumentSniff } = { opens: null, state: "blanks" };
  let total = 0;
  while (seen.opens === null && total < DOCUMENT_SNIFF_LIMIT) {
    // Each read's new bytes are looked at once: the window so far up to `cursor` has been
    // (-1: not even the byte order mark it may start the input with).
    let cursor = parts.length === 0 ? -1 : 0;
    const told = (head: Uint8Array) => {
      if (cursor < 0) {
        if (isMarkStart(head)) return false; // a mark's first bytes alone say nothing yet
        cursor = isByteOrderMark(head) ? 3 : 0;
      }
      seen = documentStart(head.subarray(cursor), seen.state);
      cursor = head.length;
      return seen.opens !== null;
    };
    const window = await readUpTo(source, SNIFF_WINDOW, told);
    parts.push(window);
    total += window.length;
    if (seen.opens === null && window.length < SNIFF_WINDOW)
      seen = { opens: seen.state === "opened", state: seen.state }; // the input ended
  }
  // Past DOCUMENT_SNIFF_LIMIT of blanks (or of `{` and blanks) it is JSONL, as it reads.
  return {
    document: seen.opens === true,
    source: prepend(parts.length === 1 ? parts[0] : Buffer.concat(parts, total), source),
  };
}

/** All of `source`, or null once it holds more than `limit` bytes (nothing more is read then). */
export async function readWhole(source: ByteSource, limit: number): Promise<Uint8Array | null> {
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const part = await readUpTo(source, Math.min(DEFAULT_CHUNK, limit + 1 - total));
    if (part.length === 0) break;
    parts.push(part);
    total += part.length;
    if (total > limit) return null;
  }
  return Buffer.concat(parts, total);
}

/** `source`, counting the bytes read from it: where a line starts, to read it again. */
function counting(source: ByteSource): ByteSource & { position: number } {
  const counted = {
    position: 0,
    async read(into: Uint8Array, offset: number, length: number) {
      const got = await source.read(into, offset, length);
      counted.position += got;
      return got;
    },
    ...(source.readAgain === undefined ? {} : { readAgain: source.readAgain.bind(source) }),
    close: () => source.close(),
  };
  return counted;
}

/** How reading a long line in window mode (streamLine) ended. */
type StreamOutcome =
  /** Scanned: its value waits in the scanner; `tail` bytes after it are in the batch buffer. */
  | { kind: "scanned"; line: PlacedLine; tail: number }
  /**
   * Too long to keep (past maxLineBytes): `bytes` read so far, and whether they were all blank;
   * the rest is still to read.
   */
  | { kind: "dropped"; bytes: number; blank: boolean }
  /**
   * For the room instead: its first `bytes` were read, and `line` is set when they are all of it
   * (then `tail` bytes after it are in the batch buffer).
   */
  | { kind: "whole"; bytes: number; blank: boolean; line: PlacedLine | null; tail: number };

/**
 * Reads a long line whose first bytes fill `first` (the batch buffer) through `stream`, a piece
 * of `first.length` bytes at a time; what follows the line's newline goes into `first`.
 */
async function streamLine(
  stream: StreamedLine,
  source: ByteSource,
  first: Uint8Array,
  maxLineBytes: number,
): Promise<StreamOutcome> {
  const chunk = first.length;
  let bytes = chunk; // of the line, read (`first` holds its start)
  let blank = isBlankLine(first);
  const whole = (line: PlacedLine | null = null, tail = 0): StreamOutcome => ({
    kind: "whole",
    bytes,
    blank,
    line,
    tail,
  });
  const start = stream.space(chunk);
  if (start === null || start.length < chunk) return whole();
  start.set(first);
  if (!stream.scanned(chunk, false)) return whole();
  for (;;) {
    if (bytes > maxLineBytes) return { kind: "dropped", bytes, blank };
    // Line offsets are u32 in the scanner: a line near 4 GiB is left to the room (which has none).
    if (bytes + chunk > SCANNER_OFFSET_LIMIT) return whole();
    const space = stream.space(chunk);
    if (space === null) return whole();
    const got = await source.read(space, 0, space.length);
    const at = got === 0 ? -1 : asBuffer(space.subarray(0, got)).indexOf(NEWLINE);
    const length = at >= 0 ? at : got;
    blank &&= isBlankLine(space.subarray(0, length));
    bytes += length;
    if (at < 0 && got > 0) {
      if (!stream.scanned(got, false)) return whole();
      continue;
    }
    // The line ends here: with a newline, or with the input.
    const tail = at >= 0 ? got - at - 1 : 0;
    first.set(space.subarray(length + 1, length + 1 + tail)); // before the scan puts its sentinel there
    const line = { bytes, newline: at >= 0 };
    return stream.scanned(length, true) && stream.finish() ? { kind: "scanned", line, tail } : whole(line, tail);
  }
}

/** Window mode takes lines up to this (the scanner keeps line offsets as u32). */
const SCANNER_OFFSET_LIMIT = 2 ** 32 - 1;

/**
 * Batches of whole lines, in input order; each about a chunk (the pool's buffer size) of bytes,
 * or one line longer than that, in parts. A line of which more than `maxLineBytes` (past what
 * the reader downstream could ever take) has been read without its end is dropped instead: lines
 * up to `maxLineBytes` are always kept, lines over it by more than a chunk never.
 */
export async function* readBatches(
  source: ByteSource,
  pool = new BufferPool(DEFAULT_CHUNK),
  maxLineBytes = Infinity,
  longLines?: LongLines,
): AsyncGenerator<Batch> {
  const counted = counting(withoutLeadingMark(source));
  source = counted;
  const chunk = pool.size;
  let buffer = pool.take();
  let filled = 0; // bytes at the start of `buffer` not sent yet
  let lastNewline = -1; // newest `\n` in buffer[0, filled), -1: none
  let nextLine = 1;
  let yielded = 0; // batches so far
  // Full buffers holding the start of one line longer than a buffer (no newline in any of them).
  let pieces: Uint8Array[] = [];
  let piecesBytes = 0;
  // Set once the long line passes maxLineBytes: its pieces went back to the pool.
  let dropped: DroppedLine | null = null;
  /**
   * The long line's batch: the pieces and `last`, which must own its buffer (a dropped line's
   * last buffer goes back to the pool: the caller moves on to a fresh one).
   */
  const longLine = (last: Uint8Array): Batch => {
    if (dropped !== null) {
      const newline = last.length > 0 && last[last.length - 1] === NEWLINE;
      const line = last.subarray(0, last.length - (newline ? 1 : 0));
      const batch = {
        bytes: EMPTY,
        dropped: { bytes: dropped.bytes + line.length, newline, blank: dropped.blank && isBlankLine(line) },
        firstLine: nextLine,
        lineCount: 1,
      };
      dropped = null;
      pool.give(last.buffer as ArrayBuffer);
      return batch;
    }
    const parts = last.length > 0 ? [...pieces, last] : pieces;
    pieces = [];
    piecesBytes = 0;
    return { bytes: EMPTY, parts, firstLine: nextLine, lineCount: 1 };
  };
  try {
    for (;;) {
      if (filled === buffer.length && dropped === null && pieces.length === 0 && longLines !== undefined) {
        // The start of a long line: scanned as it is read, or on into a room of its own, if there is one.
        const place = await longLines(yielded);
        let room: Uint8Array | null = null;
        let end = 0; // the line's bytes in the room
        let ended: PlacedLine | null = null; // set when the line's end was read (what follows is in `buffer`)
        let long: Batch | null = null; // the line's batch, once it is read
        const stream = place !== null && source.readAgain !== undefined ? (place.stream?.(chunk) ?? null) : null;
        if (stream !== null) {
          const lineAt = counted.position - filled;
          const outcome = await streamLine(stream, source, buffer, maxLineBytes);
          if (outcome.kind === "scanned") {
            filled = outcome.tail;
            const placed: PlacedLine = { ...outcome.line, streamed: true };
            if (outcome.line.bytes <= (place!.again ?? -1)) {
              placed.text = new Uint8Array(outcome.line.bytes);
              await source.readAgain!(placed.text, 0, outcome.line.bytes, lineAt);
            }
            long = { bytes: EMPTY, placed, firstLine: nextLine, lineCount: 1 };
          } else if (outcome.kind === "dropped" || (outcome.line === null && outcome.bytes > maxLineBytes)) {
            // Too long to keep (as the room would find once it had read that much).
            dropped = { bytes: outcome.bytes, newline: false, blank: outcome.blank };
            filled = 0;
          } else {
            // Not for window mode: read again from its start, into the room.
            const length = outcome.bytes;
            room = place!.room(outcome.line === null ? length + chunk : length);
            if (room !== null) await source.readAgain!(room, 0, length, lineAt);
            end = length;
            if (outcome.line !== null) {
              ended = outcome.line;
              filled = outcome.tail;
            }
            if (room === null) {
              // No room for it: dropped, as a line too long is.
              const bytes = { bytes: length, newline: ended?.newline ?? false, blank: outcome.blank };
              if (ended === null) {
                dropped = bytes;
                filled = 0;
              } else {
                long = { bytes: EMPTY, dropped: bytes, firstLine: nextLine, lineCount: 1 };
              }
            }
          }
        } else if (place !== null) {
          room = place.room(buffer.length + chunk);
          if (room !== null) {
            room.set(buffer);
            end = buffer.length;
          }
        }
        if (room !== null) {
          let held: Uint8Array = room;
          let newline = -1;
          let full = false; // no room for more: dropped, as a line too long is
          let touched = end; // the room's pages are touched up to here (see touchPages)
          while (ended === null) {
            if (end === held.length) {
              // (A line longer than maxLineBytes is dropped once that much of it is read.)
              const more = end > maxLineBytes ? null : place!.room(end + chunk);
              if (more === null) {
                full = true;
                break;
              }
              held = more;
            }
            // Every other read goes into pages this thread touched while the read before it ran
            // into fresh ones (see touchPages): two threads take the first touches, not one. The
            // room for it is asked for ahead, if there is any (the line's own reads decide, as
            // above, when it is too long).
            const ahead = end >= touched && end + chunk <= maxLineBytes;
            if (ahead && held.length < end + 2 * chunk) held = place!.room(end + 2 * chunk) ?? held;
            const reading = source.read(held, end, Math.min(chunk, held.length - end));
            if (ahead) touched = touchPages(held, end + chunk, Math.min(held.length, end + 2 * chunk));
            const got = await reading;
            if (got === 0) break;
            const at = asBuffer(held.subarray(end, end + got)).indexOf(NEWLINE);
            end += got;
            if (at >= 0) {
              newline = end - got + at;
              break;
            }
          }
          if (full) {
            dropped = { bytes: end, newline: false, blank: isBlankLine(held.subarray(0, end)) };
            filled = 0;
          } else {
            if (ended === null) {
              // Ended by a newline (what follows it moves to the batch buffer) or by the input.
              const line = newline >= 0 ? newline : end;
              filled = newline >= 0 ? end - newline - 1 : 0;
              buffer.set(held.subarray(line + 1, line + 1 + filled));
              ended = { bytes: line, newline: newline >= 0 };
            }
            long = { bytes: EMPTY, placed: ended, firstLine: nextLine, lineCount: 1 };
          }
        }
        if (long !== null) {
          yield long;
          yielded++;
          nextLine++;
          lastNewline = filled > 0 ? asBuffer(buffer.subarray(0, filled)).lastIndexOf(NEWLINE) : -1;
          continue;
        }
      }
      if (filled === buffer.length) {
        // Full and no newline (a newline would have sent a batch): part of one long line.
        if (dropped === null && piecesBytes + buffer.length > maxLineBytes) {
          dropped = { bytes: piecesBytes, newline: false, blank: pieces.every((piece) => isBlankLine(piece)) };
          for (const piece of pieces) pool.give(piece.buffer as ArrayBuffer);
          pieces = [];
          piecesBytes = 0;
        }
        if (dropped !== null) {
          // Counted and let go: the same buffer takes the line's next bytes.
          dropped.bytes += buffer.length;
          dropped.blank &&= isBlankLine(buffer);
        } else {
          pieces.push(buffer);
          piecesBytes += buffer.length;
          buffer = pool.take();
        }
        filled = 0;
      }
      const got = await source.read(buffer, filled, buffer.length - filled);
      if (got === 0) break;
      // Only the new bytes are searched: a long line is scanned once, not once per read.
      const newest = asBuffer(buffer.subarray(filled, filled + got)).lastIndexOf(NEWLINE);
      if (newest >= 0) lastNewline = filled + newest;
      filled += got;
      if (pieces.length > 0 || dropped !== null) {
        if (lastNewline < 0) continue;
        // The long line ends here: it leaves alone, with this buffer as its last part; the rest
        // (less than a chunk) moves to a fresh buffer.
        const end = asBuffer(buffer.subarray(0, filled)).indexOf(NEWLINE) + 1;
        const next = pool.take();
        next.set(buffer.subarray(end, filled));
        yield longLine(buffer.subarray(0, end));
        yielded++;
        nextLine++;
        buffer = next;
        filled -= end;
        lastNewline = lastNewline >= end ? lastNewline - end : -1;
      }
      // Small reads (a pipe hands out 64 KB) gather into batches of at least half a chunk.
      if (lastNewline < 0 || filled < chunk >> 1) continue;
      const end = lastNewline + 1;
      const lineCount = countNewlines(buffer, end);
      const next = pool.take();
      next.set(buffer.subarray(end, filled)); // the unfinished tail, shorter than a chunk
      yield { bytes: buffer.subarray(0, end), firstLine: nextLine, lineCount };
      yielded++;
      nextLine += lineCount;
      filled -= end;
      buffer = next;
      lastNewline = -1;
    }
    // What is left: whole lines not sent yet, and maybe a last line without a newline (a file
    // cut short, or just no final newline).
    if (pieces.length > 0 || dropped !== null) {
      yield longLine(buffer.subarray(0, filled));
    } else if (filled > 0) {
      const unterminated = buffer[filled - 1] === NEWLINE ? 0 : 1;
      yield {
        bytes: buffer.subarray(0, filled),
        firstLine: nextLine,
        lineCount: countNewlines(buffer, filled) + unterminated,
      };
    }
  } finally {
    await source.close();
  }
}

/**
 * Calls `each(start, end, line)` for every line of a batch of `bytes` (not `parts`); `end`
 * excludes the `\n`. Lines are found here, in whoever plans the batch, so the reader never scans
 * them twice.
 */
export function forEachLine(batch: Batch, each: (start: number, end: number, line: number) => void): void {
  const bytes = asBuffer(batch.bytes);
  let start = 0;
  let line = batch.firstLine;
  while (start < bytes.length) {
    let end = bytes.indexOf(NEWLINE, start);
    if (end === -1) end = bytes.length;
    each(start, end, line);
    line++;
    start = end + 1;
  }
}

/**
 * A file read straight into the batch buffers, and, when it is a regular file, read again where
 * asked (see ByteSource.readAgain).
 */
export async function fileSource(path: string): Promise<ByteSource> {
  const handle = await open(path, "r");
  // A pipe or a terminal given by name (/dev/stdin, <(cmd), a FIFO) cannot be read at a position.
  let regular: boolean;
  try {
    regular = (await handle.stat()).isFile();
  } catch (error) {
    await handle.close();
    throw new FileError("read", path, error);
  }
  const read = async (into: Uint8Array, offset: number, length: number, position: number | null) => {
    try {
      const { bytesRead } = await handle.read(into, offset, length, position);
      return bytesRead;
    } catch (error) {
      throw new FileError("read", path, error); // a read error mid-file names the file
    }
  };
  return {
    read: (into, offset, length) => read(into, offset, length, null),
    ...(regular && {
      async readAgain(into: Uint8Array, offset: number, length: number, position: number) {
        for (let got = 0; got < length; ) {
          const n = await read(into, offset + got, length - got, position + got);
          if (n === 0)
            throw new FileError("read", path, new Error(`it is shorter than it was (at byte ${position + got})`));
          got += n;
        }
      },
    }),
    close: () => handle.close(),
  };
}

/** A stream (stdin): its chunks are copied into the batch buffers. */
export function streamSource(stream: Readable): ByteSource {
  const iterator = stream[Symbol.asyncIterator]() as AsyncIterator<Buffer | string>;
  let pending: Uint8Array | null = null;
  return {
    async read(into, offset, length) {
      while (pending === null || pending.length === 0) {
        const next = await iterator.next();
        if (next.done) return 0;
        pending = typeof next.value === "string" ? Buffer.from(next.value, "utf8") : next.value;
      }
      const n = Math.min(length, pending.length);
      into.set(pending.subarray(0, n), offset);
      pending = pending.subarray(n);
      return n;
    },
    async close() {
      await iterator.return?.();
    },
  };
}
