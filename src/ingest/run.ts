// `rows` end to end: input files -> batches of lines -> planned in-process (jobs 1) or on worker
// threads -> rows, reports and notes written in input order.
import { statSync } from "node:fs";
import { openInput, readDocument, tooLargeDocument } from "./read.js";
import { besideInput } from "./beside.js";
import { MAX_STRING_BYTES, inputName, inputsOrStdin, isJsonName, tooLarge } from "../formats/text.js";
import {
  BufferPool,
  DEFAULT_CHUNK,
  batchBuffers,
  batchLength,
  fileSource,
  readBatches,
  type ByteSource,
  type LongLines,
} from "./batches.js";
import { WorkerPool } from "./pool.js";
import { LineProcessor, maxLineBytes, type IngestOptions, type Piece } from "./process.js";
import type { ByteSink } from "./sink.js";
import { recycleBlock, type ColumnBlock } from "../columnar/columns.js";
import type { DirectColumns } from "../columnar/writer.js";

export interface RunOptions extends IngestOptions {
  /** Worker threads; 1 plans in-process. */
  jobs: number;
  /**
   * `jobs` is the default (not asked for): workers only for input large enough to gain from
   * them (see WORKERS_FROM_BYTES), so the default is never slower than one job.
   */
  autoJobs?: boolean;
  /** With `autoJobs`: WORKERS_FROM_BYTES unless given (tests use small ones). */
  workersFromBytes?: number;
  /** Batch size in bytes (tests use small ones). */
  chunk?: number;
}

export interface RunSinks {
  /** JSONL rows (with `columns`, unused). */
  rows: ByteSink;
  /**
   * Columnar output (options.columns): each piece's records, in input order. Once writeBlock
   * resolves, the block's buffers may be reused (recycleBlock): it copies them or transfers them.
   */
  columns?: {
    writeBlock(block: ColumnBlock): Promise<void>;
    /** Where records planned on this thread go instead of blocks, when the writer is on it too. */
    readonly direct?: DirectColumns | null;
  };
  /** Null: no report file. */
  report: ByteSink | null;
  /** Rejection notes (stderr). */
  notes(text: string): void;
  /** Called after each piece is written. */
  progress?(totals: RunTotals): void;
}

export interface RunTotals {
  rollouts: number;
  rejected: number;
  rows: number;
  /** Calls with SPEC's prefix_break, and the rollouts that have any. */
  brokenCalls: number;
  brokenRollouts: number;
  /** Input bytes done. */
  bytes: number;
}

/** Totals of no work yet. */
export function noTotals(): RunTotals {
  return { rollouts: 0, rejected: 0, rows: 0, brokenCalls: 0, brokenRollouts: 0, bytes: 0 };
}

/** Adds `more` (a part's totals) into `totals`. */
export function addTotals(totals: RunTotals, more: RunTotals): void {
  totals.rollouts += more.rollouts;
  totals.rejected += more.rejected;
  totals.rows += more.rows;
  totals.brokenCalls += more.brokenCalls;
  totals.brokenRollouts += more.brokenRollouts;
  totals.bytes += more.bytes;
}

/**
 * Sum of the input files' sizes (null when reading stdin — `-`, or no inputs at all — or a pipe),
 * for progress and the small-input rule.
 */
export function inputSize(inputs: readonly string[]): number | null {
  if (inputs.length === 0) return null;
  let total = 0;
  for (const input of inputs) {
    if (input === "-") return null;
    const stat = statSync(input);
    if (!stat.isFile()) return null; // a FIFO, <(...): its size says nothing
    total += stat.size;
  }
  return total;
}

/**
 * With the default --jobs, input is planned in-process up to this many bytes, on worker threads
 * past it. Below it workers may lose: their start-up (an isolate each, JIT again: ~0.15 CPU s)
 * and the wait behind a long line (planned on this thread while the workers idle) can cost more
 * than they gain. On 2 cores: issue 17 measured 0.94x with two workers on a 296 MB input with two
 * 90 MB rollouts and no gain on a 172 MB one; the bench's generated 300 MB input of that shape
 * gains 1.0-1.15x, its 1 GB one 1.3-1.5x (bench/columnar.ts). The line is drawn where two workers
 * always won. Since issue 39 long lines are planned here, and two workers cost 1.25x the CPU time
 * of one job (1.5-1.6x when they planned long lines: docs/performance.md).
 */
export const WORKERS_FROM_BYTES = 512 << 20;

