// Column blocks as Apache Arrow (apache-arrow's RecordBatch over the same buffers, no copy), and
// Arrow IPC bytes (file or stream format) collected as they are written. The apache-arrow build
// is given (ArrowCodec): the library's API hands out tables of the build its callers import, and
// the CLI loads the package's one-file build, which starts several times faster than its 158
// ES modules (load-node.ts); both write the same bytes.
import type {
  AsyncByteQueue,
  Data,
  DataType,
  List,
  RecordBatch,
  RecordBatchFileWriter,
  RecordBatchStreamWriter,
  Schema,
  Struct,
  Table,
  Utf8,
  Bool,
  Int32,
} from "apache-arrow";
import type { ColumnBlock, ColumnData } from "./columns.js";
import { columnsOf, type ColumnType, type Layout } from "./schema.js";

/** What is used of an apache-arrow build (its ES modules, or its one-file bundle): arrow-names.ts. */
export type ArrowLibrary = typeof import("./arrow-names.js");

/** A nullable column's null count and bitmap (none for a column without nulls). */
function nullsOf(valid: Uint8Array | undefined, length: number): { nullCount?: number; nullBitmap?: Uint8Array } {
  if (valid === undefined) return {};
  let count = 0;
  for (let i = 0; i < length; i++) count += (valid[i >> 3] >> (i & 7)) & 1;
  return { nullCount: length - count, nullBitmap: valid };
}

/**
 * Keeps what an IPC writer writes, to be taken after each batch (the writer's own queue is read
 * asynchronously). Made per build: it extends that build's AsyncByteQueue.
 */
function collectedClass(arrow: ArrowLibrary) {
  return class Collected extends (arrow.AsyncByteQueue as unknown as new () => AsyncByteQueue) {
    chunks: Uint8Array[] = [];
    override write(value: Uint8Array) {
      if (value.byteLength > 0) this.chunks.push(value);
    }
    take(): Uint8Array[] {
      const out = this.chunks;
      this.chunks = [];
      return out;
    }
  };
}

/** Where IPC streams are put together, one after another (see ArrowCodec.ipcStream). */
export interface IpcScratch {
  bytes: Uint8Array;
  /** Where a larger buffer comes from (a fresh ArrayBuffer when not given). */
  grow?(bytes: number): Uint8Array;
}

/** Column blocks as Arrow record batches, tables and IPC bytes, with one apache-arrow build. */
export class ArrowCodec {
  private readonly schemas = new Map<Layout, Schema>();
  private readonly Collected;

  constructor(readonly arrow: ArrowLibrary) {
    this.Collected = collectedClass(arrow);
  }

  /** The Arrow type of a column type (every field non-nullable: SPEC's fields are always there). */
  type(type: ColumnType): DataType {
    const arrow = this.arrow;
    switch (type.kind) {
      case "utf8":
        return new arrow.Utf8();
      case "int32":
        return new arrow.Int32();
      case "float32":
        return new arrow.Float32();
      case "float64":
        return new arrow.Float64();
      case "bool":
        return new arrow.Bool();
      case "list":
        return new arrow.List(new arrow.Field("item", this.type(type.item), false));
      case "struct":
        return new arrow.Struct(type.fields.map((field) => new arrow.Field(field.name, this.type(field.type), false)));
    }
  }

  /** The Arrow schema of a layout's table (SPEC "Columnar output"). */
  schema(layout: Layout): Schema {
    let schema = this.schemas.get(layout);
    if (schema === undefined) {
      const { Field, Schema } = this.arrow;
      schema = new Schema(
        columnsOf(layout).map((column) => new Field(column.name, this.type(column.type), column.nullable === true)),
      );
      this.schemas.set(layout, schema);
    }
    return schema;
  }

