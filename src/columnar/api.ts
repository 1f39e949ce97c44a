// The columnar API, shared by the Node and browser entries (each passes its own way of loading
// parquet-wasm): plans, rows or packed records in; an Arrow table, Arrow IPC bytes, Parquet
// bytes, or a streaming writer out. apache-arrow and parquet-wasm are loaded on first use, so
// importing callforest costs nothing for callers that never write columns.
import type { Table } from "apache-arrow";
import type { ArrowCodec } from "./arrow.js";
import type { PackedBin, PackedTree, Plan, Row } from "../types.js";
import { layoutOf, type Layout, type RecordOf } from "./schema.js";
import { loadFeature } from "../optional-dependency.js";
import type { ByteOutput, ColumnarFormat, ColumnarWriter, ParquetCompression } from "./types.js";

export type { ByteOutput, ColumnarFormat, ColumnarWriter, ParquetCompression } from "./types.js";
export type { Layout as ColumnarLayout } from "./schema.js";

/** Records of one layout, or plans (their rows, or with `layout` their trees or bins). */
export type ColumnarInput = Plan | readonly Plan[] | readonly Row[] | readonly PackedTree[] | readonly PackedBin[];

export interface ColumnarOptions {
  /**
   * What plans give: "rows" (default), "trees" (planned with `{ trees: true }`) or "bins"
   * (planned with `{ capacity }`). For records, their own layout; it names the schema of an
   * empty list.
   */
  layout?: Layout;
  /** Records per row group (record batch), at most; default 4096. */
  rowGroupRows?: number;
  /** Column bytes per row group, about; default 16 MiB. */
  rowGroupBytes?: number;
}

export interface ParquetOptions extends ColumnarOptions {
  /** Default zstd. */
  compression?: ParquetCompression;
}

export interface ColumnarApi {
  /** An Arrow table (apache-arrow), one record batch per row group, SPEC's column types. */
  toArrowTable(input: ColumnarInput, options?: ColumnarOptions): Promise<Table>;
  /** Arrow IPC bytes: the file format (`.arrow`, default) or the stream format (`.arrows`). */
  toArrowIPC(input: ColumnarInput, options?: ColumnarOptions & { format?: "file" | "stream" }): Promise<Uint8Array>;
  /** A Parquet file's bytes. */
  toParquet(input: ColumnarInput, options?: ParquetOptions): Promise<Uint8Array>;
  /**
   * A streaming writer to `output`: `write(records)` as they are planned (before each plan's
   * release), `close()` at the end. Memory stays at about two row groups.
   */
  createColumnarWriter<L extends Layout>(
    output: ByteOutput,
    options: ParquetOptions & { format: ColumnarFormat; layout: L },
  ): Promise<ColumnarWriter<L>>;
}

function isPlan(value: unknown): value is Plan {
  return typeof value === "object" && value !== null && "report" in value && "rows" in value;
}

/** The input's layout and records. */
export function recordsOf(
  input: ColumnarInput,
  layout?: Layout,
): { layout: Layout; records: readonly (Row | PackedTree | PackedBin)[] } {
  const items: readonly unknown[] = Array.isArray(input) ? input : [input];
  if (items.length > 0 && isPlan(items[0])) {
    const chosen = layout ?? "rows";
    const plans = items as readonly Plan[];
    const records = plans.flatMap((plan): readonly (Row | PackedTree | PackedBin)[] =>
      chosen === "rows" ? plan.rows : chosen === "trees" ? plan.trees : plan.bins,
    );
    return { layout: chosen, records };
  }
  const records = items as readonly (Row | PackedTree | PackedBin)[];
  const own = records.length > 0 ? layoutOf(records[0]) : (layout ?? "rows");
  if (layout !== undefined && layout !== own) throw new TypeError(`the records are ${own}, not ${layout}`);
  for (const record of records) {
    if (layoutOf(record) !== own)
      throw new TypeError(`the records mix ${own} and ${layoutOf(record)}: one table holds one layout`);
  }
  return { layout: own, records };
}

/** Concatenated chunks. */
function joined(chunks: readonly Uint8Array[]): Uint8Array {
  let size = 0;
  for (const chunk of chunks) size += chunk.byteLength;
  const out = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
}

/** Loads what columnar output needs (apache-arrow, parquet-wasm), naming them when missing. */
function loadColumnar<T>(load: () => Promise<T>): Promise<T> {
  return loadFeature("Parquet and Arrow output", load);
}

let codec: Promise<ArrowCodec> | null = null;

/** apache-arrow as callers import it (its ES modules): the tables handed out are of their build. */
function arrowCodec(): Promise<ArrowCodec> {
  if (codec === null) {
    codec = loadColumnar(async () => (await import("./arrow-modules.js")).moduleCodec);
    codec.catch(() => (codec = null)); // a missing package is named again next time
  }
  return codec;
}

/**
 * The API, loading parquet-wasm with `loadParquet` when Parquet is first asked for (typed
 * loosely here so that the package's declarations never reach parquet-wasm's).
 */
export function columnarApi(loadParquet: () => Promise<unknown>): ColumnarApi {
  const createColumnarWriter: ColumnarApi["createColumnarWriter"] = async (output, options) => {
    const [{ ColumnarWriter }, arrow] = await Promise.all([loadColumnar(() => import("./writer.js")), arrowCodec()]);
    if (options.format !== "parquet") return new ColumnarWriter(options, output, { arrow });
    const parquet = (await loadColumnar(loadParquet)) as import("./parquet.js").ParquetModule;
    return new ColumnarWriter(options, output, { arrow, parquet });
  };
  /** Every byte `format` gives for the input, through the same writer the CLI streams with. */
  const bytesOf = async (input: ColumnarInput, options: ParquetOptions & { format: ColumnarFormat }) => {
    const { layout, records } = recordsOf(input, options.layout);
    const chunks: Uint8Array[] = [];
    // Chunks may refer to buffers the writer reuses: each is copied as it comes.
    const writer = await createColumnarWriter(
      { write: (chunk) => void chunks.push(chunk.slice()) },
      { ...options, layout },
    );
    await writer.write(records as Iterable<RecordOf<typeof layout>>);
    await writer.close();
    return joined(chunks);
  };
  return {
    async toArrowTable(input, options = {}) {
      const [{ GroupCutter }, arrow] = await Promise.all([loadColumnar(() => import("./writer.js")), arrowCodec()]);
      const { layout, records } = recordsOf(input, options.layout);
      const cutter = new GroupCutter(layout, options.rowGroupRows, options.rowGroupBytes);
      const groups = [];
      for (const record of records) {
        const group = cutter.add(record as never);
        if (group !== null) groups.push(group);
      }
      const last = cutter.end();
      if (last.length > 0 || groups.length === 0) groups.push(last);
      return arrow.table(layout, groups);
    },
    toArrowIPC: (input, options = {}) =>
      bytesOf(input, { ...options, format: options.format === "stream" ? "arrows" : "arrow" }),
    toParquet: (input, options = {}) => bytesOf(input, { ...options, format: "parquet" }),
    createColumnarWriter,
  };
}
