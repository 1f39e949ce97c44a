// The streaming line reader: bytes from a file or stdin, cut into batches of whole lines.
//
// Bounded memory by design: bytes are read straight into one buffer; when the buffer holds at
// least one newline, everything up to the last newline leaves as a batch (the buffer itself, no
// copy) and only the unfinished tail is copied into a fresh buffer. A line longer than the
// buffer makes it double, so a line of n bytes costs at most ~2n of copying in total (never
// quadratic) and at most ~3n of memory while the buffer grows (old + new). Each batch owns its
// ArrayBuffer, so it can be transferred to a worker thread without a copy.
import { open } from "node:fs/promises";
import type { Readable } from "node:stream";

/** Whole lines: every line ends with `\n`, except possibly the last line of the input. */
export interface Batch {
  /** Starts at byteOffset 0 of its own ArrayBuffer (transferable). */
  bytes: Uint8Array;
  /** 1-based number of the first line in `bytes`. */
  firstLine: number;
  /** Number of lines in `bytes` (blank ones included), so line numbers stay true. */
  lineCount: number;
}

/** Where bytes come from: reads up to `length` bytes into `into` at `offset`; 0 = end of input. */
export interface ByteSource {
  read(into: Uint8Array, offset: number, length: number): Promise<number>;
  close(): Promise<void>;
}

export const DEFAULT_CHUNK = 2 << 20;

const NEWLINE = 10;

/** Node's Buffer view of the same bytes: its indexOf is memchr, much faster than TypedArray's. */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Counts `\n` in bytes[from, to). */
function countNewlines(bytes: Uint8Array, from: number, to: number): number {
  const buffer = asBuffer(bytes.subarray(0, to));
  let count = 0;
  let at = buffer.indexOf(NEWLINE, from);
  while (at !== -1 && at < to) {
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
 * Batch buffers of the usual size, given back once planned (by the worker, transferred back),
 * so a long run reuses a few buffers instead of faulting in fresh memory for every batch.
 */
export class BufferPool {
  private readonly free: ArrayBuffer[] = [];

  constructor(
    readonly size: number,
    private readonly keep = 16,
  ) {}

  take(size: number): Uint8Array {
    if (size <= this.size) {
      const recycled = this.free.pop();
      if (recycled !== undefined) return new Uint8Array(recycled, 0, this.size);
      return allocate(this.size);
    }
    return allocate(size);
  }

  /** Takes back a batch's buffer (only the usual size: long-line buffers go to the GC). */
  give(buffer: ArrayBuffer): void {
    if (buffer.byteLength === this.size && this.free.length < this.keep) this.free.push(buffer);
  }
}

/** Batches of whole lines, in input order; each about `chunk` bytes (more when one line is longer). */
export async function* readBatches(source: ByteSource, chunk = DEFAULT_CHUNK, pool = new BufferPool(chunk)): AsyncGenerator<Batch> {
  let buffer = pool.take(chunk);
  let filled = 0; // bytes of the unfinished line(s) at the start of `buffer`
  let nextLine = 1;
  let lastNewline = -1; // newest known `\n` in buffer[0, filled), -1: none
  try {
    for (;;) {
      if (filled === buffer.length) {
        // One line fills the whole buffer: double it (amortized linear copying).
        const bigger = allocate(buffer.length * 2);
        bigger.set(buffer.subarray(0, filled));
        buffer = bigger;
      }
      const got = await source.read(buffer, filled, buffer.length - filled);
      if (got === 0) break;
      // Only the new bytes are searched: a long line is scanned once, not once per read.
      const newest = asBuffer(buffer.subarray(filled, filled + got)).lastIndexOf(NEWLINE);
      if (newest >= 0) lastNewline = filled + newest;
      filled += got;
      // Small reads (a pipe hands out 64 KB) gather into batches of at least half a chunk.
      if (lastNewline < 0 || filled < chunk >> 1) continue;
      const end = lastNewline + 1;
      const lineCount = countNewlines(buffer, 0, end);
      const tail = filled - end;
      const next = pool.take(Math.max(chunk, tail * 2));
      next.set(buffer.subarray(end, filled));
      yield { bytes: buffer.subarray(0, end), firstLine: nextLine, lineCount };
      nextLine += lineCount;
      buffer = next;
      filled = tail;
      lastNewline = -1;
    }
    // What is left: whole lines not yet sent, and maybe a last line without a newline (a file
    // cut short, or just no final newline).
    if (filled > 0) {
      const last = allocate(filled);
      last.set(buffer.subarray(0, filled));
      const unterminated = last[filled - 1] === NEWLINE ? 0 : 1;
      yield { bytes: last, firstLine: nextLine, lineCount: countNewlines(last, 0, filled) + unterminated };
    }
  } finally {
    await source.close();
  }
}

/**
 * Calls `each(start, end, line)` for every line of a batch; `end` excludes the `\n`. Lines are
 * found here, in whoever plans the batch, so the reader never scans them twice.
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

/** A file read with positional reads straight into the batch buffers. */
export async function fileSource(path: string): Promise<ByteSource> {
  const handle = await open(path, "r");
  return {
    async read(into, offset, length) {
      const { bytesRead } = await handle.read(into, offset, length, null);
      return bytesRead;
    },
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
