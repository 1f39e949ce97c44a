// Column blocks as Apache Arrow (apache-arrow's RecordBatch over the same buffers, no copy), and
// Arrow IPC bytes (file or stream format) collected as they are written.
import {
  AsyncByteQueue,
  Bool,
  Field,
  Float32,
  Float64,
  Int32,
  List,
  RecordBatch,
  RecordBatchFileWriter,
  RecordBatchStreamWriter,
  Schema,
  Struct,
  Table,
  Utf8,
  makeData,
  type Data,
  type DataType,
} from "apache-arrow";
import type { ColumnBlock, ColumnData } from "./columns.js";
import { columnsOf, type ColumnType, type Layout } from "./schema.js";

/** The Arrow type of a column type (every field non-nullable: SPEC's fields are always there). */
export function arrowType(type: ColumnType): DataType {
  switch (type.kind) {
    case "utf8":
      return new Utf8();
    case "int32":
      return new Int32();
    case "float32":
      return new Float32();
    case "float64":
      return new Float64();
    case "bool":
      return new Bool();
    case "list":
      return new List(new Field("item", arrowType(type.item), false));
    case "struct":
      return new Struct(type.fields.map((field) => new Field(field.name, arrowType(field.type), false)));
  }
}

const schemas = new Map<Layout, Schema>();

/** The Arrow schema of a layout's table (SPEC "Columnar output"). */
export function arrowSchema(layout: Layout): Schema {
  let schema = schemas.get(layout);
  if (schema === undefined) {
    schema = new Schema(
      columnsOf(layout).map((column) => new Field(column.name, arrowType(column.type), column.nullable === true)),
    );
    schemas.set(layout, schema);
  }
  return schema;
}

/** A nullable column's null count and bitmap (none for a column without nulls). */
function nullsOf(valid: Uint8Array | undefined, length: number): { nullCount?: number; nullBitmap?: Uint8Array } {
  if (valid === undefined) return {};
  let count = 0;
  for (let i = 0; i < length; i++) count += (valid[i >> 3] >> (i & 7)) & 1;
  return { nullCount: length - count, nullBitmap: valid };
}

function toData(type: DataType, data: ColumnData, length: number): Data {
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
      const child = toData(list.children[0].type, data.item, data.offsets[length]);
      return makeData({ ...base, ...nullsOf(data.valid, length), type: list, valueOffsets: data.offsets, child });
    }
    case "struct": {
      const struct = type as Struct;
      return makeData({
        ...base,
        type: struct,
        children: struct.children.map((field, i) => toData(field.type, data.fields[i], length)),
      });
    }
    default:
      return makeData({ ...base, type: type as Int32, data: data.values as Int32Array });
  }
}

/** A block as an Arrow record batch over its buffers. */
export function recordBatchOf(block: ColumnBlock): RecordBatch {
  const schema = arrowSchema(block.layout);
  const children = schema.fields.map((field, i) => toData(field.type, block.columns[i], block.length));
  return new RecordBatch(
    schema,
    makeData({ type: new Struct(schema.fields), length: block.length, nullCount: 0, children }),
  );
}

/** Blocks of one layout as an Arrow table (one record batch each). */
export function tableOf(layout: Layout, blocks: readonly ColumnBlock[]): Table {
  return new Table(arrowSchema(layout), blocks.map(recordBatchOf));
}

/** Keeps what an IPC writer writes, to be taken after each batch (the writer's own queue is read asynchronously). */
class Collected extends AsyncByteQueue {
  chunks: Uint8Array[] = [];
  override write(value: Uint8Array) {
    if (value.byteLength > 0) this.chunks.push(value);
  }
  take(): Uint8Array[] {
    const out = this.chunks;
    this.chunks = [];
    return out;
  }
}

/**
 * Arrow IPC bytes of one table, a batch at a time: the IPC file format (`.arrow`, a footer
 * indexes the batches) or the stream format (`.arrows`). The chunks refer to the batches' own
 * buffers: write them before those are reused.
 */
export class IpcEncoder {
  private readonly sink = new Collected();
  private readonly writer: RecordBatchFileWriter | RecordBatchStreamWriter;

  constructor(layout: Layout, format: "file" | "stream") {
    this.writer = format === "file" ? new RecordBatchFileWriter() : new RecordBatchStreamWriter();
    this.writer.reset(this.sink as never, arrowSchema(layout)); // the schema goes first, even with no batch
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

/**
 * One record batch as a whole IPC stream in one buffer (what parquet-wasm reads). With `scratch`,
 * the bytes are put together in its buffer (grown as needed) and the view is valid until its next use.
 */
export function ipcStreamOf(
  layout: Layout,
  batch: RecordBatch,
  scratch: { bytes: Uint8Array } = { bytes: new Uint8Array(0) },
): Uint8Array {
  const encoder = new IpcEncoder(layout, "stream");
  const chunks = [...encoder.write(batch), ...encoder.finish()];
  let size = 0;
  for (const chunk of chunks) size += chunk.byteLength;
  // With room to spare: the next group's stream, a little larger, then fits too.
  if (scratch.bytes.length < size)
    scratch.bytes = new Uint8Array(Math.ceil(Math.max(size * 1.25, scratch.bytes.length * 1.5)));
  const out = scratch.bytes;
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out.subarray(0, size);
}
