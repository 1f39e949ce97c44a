// A streaming columnar writer: records (or blocks of them, from worker threads) in, Parquet or
// Arrow IPC bytes out, a row group (record batch) at a time. Where a group ends depends only on
// the records (their count and byte weights), never on how they arrived, so the bytes are the
// same however the input was split among threads.
import type { ArrowCodec, IpcEncoder } from "./arrow.js";
import { RecordColumns, blockBytes, recycleBlock, type ColumnBlock } from "./columns.js";
import { ParquetStreamEncoder, type ParquetEncoder, type ParquetModule } from "./parquet.js";
import type { Layout, RecordOf } from "./schema.js";
import type { ByteOutput, ColumnarFormat, ColumnarWriter as ColumnarWriterType, ParquetCompression } from "./types.js";

export type { ColumnarFormat } from "./types.js";

export const COLUMNAR_FORMATS: readonly ColumnarFormat[] = ["parquet", "arrow", "arrows"];

/** Records per row group, at most (a group also ends once it holds DEFAULT_GROUP_BYTES). */
export const DEFAULT_ROW_GROUP_ROWS = 4096;
/**
 * Column bytes per row group, about (the group ends with the record that reaches it). The
 * writer holds one group being filled, one being encoded, and the encoder's own copy (and, for
 * `direct`, the groups one rollout's records complete until the rollout is done), so this
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
  /** Records will also come through `direct` (see DirectColumns), from a planning thread on this one. */
  direct?: boolean;
  /**
   * Arrow IPC: the output queues what it is given (a Node stream), so a row group's chunks go to
   * it at once and the writer waits for them only before the next group's: the group is written
   * while the next one is planned and filled, instead of planning waiting on the disk.
   */
  queued?: boolean;
}

/**
 * What a finished row group is over: `reused`, a view over buffers the next group reuses (use it
 * up, copy it, before adding more); `copied`, exact-size copies (the builder keeps its buffers);
 * `handedOff`, the builder's own buffers, which go with the group (RecordColumns.handOff: no copy,
 * for groups used up on this thread and recycled, and the only kind rollback() takes back).
 */
export type GroupBuffers = "reused" | "copied" | "handedOff";

/**
 * Cuts records into row groups: a group ends with the record that brings it to `rows` records
 * or `bytes` column bytes. Records given one by one or in blocks are cut at the same places.
 */
export class GroupCutter<L extends Layout = Layout> {
  private readonly group: RecordColumns<L>;
  private groupBytes = 0;
  /** `reused`: the last group handed out is over the group's buffers, cleared before the next record. */
  private handedOut = false;

