// Parquet encoded on a thread of its own (encoder-thread.ts), for the CLI. Row groups are cut and
// put in Arrow IPC form on the writing thread, as in-process (so the bytes are the same), in a
// SharedArrayBuffer the encoder reads; once it has copied a stream in, the buffer is filled again
// (the first group's is a spare one the encoder touched while it waited). The encoded bytes come
// back in order and go to `output`.
import { Worker } from "node:worker_threads";
import type { ArrowCodec, IpcScratch } from "./arrow.js";
import type { EncoderOptions, FromEncoder, ToEncoder } from "./encoder-thread.js";
import type { ParquetEncoder } from "./parquet.js";
import type { Layout } from "./schema.js";
import type { ByteOutput } from "./types.js";
import { ColumnarWriter, DEFAULT_GROUP_BYTES, type ColumnarWriterOptions } from "./writer.js";
import { threadUrl } from "../thread-url.js";

/**
 * IPC bytes handed to the encoder and not yet taken: a row group's worth, so that the next
 * group fills while the last one is encoded, and no more, to bound memory.
 */
const BYTES_IN_FLIGHT = DEFAULT_GROUP_BYTES;
/** Encoded bytes waiting for `output` before more groups are sent. */
const BYTES_WAITING = 64 << 20;
/** A stream's buffer is kept to be filled again up to this size (one huge group must not pin its size). */
const KEPT_STREAM_BYTES = 3 * DEFAULT_GROUP_BYTES;

/**
 * A buffer for IPC streams, shared with the encoder rather than transferred to it and back: each
 * buffer received from another thread is new external memory to V8, and on the mix the round
 * trips brought 3-4 more mark-compacts (20-40 ms) to the writing thread.
 */
const sharedBytes = (bytes: number) => new Uint8Array(new SharedArrayBuffer(bytes));

/**
 * V8's tiering budget for parquet-wasm (see wasm-tiering.ts): about 20 of its functions reach
 * TurboFan while the first row group is encoded, instead of about 80 at V8 11's budget, and
 * steady encoding is as fast. Measured on the bench's mix: 10, 30, 50, 100 and 300 million, with
 * 100 and 300 million the best (3-11% off the Parquet run against V8's budget).
 */
export const PARQUET_TIERING_BUDGET = 100_000_000;

class ThreadedParquetEncoder implements ParquetEncoder {
  private readonly worker: Worker;
  /** Bytes of the streams sent and not yet taken, oldest first. */
  private readonly inFlight: number[] = [];
  private inFlightBytes = 0;
  private waiting = 0;
  /**
   * Where the writer puts the next group's stream together, sent on without a copy: a shared
   * buffer the encoder is done with, or its spare (a larger one when a stream does not fit).
   */
  readonly scratch: IpcScratch = { bytes: new Uint8Array(0), grow: sharedBytes };
  /** The buffers of the streams sent, oldest first (null: a stream's copy, transferred). */
  private readonly sentBuffers: (SharedArrayBuffer | null)[] = [];
  private started = false;
  private written: Promise<void> = Promise.resolve();
  private failure: Error | null = null;
  private wake: (() => void) | null = null;
  private closed: (() => void) | null = null;

  constructor(
    options: EncoderOptions,
    private readonly output: ByteOutput,
  ) {
    this.worker = new Worker(threadUrl(import.meta.url, "columnar", "encoder-thread.js"), {
      workerData: { compression: options.compression, tieringBudget: options.tieringBudget } satisfies EncoderOptions,
    });
    this.worker.on("message", (message: FromEncoder) => this.receive(message));
    this.worker.on("error", (error) => this.fail(error));
    this.worker.on("exit", (code) => {
      if (code !== 0) this.fail(new Error(`the Parquet encoder thread stopped (exit code ${code})`));
    });
  }