  private data(type: DataType, data: ColumnData, length: number): Data {
    const { makeData } = this.arrow;
    const base = { length, nullCount: 0 };
    switch (data.kind) {
      case "utf8":
        return makeData({
          ...base,
          ...nullsOf(data.valid, length),
          type: type as Utf8,
          valueOffsets: data.offsets,
          data: data.bytes,
        });
      case "bool":
        return makeData({ ...base, type: type as Bool, data: data.bits });
      case "list": {
        const list = type as List;
        const child = this.data(list.children[0].type, data.item, data.offsets[length]);
        return makeData({ ...base, ...nullsOf(data.valid, length), type: list, valueOffsets: data.offsets, child });
      }
      case "struct": {
        const struct = type as Struct;
        return makeData({
          ...base,
          type: struct,
          children: struct.children.map((field, i) => this.data(field.type, data.fields[i], length)),
        });
      }
      default:
        return makeData({ ...base, type: type as Int32, data: data.values as Int32Array });
    }
  }

  /** A block as an Arrow record batch over its buffers. */
  recordBatch(block: ColumnBlock): RecordBatch {
    const schema = this.schema(block.layout);
    const children = schema.fields.map((field, i) => this.data(field.type, block.columns[i], block.length));
    return new this.arrow.RecordBatch(
      schema,
      this.arrow.makeData({ type: new this.arrow.Struct(schema.fields), length: block.length, nullCount: 0, children }),
    );
  }

  /** Blocks of one layout as an Arrow table (one record batch each). */
  table(layout: Layout, blocks: readonly ColumnBlock[]): Table {
    return new this.arrow.Table(
      this.schema(layout),
      blocks.map((block) => this.recordBatch(block)),
    );
  }

  /** A writer of one table's IPC bytes, a batch at a time (see IpcEncoder). */
  ipcEncoder(layout: Layout, format: "file" | "stream"): IpcEncoder {
    const writer =
      format === "file" ? new this.arrow.RecordBatchFileWriter() : new this.arrow.RecordBatchStreamWriter();
    return new IpcEncoder(writer, new this.Collected(), this.schema(layout));
  }

  /**
   * One record batch as a whole IPC stream in one buffer (what parquet-wasm reads). With
   * `scratch`, the bytes are put together in its buffer (grown as needed) and the view is valid
   * until its next use.
   */
  ipcStream(layout: Layout, batch: RecordBatch, scratch: IpcScratch = { bytes: new Uint8Array(0) }): Uint8Array {
    const encoder = this.ipcEncoder(layout, "stream");
    const chunks = [...encoder.write(batch), ...encoder.finish()];
    let size = 0;
    for (const chunk of chunks) size += chunk.byteLength;
    // With room to spare: the next group's stream, a little larger, then fits too.
    if (scratch.bytes.length < size) {
      const grown = Math.ceil(Math.max(size * 1.25, scratch.bytes.length * 1.5));
      scratch.bytes = scratch.grow?.(grown) ?? new Uint8Array(grown);
    }
    const out = scratch.bytes;
    let at = 0;
    for (const chunk of chunks) {
      out.set(chunk, at);
      at += chunk.byteLength;
    }
    return out.subarray(0, size);
  }
}

/**
 * Arrow IPC bytes of one table, a batch at a time: the IPC file format (`.arrow`, a footer
 * indexes the batches) or the stream format (`.arrows`). The chunks refer to the batches' own
 * buffers: write them before those are reused.
 */
export class IpcEncoder {
  constructor(
    private readonly writer: RecordBatchFileWriter | RecordBatchStreamWriter,
    private readonly sink: AsyncByteQueue & { take(): Uint8Array[] },
    schema: Schema,
  ) {
    this.writer.reset(sink as never, schema); // the schema goes first, even with no batch
  }

  write(batch: RecordBatch): Uint8Array[] {
    this.writer.write(batch);
    return this.sink.take();
  }

  /** The end: the file's footer, or the stream's end-of-stream marker. */
  finish(): Uint8Array[] {
    this.writer.finish();
    return this.sink.take();
  }
}