export async function runRows(inputs: readonly string[], options: RunOptions, sinks: RunSinks): Promise<RunTotals> {
  const totals = noTotals();
  /** Writes a piece; `recycle` gets each row block back once the stream is done with it. */
  const write = async (piece: Piece, recycle: (buffer: ArrayBuffer) => void) => {
    for (const chunk of piece.rows) await sinks.rows.write(chunk, () => recycle(chunk.buffer as ArrayBuffer));
    if (piece.columns !== undefined) {
      await sinks.columns!.writeBlock(piece.columns);
      recycleBlock(piece.columns);
    } else {
      await sinks.columns?.direct?.drain(); // the groups this thread's records completed
    }
    if (piece.reports !== "" && sinks.report !== null) await sinks.report.write(piece.reports);
    if (piece.notes !== "") sinks.notes(piece.notes);
    addTotals(totals, { ...piece, rows: piece.rowCount });
    sinks.progress?.(totals);
  };

  const files = inputsOrStdin(inputs);
  let local: LineProcessor | null = null;
  const inProcess = async () => (local ??= await LineProcessor.create(options, sinks.columns?.direct ?? null));
  const recycleLocal = (buffer: ArrayBuffer) => local?.giveBlock(buffer);
  const chunk = options.chunk ?? DEFAULT_CHUNK;
  const buffers = new BufferPool(chunk);
  // Input that fits in one batch gains nothing from workers but their start-up time.
  const size = inputSize(files);
  const jobs = size !== null && size <= chunk ? 1 : options.jobs;
  // The default starts workers at once for a large file; for input of unknown size (stdin, a
  // pipe), once WORKERS_FROM_BYTES of it have been read (and planned in-process).
  const from = options.workersFromBytes ?? WORKERS_FROM_BYTES;
  const threshold = !options.autoJobs ? 0 : size === null ? from : size >= from ? 0 : Infinity;
  let pool = null as WorkerPool | null;
  let read = 0; // input bytes batched so far
  const poolNow = () => {
    if (pool === null && jobs > 1 && read >= threshold)
      pool = new WorkerPool(jobs, options, write, (b) => buffers.give(b));
    return pool;
  };
  poolNow();
  try {
    for (const file of files) {
      if (isJsonName(file)) {
        await pool?.drain(); // keep input order: earlier batches first
        await planJsonFile(file, options, await inProcess(), (piece) => write(piece, recycleLocal));
        continue;
      }
      const input = await openInput(file);
      if (input.document) {
        await pool?.drain(); // keep input order
        await planDocument(file, input.source, options, await inProcess(), (piece) => write(piece, recycleLocal));
        continue;
      }
      const name = inputName(file);
      // A long line is read straight into this thread's scanner (LineProcessor.longLineRoom), once
      // the batches before it are planned or handed out, and planned here, with workers or without:
      // sent to a worker, its bytes would be read into batch buffers, then copied into the worker's
      // scanner, both fresh memory whose first touch costs about as much as planning (issue 39).
      const planned = new Progress();
      const longLines: LongLines = async (index) => {
        await planned.reach(index);
        return (await inProcess()).longLineRoom();
      };
      const batches = readBatches(input.source, buffers, maxLineBytes(options.reader), longLines);
      for await (const batch of readAhead(batches)) {
        read += batchLength(batch);
        // A line in the scanner is planned here (no worker was running when it was read).
        const workers = batch.placed !== undefined ? null : poolNow();
        if (workers !== null) {
          await workers.submit(batch, name);
        } else {
          await pool?.drain(); // the workers' batches before it are written first (input order)
          await (await inProcess()).processBatch(batch, name, (piece) => write(piece, recycleLocal));
          for (const buffer of batchBuffers(batch)) buffers.give(buffer); // planned and written: nothing refers to it
        }
        planned.step();
      }
    }
    await pool?.drain();
  } finally {
    await pool?.close();
  }
  return totals;
}

/** A count of batches done, and waits for it to reach a number. */
class Progress {
  private done = 0;
  private readonly waiting: { count: number; resolve: () => void }[] = [];

  step(): void {
    this.done++;
    for (let i = this.waiting.length - 1; i >= 0; i--) {
      if (this.waiting[i].count > this.done) continue;
      this.waiting[i].resolve();
      this.waiting.splice(i, 1);
    }
  }

  reach(count: number): Promise<void> {
    if (count <= this.done) return Promise.resolve();
    return new Promise((resolve) => this.waiting.push({ count, resolve }));
  }
}

/** Starts reading the next batch while the current one is planned (one batch ahead). */
async function* readAhead<T>(source: AsyncGenerator<T>): AsyncGenerator<T> {
  let next = source.next();
  try {
    for (;;) {
      const current = await next;
      if (current.done) return;
      next = source.next();
      yield current.value;
    }
  } finally {
    // Stopped early (an error downstream): let the pending read finish, then close the file.
    await next.catch(() => undefined);
    await source.return(undefined);
  }
}

/** An input that holds one pretty-printed value (see openInput), as a `.json` file is planned. */
async function planDocument(
  file: string,
  source: ByteSource,
  options: IngestOptions,
  processor: LineProcessor,
  write: (piece: Piece) => Promise<void>,
): Promise<void> {
  const context = besideInput(file, processor.context, { oneValue: true });
  const { items, bytes } = await readDocument(file, source, { from: options.from, ...context });
  for (const item of items) processor.record(item.result, item.where, item.line);
  await write(processor.takeAll(bytes));
}

/** A `.json` file: one value (or an array of values), through JSON.parse, in-process. */
async function planJsonFile(
  file: string,
  options: IngestOptions,
  processor: LineProcessor,
  write: (piece: Piece) => Promise<void>,
): Promise<void> {
  const size = statSync(file).size;
  if (size <= MAX_STRING_BYTES) return planDocument(file, await fileSource(file), options, processor, write);
  // Read whole, it would be one string longer than V8 allows: reject it (saying its size), go on with the rest.
  processor.record(tooLarge(tooLargeDocument(size)), file, undefined);
  await write(processor.takeAll(size));
}
