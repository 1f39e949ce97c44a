// A streaming columnar writer: records (or blocks of them, from worker threads) in, Parquet or
// Arrow IPC bytes out, a row group (record batch) at a time. Where a group ends depends only on
// the records (their count and byte weights), never on how they arrived, so the bytes are the
// same however the input was split among threads.
import { IpcEncoder, ipcStreamOf, recordBatchOf } from "./arrow.js";
import { RecordColumns, recycleBlock, type ColumnBlock } from "./columns.js";
import { ParquetStreamEncoder, type ParquetModule } from "./parquet.js";
import type { Layout, RecordOf } from "./schema.js";
import type { ByteOutput, ColumnarFormat, ColumnarWriter as ColumnarWriterType, ParquetCompression } from "./types.js";

export type { ColumnarFormat } from "./types.js";

export const COLUMNAR_FORMATS: readonly ColumnarFormat[] = ["parquet", "arrow", "arrows"];

/** Records per row group, at most (a group also ends once it holds DEFAULT_GROUP_BYTES). */
export const DEFAULT_ROW_GROUP_ROWS = 4096;
/**
 * Column bytes per row group, about (the group ends with the record that reaches it). The
 * writer holds one group being filled, one being encoded, and the encoder's own copy, so this
 * bounds its memory to a small multiple of it, whatever the input's size.
 */
export const DEFAULT_GROUP_BYTES = 16 << 20;

export interface ColumnarWriterOptions {
  format: ColumnarFormat;
  layout: Layout;
  /** Parquet only; default zstd. */
  compression?: ParquetCompression;
  rowGroupRows?: number;
  rowGroupBytes?: number;
}

/**
 * Cuts records into row groups: a group ends with the record that brings it to `rows` records
 * or `bytes` column bytes. Records given one by one or in blocks are cut at the same places.
 */
export class GroupCutter<L extends Layout = Layout> {
  private readonly group: RecordColumns<L>;
  private groupBytes = 0;
  /** With `reuse`: the last group handed out is over the group's buffers, cleared before the next record. */
  private handedOut = false;

  /**
   * With `reuse`, each group handed out is a view over buffers the next one reuses: use it up
   * (copy it) before adding more. Without, each group owns its buffers.
   */
  constructor(
    layout: L,
    private readonly rowLimit = DEFAULT_ROW_GROUP_ROWS,
    private readonly byteLimit = DEFAULT_GROUP_BYTES,
    private readonly reuse = false,
  ) {
    if (!(rowLimit >= 1) || !(byteLimit >= 1))
      throw new RangeError(`rowGroupRows and rowGroupBytes must be at least 1, got ${rowLimit} and ${byteLimit}`);
    this.group = new RecordColumns(layout, 2 * byteLimit);
  }

  /** Adds a record; returns the group it completed, if it did. */
  add(record: RecordOf<L>): ColumnBlock | null {
    this.reclaim();
    const before = this.group.bytes;
    this.group.add(record);
    this.groupBytes += this.group.bytes - before;
    return this.full() ? this.take() : null;
  }

  /** Adds a block's records, yielding each group they complete, in order, as it completes. */
  *addBlock(block: ColumnBlock): Generator<ColumnBlock> {
    let from = 0;
    while (from < block.length) {
      this.reclaim();
      let to = from;
      while (to < block.length && !this.full(this.group.length + to - from)) this.groupBytes += block.weights[to++];
      this.group.addRange(block, from, to);
      from = to;
      if (this.full()) yield this.take();
    }
  }

  /** The last group (possibly empty). */
  end(): ColumnBlock {
    this.reclaim();
    return this.take();
  }

  private full(rows = this.group.length): boolean {
    return rows >= this.rowLimit || this.groupBytes >= this.byteLimit;
  }

  private reclaim(): void {
    if (!this.handedOut) return;
    this.handedOut = false;
    this.group.clear();
  }

  private take(): ColumnBlock {
    this.groupBytes = 0;
    if (!this.reuse) return this.group.finish();
    this.handedOut = true;
    return this.group.view();
  }
}

export class ColumnarWriter<L extends Layout = Layout> implements ColumnarWriterType<L> {
  private readonly cutter: GroupCutter<L>;
  private readonly ipc: IpcEncoder | null;
  private readonly parquet: ParquetStreamEncoder | null;
  private closed = false;
  /** Where each group's IPC stream is put together for the Parquet encoder (reused: it copies it in). */
  private readonly scratch = { bytes: new Uint8Array(0) };
  /** Records written so far. */
  rows = 0;
  /** Row groups (record batches) written so far. */
  groups = 0;

  constructor(
    readonly options: ColumnarWriterOptions & { layout: L },
    private readonly output: ByteOutput,
    pq: ParquetModule | null,
  ) {
    const { format, layout } = options;
    if (!COLUMNAR_FORMATS.includes(format))
      throw new TypeError(`format must be parquet, arrow or arrows, got ${JSON.stringify(format)}`);
    // Parquet copies each group (into the encoder) before the next: its buffers are reused. IPC
    // chunks refer to them until written out: each group gets its own.
    this.cutter = new GroupCutter(layout, options.rowGroupRows, options.rowGroupBytes, format === "parquet");
    if (format === "parquet") {
      if (pq === null) throw new TypeError("Parquet output needs the parquet-wasm module");
      this.ipc = null;
      this.parquet = new ParquetStreamEncoder(pq, output, options.compression);
    } else {
      this.ipc = new IpcEncoder(layout, format === "arrow" ? "file" : "stream");
      this.parquet = null;
    }
  }

  /** Writes records (views into a plan: write them before `plan.release()`). */
  async write(records: Iterable<RecordOf<L>>): Promise<void> {
    this.checkOpen();
    for (const record of records) {
      const group = this.cutter.add(record);
      if (group !== null) await this.encode(group);
    }
  }

  /** Writes the records of a block (built elsewhere, e.g. on a worker thread). */
  async writeBlock(block: ColumnBlock): Promise<void> {
    this.checkOpen();
    for (const group of this.cutter.addBlock(block)) await this.encode(group);
  }

  private async encode(group: ColumnBlock): Promise<void> {
    const batch = recordBatchOf(group);
    this.rows += group.length;
    this.groups++;
    if (this.parquet !== null) {
      await this.parquet.write(ipcStreamOf(this.options.layout, batch, this.scratch));
      return;
    }
    // The IPC chunks are views of the group's buffers (its own: see GroupCutter), which are
    // recycled once the output says it is done with every chunk.
    const chunks = this.ipc!.write(batch);
    let left = chunks.length;
    const written = () => {
      if (--left === 0) recycleBlock(group);
    };
    for (const chunk of chunks) await this.output.write(chunk, written);
  }

  /** Writes what is left and the file's end (footer); resolves once every byte is out. */
  async close(): Promise<void> {
    this.checkOpen();
    this.closed = true;
    const last = this.cutter.end();
    if (last.length > 0) await this.encode(last);
    if (this.parquet !== null) {
      // No batch at all: an empty one, for the schema.
      await this.parquet.finish(() => ipcStreamOf(this.options.layout, recordBatchOf(last)));
      return;
    }
    for (const chunk of this.ipc!.finish()) await this.output.write(chunk);
  }

  /** Stops after a failure elsewhere: nothing more is written. */
  abort(): void {
    this.closed = true;
    this.parquet?.abort();
  }

  private checkOpen(): void {
    if (this.closed) throw new Error("the columnar writer is closed");
  }
}
