// Parquet through parquet-wasm (arrow-rs's writer compiled to WebAssembly): record batches go in
// as Arrow IPC, each batch becomes one row group, and the file's bytes come out as they are
// encoded. The module is passed in, initialised, so Node (file read) and browsers (fetch) load
// it their own way.
import type * as ParquetWasm from "parquet-wasm/esm";

import type { IpcScratch } from "./arrow.js";
import type { ByteOutput, ParquetCompression } from "./types.js";

export type ParquetModule = typeof ParquetWasm;

export const PARQUET_COMPRESSIONS: readonly ParquetCompression[] = ["none", "snappy", "zstd"];

/**
 * The writer's settings: the compression asked for; no dictionary pages (token ids and
 * logprobs are near-unique per row group: a dictionary costs 2-3x the encoding time and gave a
 * larger file); no min/max statistics (~17% of the encoding time, measured, and no use on token
 * lists; parquet-wasm can only turn them off for top-level columns, so they are off for all);
 * and a row group closed after every batch, so the writer never holds more than the batch it
 * is given (a byte limit of 1 is passed after any batch; the row limit never splits one).
 */
function writerProperties(pq: ParquetModule, compression: ParquetCompression): ParquetWasm.WriterProperties {
  const codec =
    compression === "none"
      ? pq.Compression.UNCOMPRESSED
      : compression === "snappy"
        ? pq.Compression.SNAPPY
        : pq.Compression.ZSTD;
  return new pq.WriterPropertiesBuilder()
    .setCompression(codec)
    .setDictionaryEnabled(false)
    .setStatisticsEnabled(pq.EnabledStatistics.None)
    .setMaxRowGroupSize(0x7fffffff)
    .setMaxRowGroupBytes(1)
    .setCreatedBy("callforest (parquet-wasm)")
    .build();
}

function compressionOf(compression: ParquetCompression | undefined): ParquetCompression {
  const chosen = compression ?? "zstd";
  if (!PARQUET_COMPRESSIONS.includes(chosen))
    throw new TypeError(`compression must be none, snappy or zstd, got ${JSON.stringify(compression)}`);
  return chosen;
}

/** A whole table's Parquet bytes at once; `ipcStream` holds its batches (one row group each). */
export function parquetFromIpc(pq: ParquetModule, ipcStream: Uint8Array, compression?: ParquetCompression): Uint8Array {
  const table = pq.Table.fromIPCStream(ipcStream);
  return pq.writeParquet(table, writerProperties(pq, compressionOf(compression)));
}

/** Where a ColumnarWriter's row groups go to become Parquet: on its thread, or on another. */
export interface ParquetEncoder {
  /**
   * One record batch as a whole IPC stream; resolves once the encoder has taken it. The stream's
   * bytes are copied before this returns: its buffer may be reused at once.
   */
  write(ipcStream: Uint8Array): Promise<void>;
  /** Ends the file; `emptyBatch` gives the schema when no batch was written. */
  finish(emptyBatch: () => Uint8Array): Promise<void>;
  abort(): void;
  /** Where to put the next stream together, if the encoder takes its buffer as it is (see ArrowCodec.ipcStream). */
  readonly scratch?: IpcScratch;
}

/**
 * A streaming Parquet writer: write() takes one batch (as an IPC stream) and resolves once the
 * encoder has taken it; the encoded bytes go to `output` as the encoder makes them, in order.
 * At most one batch waits for the encoder, so memory stays at about two row groups.
 */
export class ParquetStreamEncoder implements ParquetEncoder {
  private waiting: ParquetWasm.RecordBatch | null = null;
  private taken: (() => void) | null = null;
  private puller: (() => void) | null = null;
  private ended = false;
  private started = false;
  private failure: { error: unknown } | null = null;
  private readonly encoded: Promise<void>;
  private cancel: (() => void) | null = null;

  constructor(
    private readonly pq: ParquetModule,
    private readonly output: ByteOutput,
    compression?: ParquetCompression,
  ) {
    const input = new ReadableStream<ParquetWasm.RecordBatch>(
      {
        pull: (controller) => this.pull(controller),
      },
      { highWaterMark: 0 },
    );
    // The writer starts when it has seen the first batch: this resolves only after one is written.
    const bytes = pq.transformParquetStream(input, writerProperties(pq, compressionOf(compression)));
    this.encoded = bytes.then((stream: ReadableStream<Uint8Array>) => this.pump(stream));
    this.encoded.catch(() => undefined); // reported by write() and finish()
  }

  private async pump(stream: ReadableStream<Uint8Array>): Promise<void> {
    const reader = stream.getReader();
    this.cancel = () => void reader.cancel().catch(() => undefined);
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        await this.output.write(value);
      }
    } catch (error) {
      this.failure ??= { error };
      reader.cancel().catch(() => undefined);
      this.wakeWriter();
      throw error;
    }
  }

  private pull(controller: ReadableStreamDefaultController<ParquetWasm.RecordBatch>): Promise<void> | void {
    if (this.waiting !== null) {
      controller.enqueue(this.waiting);
      this.waiting = null;
      this.wakeWriter();
      return;
    }
    if (this.ended || this.failure !== null) {
      controller.close();
      return;
    }
    return new Promise<void>((resolve) => {
      this.puller = () => {
        this.puller = null;
        resolve(this.pull(controller) ?? undefined);
      };
    });
  }

  private wakeWriter(): void {
    const taken = this.taken;
    this.taken = null;
    taken?.();
  }

  /** One record batch, as a whole IPC stream (schema and the batch). */
  async write(ipcStream: Uint8Array): Promise<void> {
    this.check();
    const table = this.pq.Table.fromIPCStream(ipcStream);
    const batch = table.recordBatch(0);
    table.free();
    if (batch === undefined) throw new Error("parquet: the IPC stream holds no record batch");
    this.started = true;
    await new Promise<void>((resolve) => {
      this.waiting = batch;
      this.taken = resolve;
      this.puller?.();
    });
    this.check();
  }

  /**
   * Ends the file (its footer) and waits for every byte to reach `output`. `emptyBatch` is
   * written first when no batch was: the writer takes its schema from the first batch.
   */
  async finish(emptyBatch: () => Uint8Array): Promise<void> {
    if (!this.started) await this.write(emptyBatch());
    this.ended = true;
    this.puller?.();
    await this.encoded;
    this.check();
  }

  /** Stops encoding (after a failure elsewhere); nothing more reaches `output`. */
  abort(): void {
    this.failure ??= { error: new Error("aborted") };
    this.ended = true;
    this.puller?.();
    this.cancel?.();
    this.wakeWriter();
  }

  private check(): void {
    if (this.failure !== null) throw this.failure.error;
  }
}