  constructor(
    layout: L,
    private readonly rowLimit = DEFAULT_ROW_GROUP_ROWS,
    private readonly byteLimit = DEFAULT_GROUP_BYTES,
    private readonly buffers: GroupBuffers = "copied",
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

  /** Where the records so far end: see rollback. */
  mark(): CutMark {
    this.reclaim();
    return { length: this.group.length, bytes: this.groupBytes };
  }

  /**
   * Back to `mark`: the records added since are dropped. `completed` is the first group handed
   * out since the mark, if one was (its first records are those the group held at the mark): its
   * buffers become the group's again. Allocates nothing, so it cannot fail for want of memory.
   */
  rollback(mark: CutMark, completed: ColumnBlock | undefined): void {
    this.reclaim();
    if (completed === undefined) {
      this.group.truncate(mark.length);
    } else {
      if (this.buffers !== "handedOff") throw new Error("GroupCutter: only handed-off groups can be taken back");
      this.group.restore(completed, mark.length);
    }
    this.groupBytes = mark.bytes;
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
    if (!this.handedOut) return; // only with `reused`
    this.handedOut = false;
    this.group.clear();
  }

  private take(): ColumnBlock {
    this.groupBytes = 0;
    if (this.buffers === "copied") return this.group.finish();
    if (this.buffers === "handedOff") return this.group.handOff();
    this.handedOut = true;
    return this.group.view();
  }
}

/** Where the records given to a GroupCutter so far end. */
export interface CutMark {
  length: number;
  bytes: number;
}

/**
 * A writer's row groups filled straight from a plan's records on the writer's own thread (`rows`,
 * for the records it plans there), with no block of columns in between: add() copies a record's
 * arrays into the open group at once, as it must while the plan is live, and the groups they
 * complete wait in a queue for drain() to encode. A rollout that fails half-way is undone with
 * mark() and rollback().
 */
export interface DirectColumns<L extends Layout = Layout> {
  add(record: RecordOf<L>): void;
  /** Column bytes of the completed groups waiting for drain(). */
  readonly bytes: number;
  mark(): DirectMark;
  rollback(mark: DirectMark): void;
  /** Encodes and writes the completed groups. */
  drain(): Promise<void>;
}

export interface DirectMark {
  /** Groups completed through add() before the mark. */
  groups: number;
  cut: CutMark;
}

/** What a ColumnarWriter writes with. */
export interface WriterLibraries {
  /** The apache-arrow build (Arrow IPC, and the IPC form parquet-wasm reads). */
  arrow: ArrowCodec;
  /** parquet-wasm, for Parquet encoded on this thread ... */
  parquet?: ParquetModule;
  /** ... or where Parquet is encoded instead (another thread). */
  encoder?: ParquetEncoder;
}

export class ColumnarWriter<L extends Layout = Layout> implements ColumnarWriterType<L> {
  private readonly cutter: GroupCutter<L>;
  private readonly ipc: IpcEncoder | null;
  private readonly parquet: ParquetEncoder | null;
  private readonly arrow: ArrowCodec;
  /** Whether each group owns its buffers (else they are the next group's). */
  private readonly ownGroups: boolean;
  private closed = false;
  /** Where each group's IPC stream is put together for the Parquet encoder (reused: it copies it in). */
  private readonly scratch = { bytes: new Uint8Array(0) };
  /** With `queued`: settles once the output has taken the last group written (rejects as it does). */
  private lastGroup: Promise<void> = Promise.resolve();
  /** Groups completed by direct.add() and not yet encoded, and how many it has completed in all. */
  private readonly waiting: ColumnBlock[] = [];
  private completedGroups = 0;
  private waitingBytes = 0;
  /** Records written so far. */
  rows = 0;
  /** Row groups (record batches) written so far. */
  groups = 0;
  /** With the `direct` option. */
  readonly direct: DirectColumns<L> | null;

  constructor(
    readonly options: ColumnarWriterOptions & { layout: L },
    private readonly output: ByteOutput,
    using: WriterLibraries,
  ) {
    this.arrow = using.arrow;
    const { format, layout } = options;
    if (!COLUMNAR_FORMATS.includes(format))
      throw new TypeError(`format must be parquet, arrow or arrows, got ${JSON.stringify(format)}`);
    // Groups may wait in a queue (direct), and IPC chunks refer to a group's buffers until
    // written out: each of those groups has buffers of its own, handed off to it where they are
    // recycled once used up (direct: `rows`), exact-size copies elsewhere (a library writer's
    // buffers would otherwise keep the builders' spare room). Parquet copies a group (into the
    // encoder) before the next, so otherwise its buffers are reused.
    const buffers = options.direct === true ? "handedOff" : format === "parquet" ? "reused" : "copied";
    this.ownGroups = buffers !== "reused";
    this.cutter = new GroupCutter(layout, options.rowGroupRows, options.rowGroupBytes, buffers);
    if (format === "parquet") {
      if (using.encoder === undefined && using.parquet === undefined)
        throw new TypeError("Parquet output needs the parquet-wasm module");
      this.ipc = null;
      this.parquet = using.encoder ?? new ParquetStreamEncoder(using.parquet!, output, options.compression);
    } else {
      this.ipc = this.arrow.ipcEncoder(layout, format === "arrow" ? "file" : "stream");
      this.parquet = null;
    }
    this.direct = options.direct === true ? this.directColumns() : null;
  }