  private receive(message: FromEncoder): void {
    if (message.type === "bytes") {
      const bytes = message.bytes;
      this.waiting += bytes.byteLength;
      this.written = this.written.then(async () => {
        if (this.failure !== null) return;
        try {
          await this.output.write(bytes);
        } catch (error) {
          this.fail(error instanceof Error ? error : new Error(String(error)));
        }
        this.waiting -= bytes.byteLength;
        this.signal();
      });
    } else if (message.type === "copied" || message.type === "spare") {
      const buffer = message.type === "spare" ? message.buffer : this.sentBuffers.shift();
      if (buffer && buffer.byteLength > this.scratch.bytes.byteLength && buffer.byteLength <= KEPT_STREAM_BYTES)
        this.scratch.bytes = new Uint8Array(buffer);
    } else if (message.type === "taken") {
      this.inFlightBytes -= this.inFlight.shift() ?? 0;
      this.signal();
    } else if (message.type === "closed") {
      this.closed?.();
    } else {
      this.fail(new Error(message.message));
    }
  }

  private fail(error: Error): void {
    this.failure ??= error;
    void this.worker.terminate(); // nothing more is wanted of it (and it may have ended already)
    this.signal();
    this.closed?.();
  }

  private signal(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  private check(): void {
    if (this.failure !== null) throw this.failure;
  }

  async write(ipcStream: Uint8Array): Promise<void> {
    this.check();
    this.started = true;
    const bytes = ipcStream.byteLength;
    // The scratch buffer goes as it is when the stream is in it (not grown out of it meanwhile).
    const own = ipcStream.buffer === this.scratch.bytes.buffer;
    if (own) this.scratch.bytes = new Uint8Array(0); // until the encoder gives one back
    while ((this.inFlight.length > 0 && this.inFlightBytes + bytes > BYTES_IN_FLIGHT) || this.waiting > BYTES_WAITING) {
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.check();
    }
    this.inFlight.push(bytes);
    this.inFlightBytes += bytes;
    if (own && ipcStream.buffer instanceof SharedArrayBuffer) {
      this.sentBuffers.push(ipcStream.buffer);
      this.worker.postMessage({ type: "ipc", bytes: ipcStream } satisfies ToEncoder);
    } else {
      const sent = ipcStream.slice(); // a stream of the caller's own (the empty batch)
      this.sentBuffers.push(null);
      this.worker.postMessage({ type: "ipc", bytes: sent } satisfies ToEncoder, [sent.buffer]);
    }
  }

  async finish(emptyBatch: () => Uint8Array): Promise<void> {
    if (!this.started) await this.write(emptyBatch());
    this.check();
    const done = new Promise<void>((resolve) => (this.closed = resolve));
    this.worker.postMessage({ type: "close" } satisfies ToEncoder);
    await done;
    await this.written;
    this.check();
    // The thread ends by itself once it has said "closed" (see encoder-thread.ts).
  }

  abort(): void {
    this.failure ??= new Error("aborted");
    void this.worker.terminate();
  }
}

/**
 * A Parquet ColumnarWriter whose encoding runs on its own thread. Records and blocks go in as
 * for any ColumnarWriter (`direct` included: see DirectColumns).
 */
export class ThreadedColumnarWriter<L extends Layout = Layout> extends ColumnarWriter<L> {
  /**
   * `tieringBudget`: V8's tiering budget for the encoder's compile of parquet-wasm (see
   * wasm-tiering.ts; PARQUET_TIERING_BUDGET). The flag is the process's, and the encoder compiles
   * about 0.1 s after it starts: give it only when no other thread compiles WebAssembly then.
   */
  constructor(
    options: ColumnarWriterOptions & { layout: L; tieringBudget?: number },
    output: ByteOutput,
    arrow: ArrowCodec,
  ) {
    if (options.format !== "parquet") throw new TypeError("the threaded columnar writer writes Parquet only");
    const encoder = new ThreadedParquetEncoder(options, output);
    try {
      super(options, output, { arrow, encoder });
    } catch (error) {
      encoder.abort(); // bad options: the thread must not outlive the writer it was started for
      throw error;
    }
  }
}
