// A ColumnarWriter on its own thread (encoder-thread.ts), for the CLI: blocks are transferred to
// it in order (at most a few at a time), the encoded bytes come back in order and go to `output`.
import { Worker } from "node:worker_threads";
import { blockBuffers, type ColumnBlock } from "./columns.js";
import type { FromEncoder, ToEncoder } from "./encoder-thread.js";
import type { Layout } from "./schema.js";
import type { ByteOutput, ColumnarWriter } from "./types.js";
import { DEFAULT_GROUP_BYTES, type ColumnarWriterOptions } from "./writer.js";
import { threadUrl } from "../thread-url.js";

/**
 * Block bytes handed to the encoder and not yet taken: a row group's worth, so that the next
 * group fills while the last one is encoded (a block is taken only once the group it completes
 * is encoded), and no more, to bound memory.
 */
const BYTES_IN_FLIGHT = DEFAULT_GROUP_BYTES;
/** Encoded bytes waiting for `output` before more blocks are sent. */
const BYTES_WAITING = 64 << 20;

function blockBytes(block: ColumnBlock): number {
  let total = 0;
  for (let i = 0; i < block.length; i++) total += block.weights[i];
  return total;
}

export class ThreadedColumnarWriter<L extends Layout = Layout> implements ColumnarWriter<L> {
  private readonly worker: Worker;
  /** Bytes of the blocks sent and not yet taken, oldest first. */
  private readonly inFlight: number[] = [];
  private inFlightBytes = 0;
  private waiting = 0;
  private written: Promise<void> = Promise.resolve();
  private failure: Error | null = null;
  private wake: (() => void) | null = null;
  private closed: (() => void) | null = null;
  rows = 0;
  groups = 0;

  constructor(
    options: ColumnarWriterOptions,
    private readonly output: ByteOutput,
  ) {
    this.worker = new Worker(threadUrl(import.meta.url, "columnar", "encoder-thread.js"), { workerData: options });
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
    } else if (message.type === "taken") {
      this.groups = message.groups;
      this.inFlightBytes -= this.inFlight.shift() ?? 0;
      this.signal();
    } else if (message.type === "closed") {
      // The encoder's own counts: what was written, not what was sent.
      this.rows = message.rows;
      this.groups = message.groups;
      this.closed?.();
    } else {
      this.fail(new Error(message.message));
    }
  }

  private fail(error: Error): void {
    this.failure ??= error;
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

  async write(): Promise<void> {
    throw new Error("a threaded columnar writer takes blocks (writeBlock), not records");
  }

  async writeBlock(block: ColumnBlock): Promise<void> {
    this.check();
    const bytes = blockBytes(block);
    while ((this.inFlight.length > 0 && this.inFlightBytes + bytes > BYTES_IN_FLIGHT) || this.waiting > BYTES_WAITING) {
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.check();
    }
    this.inFlight.push(bytes);
    this.inFlightBytes += bytes;
    this.rows += block.length;
    this.worker.postMessage({ type: "block", block } satisfies ToEncoder, blockBuffers(block));
  }

  async close(): Promise<void> {
    this.check();
    const done = new Promise<void>((resolve) => (this.closed = resolve));
    this.worker.postMessage({ type: "close" } satisfies ToEncoder);
    await done;
    await this.written;
    this.check();
    await this.worker.terminate();
  }

  abort(): void {
    this.failure ??= new Error("aborted");
    void this.worker.terminate();
  }
}