  private directColumns(): DirectColumns<L> {
    const writer = this;
    return {
      add: (record) => {
        writer.checkOpen();
        const group = writer.cutter.add(record);
        if (group === null) return;
        writer.completedGroups++;
        writer.waiting.push(group);
        writer.waitingBytes += blockBytes(group);
      },
      get bytes() {
        return writer.waitingBytes;
      },
      mark: () => ({ groups: writer.completedGroups, cut: writer.cutter.mark() }),
      rollback: (mark) => {
        const since = writer.completedGroups - mark.groups;
        if (since > writer.waiting.length) throw new Error("DirectColumns: a rollback past a drain");
        const dropped = writer.waiting.splice(writer.waiting.length - since);
        writer.completedGroups = mark.groups;
        writer.cutter.rollback(mark.cut, dropped[0]); // the first one's buffers are the group's again
        for (const [i, group] of dropped.entries()) {
          writer.waitingBytes -= blockBytes(group);
          if (i > 0) recycleBlock(group);
        }
      },
      drain: () => writer.drain(),
    };
  }

  private async drain(): Promise<void> {
    while (this.waiting.length > 0) {
      const group = this.waiting.shift()!;
      this.waitingBytes -= blockBytes(group);
      await this.encode(group);
    }
  }

  /** Writes records (views into a plan: write them before `plan.release()`). */
  async write(records: Iterable<RecordOf<L>>): Promise<void> {
    this.checkOpen();
    await this.drain();
    for (const record of records) {
      const group = this.cutter.add(record);
      if (group !== null) await this.encode(group);
    }
  }

  /** Writes the records of a block (built elsewhere, e.g. on a worker thread). */
  async writeBlock(block: ColumnBlock): Promise<void> {
    this.checkOpen();
    await this.drain();
    for (const group of this.cutter.addBlock(block)) await this.encode(group);
  }

  private async encode(group: ColumnBlock): Promise<void> {
    const batch = this.arrow.recordBatch(group);
    this.rows += group.length;
    this.groups++;
    if (this.parquet !== null) {
      const stream = this.arrow.ipcStream(this.options.layout, batch, this.parquet.scratch ?? this.scratch);
      if (this.ownGroups) recycleBlock(group); // copied into the stream
      await this.parquet.write(stream);
      return;
    }
    // The IPC chunks are views of the group's buffers (its own: see GroupCutter), which are
    // recycled once the output says it is done with every chunk.
    const chunks = this.ipc!.write(batch);
    let left = chunks.length;
    const written = () => {
      if (--left === 0) recycleBlock(group);
    };
    if (this.options.queued !== true) {
      for (const chunk of chunks) await this.output.write(chunk, written);
      return;
    }
    // One group in the output's queue at a time: memory stays bounded as when waiting on each chunk.
    await this.lastGroup;
    const waits: Promise<void>[] = [];
    for (const chunk of chunks) {
      const wait = this.output.write(chunk, written);
      if (wait !== undefined) waits.push(wait);
    }
    this.lastGroup = Promise.all(waits).then(() => undefined);
    this.lastGroup.catch(() => undefined); // seen by the next encode() or close()
  }

  /** Writes what is left and the file's end (footer); resolves once every byte is out. */
  async close(): Promise<void> {
    this.checkOpen();
    await this.drain();
    this.closed = true;
    const last = this.cutter.end();
    if (last.length > 0) await this.encode(last);
    if (this.parquet !== null) {
      // No batch at all: an empty one, for the schema.
      await this.parquet.finish(() => this.arrow.ipcStream(this.options.layout, this.arrow.recordBatch(last)));
      return;
    }
    await this.lastGroup;
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
