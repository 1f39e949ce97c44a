// The columnar API's public types, apart from the modules that implement them, so that the
// package's type declarations never reach parquet-wasm's (which need the DOM's and WebAssembly's).
import type { Layout, RecordOf } from "./schema.js";
import type { ColumnBlock } from "./columns.js";

export type ParquetCompression = "none" | "snappy" | "zstd";

/** `parquet`; `arrow`: the Arrow IPC file format; `arrows`: the Arrow IPC stream format. */
export type ColumnarFormat = "parquet" | "arrow" | "arrows";

/**
 * Where encoded bytes go; a returned promise is waited for (backpressure). An output that calls
 * `written` once it is done with `bytes` lets the writer reuse the memory under them (optional).
 */
export interface ByteOutput {
  write(bytes: Uint8Array, written?: () => void): void | Promise<void>;
}

/** A streaming writer of one table (see createColumnarWriter). */
export interface ColumnarWriter<L extends Layout = Layout> {
  /** Writes records (views into a plan: write them before `plan.release()`). */
  write(records: Iterable<RecordOf<L>>): Promise<void>;
  /** Writes the records of a block (built elsewhere, e.g. on a worker thread). */
  writeBlock(block: ColumnBlock): Promise<void>;
  /** Writes what is left and the file's end (footer); resolves once every byte is out. */
  close(): Promise<void>;
  /** Stops after a failure elsewhere: nothing more is written. */
  abort(): void;
  /** Records written so far. */
  readonly rows: number;
  /** Row groups (record batches) written so far. */
  readonly groups: number;
}
