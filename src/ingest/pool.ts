// Worker threads for `rows --jobs N`: batches go out to whichever worker has least to do, their
// output comes back in pieces and leaves in input order. Memory stays bounded: at most
// MAX_IN_FLIGHT_BYTES of input (plus one batch) is out at a time, counted until its output is written.
import { Worker } from "node:worker_threads";
import { CoreUnavailableError } from "../core/errors.js";
import { batchBuffers, batchLength, type Batch, type DroppedLine } from "./batches.js";
import type { IngestOptions, Piece } from "./process.js";
import { threadUrl } from "../thread-url.js";

export type ToWorker = BatchMessage | { blocks: ArrayBuffer[] };

export interface BatchMessage {
  seq: number;
  /** The batch's bytes (one buffer), or a long line's parts (see Batch.parts). */
  buffers: ArrayBuffer[];
  lengths: number[];
  parts: boolean;
  /** A line too long to keep (see Batch.dropped): no buffers then. */
  dropped?: DroppedLine;
  firstLine: number;
  lineCount: number;
  name: string;
}

export type FromWorker =
  | {
      type: "piece";
      seq: number;
      piece: Piece;
      /** the batch's buffers, back with its last piece */
      buffers?: ArrayBuffer[];
    }
  | {
      type: "fatal";
      message: string;
      /** The error's class, when the main thread tells it apart (exit codes). */
      kind?: "core_unavailable";
    };

/** Batches a worker may hold at once: one running, one waiting (so it never idles between batches). */
const PER_WORKER = 2;

/** Input bytes out with the workers at a time (more waits until earlier output is written). */
const MAX_IN_FLIGHT_BYTES = 128 << 20;

interface Slot {
  bytes: number;
  pieces: Piece[];
  worker: WorkerState;
}

interface WorkerState {
  worker: Worker;
  outstanding: number;
}

export class WorkerPool {
  private readonly workers: WorkerState[] = [];
  private readonly slots = new Map<number, Slot>();
  private nextSubmit = 0;
  private nextWrite = 0;
  private inFlight = 0;
  private failure: Error | null = null;
  private wake: (() => void) | null = null;
  private writing: Promise<void> = Promise.resolve();
  private pumping = false;
  private closing = false;

  /** Workers start as batches need them, up to `jobs` (a short input does not pay for them all). */
  constructor(
    private readonly jobs: number,
    private readonly options: IngestOptions,
    private readonly write: (piece: Piece, recycle: (buffer: ArrayBuffer) => void) => Promise<void>,
    private readonly recycle: (buffer: ArrayBuffer) => void = () => {},
  ) {}

  private startWorker(): WorkerState {
    const worker = new Worker(threadUrl(import.meta.url, "ingest", "worker.js"), { workerData: this.options });
    const state: WorkerState = { worker, outstanding: 0 };
    worker.on("message", (message: FromWorker) => this.receive(state, message));
    worker.on("error", (error) => this.fail(error));
    worker.on("exit", (code) => {
      if (code !== 0 && !this.closing) this.fail(new Error(`a worker thread stopped (exit code ${code})`));
    });
    this.workers.push(state);
    return state;
  }

  /** The worker with least to do; a new one while every worker is busy and fewer than `jobs` run. */
  private leastBusy(): WorkerState {
    const least = this.workers.reduce<WorkerState | null>(
      (a, b) => (a === null || b.outstanding < a.outstanding ? b : a),
      null,
    );
    return least === null || (least.outstanding > 0 && this.workers.length < this.jobs) ? this.startWorker() : least;
  }

  private fail(error: Error): void {
    if (this.failure === null) this.failure = error;
    this.signal();
  }

  private signal(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  private waitForChange(): Promise<void> {
    return new Promise((resolve) => {
      const previous = this.wake;
      this.wake = () => {
        previous?.();
        resolve();
      };
    });
  }

  private check(): void {
    if (this.failure !== null) throw this.failure;
  }

  private receive(state: WorkerState, message: FromWorker): void {
    if (message.type === "fatal") {
      this.fail(
        message.kind === "core_unavailable" ? new CoreUnavailableError(message.message) : new Error(message.message),
      );
      return;
    }
    const slot = this.slots.get(message.seq);
    if (slot === undefined) return;
    if (message.piece.last) state.outstanding--;
    for (const buffer of message.buffers ?? []) this.recycle(buffer);
    slot.pieces.push(message.piece);
    this.pump();
    this.signal();
  }

  /** Writes the pieces that are next in input order, one write at a time. */
  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    this.writing = (async () => {
      try {
        for (;;) {
          const slot = this.slots.get(this.nextWrite);
          if (slot === undefined || slot.pieces.length === 0) break;
          const piece = slot.pieces.shift()!;
          const worker = slot.worker.worker;
          // Written row blocks go home to their worker for reuse.
          await this.write(piece, (buffer) => {
            if (!this.closing) worker.postMessage({ blocks: [buffer] } satisfies ToWorker, [buffer]);
          });
          if (piece.last) {
            this.slots.delete(this.nextWrite);
            this.nextWrite++;
            this.inFlight -= slot.bytes;
            this.signal();
          }
        }
      } catch (error) {
        this.fail(error instanceof Error ? error : new Error(String(error)));
      } finally {
        this.pumping = false;
      }
      // A piece may have arrived while the last write was awaited.
      const slot = this.slots.get(this.nextWrite);
      if (slot !== undefined && slot.pieces.length > 0 && this.failure === null) this.pump();
    })();
  }

  /** Hands a batch to a worker (its bytes are transferred: `batch` is unusable afterwards). */
  async submit(batch: Batch, name: string): Promise<void> {
    for (;;) {
      this.check();
      const target = this.leastBusy();
      const bytes = batchLength(batch);
      const room = this.inFlight === 0 || this.inFlight + bytes <= MAX_IN_FLIGHT_BYTES;
      if (target.outstanding < PER_WORKER && room) {
        const seq = this.nextSubmit++;
        this.slots.set(seq, { bytes, pieces: [], worker: target });
        this.inFlight += bytes;
        target.outstanding++;
        const parts = batch.dropped !== undefined ? [] : (batch.parts ?? [batch.bytes]);
        const message: BatchMessage = {
          seq,
          buffers: batchBuffers(batch),
          lengths: parts.map((part) => part.length),
          parts: batch.parts !== undefined,
          dropped: batch.dropped,
          firstLine: batch.firstLine,
          lineCount: batch.lineCount,
          name,
        };
        target.worker.postMessage(message, message.buffers);
        return;
      }
      await this.waitForChange();
    }
  }

  /** Waits until everything submitted is written. */
  async drain(): Promise<void> {
    while (this.nextWrite < this.nextSubmit) {
      this.check();
      await this.waitForChange();
    }
    await this.writing;
    this.check();
  }

  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(this.workers.map((state) => state.worker.terminate()));
  }
}
