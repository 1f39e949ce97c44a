// Column builders: records (rows, packed trees, bins) in, Arrow-layout buffers out (offsets,
// values, bitmaps) as plain typed arrays. A finished ColumnBlock is plain data: a worker thread
// transfers its buffers to the main thread, which copies row ranges of blocks into row groups.
import { BitRun, Growable, recycledArray, recycler } from "./buffers.js";
import { columnsOf, type Bits, type ColumnType, type Layout, type RecordOf } from "./schema.js";

/** One column's buffers, laid out as Arrow lays out its type (see schema.ts). */
export type ColumnData =
  | { kind: "utf8"; offsets: Int32Array; bytes: Uint8Array; valid?: Uint8Array }
  | { kind: "int32"; values: Int32Array }
  | { kind: "float32"; values: Float32Array }
  | { kind: "float64"; values: Float64Array }
  | { kind: "bool"; bits: Uint8Array; length: number }
  | { kind: "list"; offsets: Int32Array; item: ColumnData; valid?: Uint8Array }
  | { kind: "struct"; length: number; fields: ColumnData[] };

/** Finished columns of `length` records of one layout. */
export interface ColumnBlock {
  layout: Layout;
  length: number;
  /** In the layout's column order (schema.ts). */
  columns: ColumnData[];
  /** Bytes each record added to the columns: where row groups are cut, whichever block a record came in. */
  weights: Float64Array;
}

interface Builder {
  readonly length: number;
  /** Bytes of buffers filled so far. */
  bytes(): number;
  append(value: unknown): void;
  /** Appends each item of a list value; returns how many. */
  appendItems(values: unknown): number;
  appendRange(data: ColumnData, from: number, to: number): void;
  truncate(length: number): void;
  /** The values so far, as views over this builder's buffers (valid until its next change). */
  finish(): ColumnData;
  /** The values so far, handed out with their buffers; this starts empty again (see Growable.detach). */
  detach(keepBytes: number): ColumnData;
  /** Takes back what detach() handed out, as its first `length` values (see Growable.restore). */
  restore(data: ColumnData, length: number): void;
}

type NumericKind = "int32" | "float32" | "float64";

class NumberBuilder implements Builder {
  private values: Growable<Int32Array | Float32Array | Float64Array>;

  constructor(private readonly kind: NumericKind) {
    this.values =
      kind === "int32"
        ? new Growable(Int32Array)
        : kind === "float32"
          ? new Growable(Float32Array)
          : new Growable(Float64Array);
  }
  get length() {
    return this.values.length;
  }
  bytes() {
    return this.values.length * this.values.data.BYTES_PER_ELEMENT;
  }
  append(value: unknown) {
    this.values.push(value as number);
  }
  appendItems(values: unknown) {
    const list = values as ArrayLike<number>;
    this.values.pushAll(list);
    return list.length;
  }
  appendRange(data: ColumnData, from: number, to: number) {
    this.values.pushAll((data as { values: Int32Array | Float32Array | Float64Array }).values.subarray(from, to));
  }
  truncate(length: number) {
    this.values.length = Math.min(length, this.values.length);
  }
  finish(): ColumnData {
    return { kind: this.kind, values: this.values.view() } as ColumnData;
  }
  detach(keepBytes: number): ColumnData {
    return { kind: this.kind, values: this.values.detach(keepBytes) } as ColumnData;
  }
  restore(data: ColumnData, length: number) {
    this.values.restore((data as { values: Int32Array | Float32Array | Float64Array }).values, length);
  }
}

class BoolBuilder implements Builder {
  private readonly run = new BitRun();
  get length() {
    return this.run.length;
  }
  bytes() {
    // Fractional: a record's weight must not depend on where in a byte its bits start.
    return this.run.length / 8;
  }
  append(value: unknown) {
    this.run.push(value === true);
  }
  appendItems(values: unknown) {
    const { bits, length } = values as Bits;
    this.run.pushBits(bits, 0, length);
    return length;
  }
  appendRange(data: ColumnData, from: number, to: number) {
    this.run.pushBits((data as { bits: Uint8Array }).bits, from, to - from);
  }
  truncate(length: number) {
    this.run.truncate(length);
  }
  finish(): ColumnData {
    return { kind: "bool", bits: this.run.view(), length: this.run.length };
  }
  detach(): ColumnData {
    const length = this.run.length;
    return { kind: "bool", bits: this.run.detach(), length };
  }
  restore(data: ColumnData, length: number) {
    const { bits, length: count } = data as { bits: Uint8Array; length: number };
    this.run.restore(bits, count, length);
  }
}

const encoder = new TextEncoder();

class Utf8Builder implements Builder {
  private readonly offsets = new Growable(Int32Array);
  private readonly data = new Growable(Uint8Array, 256);

  /** Which values are not null (a nullable column only). */
  private readonly valid: BitRun | null;

  constructor(nullable = false) {
    this.offsets.push(0);
    this.valid = nullable ? new BitRun() : null;
  }
  get length() {
    return this.offsets.length - 1;
  }
  bytes() {
    return this.offsets.length * 4 + this.data.length;
  }
  append(value: unknown) {
    if (this.valid !== null) this.valid.push(value !== null);
    if (value === null) {
      this.offsets.push(this.data.length);
      return;
    }
    const text = value as string;
    this.data.reserve(text.length * 3);
    this.data.length += encoder.encodeInto(text, this.data.data.subarray(this.data.length)).written;
    this.offsets.push(this.data.length);
  }
  appendItems(values: unknown) {
    const list = values as readonly string[];
    for (const text of list) this.append(text);
    return list.length;
  }
  appendRange(data: ColumnData, from: number, to: number) {
    const { offsets, bytes, valid } = data as { offsets: Int32Array; bytes: Uint8Array; valid?: Uint8Array };
    if (this.valid !== null) {
      if (valid !== undefined) this.valid.pushBits(valid, from, to - from);
      else for (let i = from; i < to; i++) this.valid.push(true);
    }
    appendOffsets(this.offsets, offsets, from, to, this.data.length);
    this.data.pushAll(bytes.subarray(offsets[from], offsets[to]));
  }
  truncate(length: number) {
    // Not only when shorter: an append that failed half-way may have added bytes or a validity
    // bit but not yet the offset that counts the value.
    length = Math.min(length, this.length);
    this.offsets.length = length + 1;
    this.data.length = this.offsets.data[length];
    this.valid?.truncate(length);
  }
  finish(): ColumnData {
    const data: ColumnData = { kind: "utf8", offsets: this.offsets.view(), bytes: this.data.view() };
    if (this.valid !== null) data.valid = this.valid.view();
    return data;
  }
  detach(keepBytes: number): ColumnData {
    const data: ColumnData = {
      kind: "utf8",
      offsets: this.offsets.detach(keepBytes, 0),
      bytes: this.data.detach(keepBytes),
    };
    if (this.valid !== null) data.valid = this.valid.detach();
    return data;
  }
  restore(data: ColumnData, length: number) {
    const { offsets, bytes, valid } = data as { offsets: Int32Array; bytes: Uint8Array; valid?: Uint8Array };
    this.offsets.restore(offsets, length + 1);
    this.data.restore(bytes, offsets[length]);
    if (this.valid !== null) this.valid.restore(valid!, offsets.length - 1, length);
  }
}

class ListBuilder implements Builder {
  private readonly offsets = new Growable(Int32Array);
  /** Which values are not null (a nullable column only). */
  private readonly valid: BitRun | null;

  constructor(
    private readonly item: Builder,
    nullable = false,
  ) {
    this.offsets.push(0);
    this.valid = nullable ? new BitRun() : null;
  }
  get length() {
    return this.offsets.length - 1;
  }
  bytes() {
    return this.offsets.length * 4 + this.item.bytes();
  }
  append(value: unknown) {
    if (this.valid !== null) this.valid.push(value !== null);
    if (value !== null) this.item.appendItems(value);
    if (this.item.length > 0x7fffffff)
      throw new RangeError(`a list column holds more than 2^31-1 values: write fewer records per row group`);
    this.offsets.push(this.item.length);
  }
  appendItems(values: unknown) {
    const list = values as readonly unknown[];
    for (const value of list) this.append(value);
    return list.length;
  }
  appendRange(data: ColumnData, from: number, to: number) {
    const { offsets, item, valid } = data as { offsets: Int32Array; item: ColumnData; valid?: Uint8Array };
    if (this.valid !== null) {
      if (valid !== undefined) this.valid.pushBits(valid, from, to - from);
      else for (let i = from; i < to; i++) this.valid.push(true);
    }
    appendOffsets(this.offsets, offsets, from, to, this.item.length);
    this.item.appendRange(item, offsets[from], offsets[to]);
  }
  truncate(length: number) {
    // As Utf8Builder's: items or a validity bit may be there without their offset.
    length = Math.min(length, this.length);
    this.offsets.length = length + 1;
    this.item.truncate(this.offsets.data[length]);
    this.valid?.truncate(length);
  }
  finish(): ColumnData {
    const data: ColumnData = { kind: "list", offsets: this.offsets.view(), item: this.item.finish() };
    if (this.valid !== null) data.valid = this.valid.view();
    return data;
  }
  detach(keepBytes: number): ColumnData {
    const data: ColumnData = {
      kind: "list",
      offsets: this.offsets.detach(keepBytes, 0),
      item: this.item.detach(keepBytes),
    };
    if (this.valid !== null) data.valid = this.valid.detach();
    return data;
  }
  restore(data: ColumnData, length: number) {
    const { offsets, item, valid } = data as { offsets: Int32Array; item: ColumnData; valid?: Uint8Array };
    this.offsets.restore(offsets, length + 1);
    this.item.restore(item, offsets[length]);
    if (this.valid !== null) this.valid.restore(valid!, offsets.length - 1, length);
  }
}

class StructBuilder implements Builder {
  private count = 0;

  constructor(
    private readonly names: readonly string[],
    private readonly fields: Builder[],
  ) {}
  get length() {
    return this.count;
  }
  bytes() {
    let total = 0;
    for (const field of this.fields) total += field.bytes();
    return total;
  }
  append(value: unknown) {
    const object = value as Record<string, unknown>;
    for (let i = 0; i < this.fields.length; i++) this.fields[i].append(object[this.names[i]]);
    this.count++;
  }
  appendItems(values: unknown) {
    const list = values as readonly unknown[];
    for (const value of list) this.append(value);
    return list.length;
  }
  appendRange(data: ColumnData, from: number, to: number) {
    const { fields } = data as { fields: ColumnData[] };
    for (let i = 0; i < this.fields.length; i++) this.fields[i].appendRange(fields[i], from, to);
    this.count += to - from;
  }
  truncate(length: number) {
    // Every field, even at the same count: an append that failed half-way filled only some.
    length = Math.min(length, this.count);
    for (const field of this.fields) field.truncate(length);
    this.count = length;
  }
  finish(): ColumnData {
    return { kind: "struct", length: this.count, fields: this.fields.map((field) => field.finish()) };
  }
  detach(keepBytes: number): ColumnData {
    const length = this.count;
    this.count = 0;
    return { kind: "struct", length, fields: this.fields.map((field) => field.detach(keepBytes)) };
  }
  restore(data: ColumnData, length: number) {
    const { fields } = data as { fields: ColumnData[] };
    for (let i = 0; i < this.fields.length; i++) this.fields[i].restore(fields[i], length);
    this.count = length;
  }
}

/** Appends offsets[from+1 .. to] rebased so that offsets[from] lands on `base`. */
function appendOffsets(
  target: Growable<Int32Array>,
  offsets: Int32Array,
  from: number,
  to: number,
  base: number,
): void {
  const shift = base - offsets[from];
  target.reserve(to - from);
  const out = target.data;
  let at = target.length;
  for (let i = from + 1; i <= to; i++) out[at++] = offsets[i] + shift;
  target.length = at;
}

function builderFor(type: ColumnType, nullable = false): Builder {
  switch (type.kind) {
    case "utf8":
      return new Utf8Builder(nullable);
    case "bool":
      return new BoolBuilder();
    case "list":
      return new ListBuilder(builderFor(type.item), nullable);
    case "struct":
      return new StructBuilder(
        type.fields.map((field) => field.name),
        type.fields.map((field) => builderFor(field.type)),
      );
    default:
      return new NumberBuilder(type.kind);
  }
}

/**
 * The columns of a growing set of records of one layout. Records go in whole (add) or as row
 * ranges of finished blocks (addRange); finish() hands the buffers out and starts empty again.
 */
export class RecordColumns<L extends Layout = Layout> {
  private readonly columns;
  private builders: Builder[];
  private readonly weights = new Growable(Float64Array);
  private filled: number;

  /**
   * `keepBytes`: buffers that held more than this are let go when emptied (one huge record
   * must not pin its memory for the rest of the run); smaller ones are kept and refilled, or
   * matched in size by the next ones (handOff).
   */
  constructor(
    readonly layout: L,
    private readonly keepBytes = 8 << 20,
  ) {
    this.columns = columnsOf(layout);
    this.builders = this.columns.map((column) => builderFor(column.type, column.nullable));
    this.filled = this.measure(); // not 0: empty offset buffers hold their first 0
  }

  get length(): number {
    return this.weights.length;
  }

  /** Bytes of column buffers so far. */
  get bytes(): number {
    return this.filled;
  }

  add(record: RecordOf<L>): void {
    const before = this.filled;
    for (let i = 0; i < this.builders.length; i++) this.builders[i].append(this.columns[i].value(record));
    this.filled = this.measure();
    this.weights.push(this.filled - before);
  }

  /** Appends records [from, to) of `block` (of the same layout). */
  addRange(block: ColumnBlock, from: number, to: number): void {
    if (block.layout !== this.layout)
      throw new TypeError(`a block of ${block.layout} cannot join columns of ${this.layout}`);
    if (to <= from) return;
    for (let i = 0; i < this.builders.length; i++) this.builders[i].appendRange(block.columns[i], from, to);
    this.weights.pushAll(block.weights.subarray(from, to));
    this.filled = this.measure();
  }

  /** Drops the records from `length` on (undoes a rollout that failed half-way). */
  truncate(length: number): void {
    for (const builder of this.builders) builder.truncate(length);
    this.weights.length = Math.min(length, this.weights.length);
    this.filled = this.measure();
  }

  /** The columns so far, as views over this builder's buffers: valid until the next change. */
  view(): ColumnBlock {
    return {
      layout: this.layout,
      length: this.length,
      columns: this.builders.map((builder) => builder.finish()),
      weights: this.weights.view(),
    };
  }

  /** Empty again, keeping its buffers for the next records (after view()'s block is used up). */
  clear(): void {
    if (this.filled > this.keepBytes) {
      this.builders = this.columns.map((column) => builderFor(column.type, column.nullable));
      this.weights.length = 0;
      this.filled = this.measure();
      return;
    }
    this.truncate(0);
  }

  /**
   * The columns so far, as a block that owns its buffers: the buffers themselves, not copies.
   * This starts empty, allocating nothing, and its first growth goes straight back to buffers as
   * large (from the recycler when it has them), so it does not regrow for each block; buffers
   * past `keepBytes` are not matched (one huge record must not pin its size for the rest of the
   * run). For blocks used up on this thread (a row group written out, then recycled): with no
   * pool, every block's replacement buffers are fresh memory, where finish() copies into fresh
   * memory only as much as the block holds.
   */
  handOff(): ColumnBlock {
    const block: ColumnBlock = {
      layout: this.layout,
      length: this.length,
      columns: this.builders.map((builder) => builder.detach(this.keepBytes)),
      weights: this.weights.detach(this.keepBytes),
    };
    this.filled = this.measure();
    return block;
  }

  /**
   * Back to the first `length` records of `block`, a block handOff() gave: its buffers are this
   * one's again and the records since are dropped. Undoes a handOff and the adds after it without
   * allocating (a rollout that failed for want of memory is undone this way).
   */
  restore(block: ColumnBlock, length: number): void {
    if (block.layout !== this.layout)
      throw new TypeError(`a block of ${block.layout} cannot restore columns of ${this.layout}`);
    for (let i = 0; i < this.builders.length; i++) this.builders[i].restore(block.columns[i], length);
    this.weights.restore(block.weights, length);
    this.filled = this.measure();
  }

  /**
   * The columns so far, as a block that owns its buffers (to transfer or keep): exact-size copies,
   * and this starts empty again keeping its own buffers (no regrowing for every block); past
   * `keepBytes`, the buffers themselves (views of them), and this starts again with new ones.
   */
  finish(): ColumnBlock {
    if (this.filled > this.keepBytes) {
      // Buffers this large are let go by clear(): they leave as the block itself, uncopied (a
      // deep rollout's rows are most of a run's column bytes). The weights buffer is kept.
      const view = this.view();
      const block = { ...view, weights: view.weights.slice() };
      this.clear();
      return block;
    }
    const block = copyBlock(this.view());
    this.clear();
    return block;
  }

  private measure(): number {
    let total = 0;
    for (const builder of this.builders) total += builder.bytes();
    return total;
  }
}

/** An exact-length copy of `array` (in a recycled buffer when large: see BufferRecycler). */
function copyOf<T extends Int32Array | Float32Array | Float64Array | Uint8Array>(array: T): T {
  const copy = recycledArray(array.constructor as never, array.length) as T;
  copy.set(array as never);
  return copy;
}

function copyData(data: ColumnData): ColumnData {
  switch (data.kind) {
    case "utf8":
      return {
        kind: "utf8",
        offsets: copyOf(data.offsets),
        bytes: copyOf(data.bytes),
        ...(data.valid === undefined ? {} : { valid: data.valid.slice() }),
      };
    case "bool":
      return { kind: "bool", bits: data.bits.slice(), length: data.length };
    case "list":
      return {
        kind: "list",
        offsets: copyOf(data.offsets),
        item: copyData(data.item),
        ...(data.valid === undefined ? {} : { valid: data.valid.slice() }),
      };
    case "struct":
      return { kind: "struct", length: data.length, fields: data.fields.map(copyData) };
    default:
      return { kind: data.kind, values: copyOf(data.values) } as ColumnData;
  }
}

/** A block with its own copy of every buffer. */
export function copyBlock(block: ColumnBlock): ColumnBlock {
  return {
    layout: block.layout,
    length: block.length,
    columns: block.columns.map(copyData),
    weights: block.weights.slice(),
  };
}

/**
 * Gives a used-up block's buffers to this thread's recycler (see BufferRecycler), for blocks
 * whose buffers nothing else refers to: those of finish() and handOff(), once written (or
 * copied into a row group or an IPC stream). Buffers transferred to another thread are skipped
 * (detached).
 */
export function recycleBlock(block: ColumnBlock): void {
  for (const buffer of blockBuffers(block)) recycler.give(buffer);
}

/** Column bytes of a block's records (the sum of their weights). */
export function blockBytes(block: ColumnBlock): number {
  let total = 0;
  for (let i = 0; i < block.length; i++) total += block.weights[i];
  return total;
}

/** Every buffer a block holds (to transfer it to another thread). */
export function blockBuffers(block: ColumnBlock): ArrayBuffer[] {
  const buffers = new Set<ArrayBuffer>([block.weights.buffer as ArrayBuffer]);
  const visit = (data: ColumnData) => {
    switch (data.kind) {
      case "utf8":
        buffers.add(data.offsets.buffer as ArrayBuffer).add(data.bytes.buffer as ArrayBuffer);
        if (data.valid !== undefined) buffers.add(data.valid.buffer as ArrayBuffer);
        return;
      case "bool":
        buffers.add(data.bits.buffer as ArrayBuffer);
        return;
      case "list":
        buffers.add(data.offsets.buffer as ArrayBuffer);
        if (data.valid !== undefined) buffers.add(data.valid.buffer as ArrayBuffer);
        visit(data.item);
        return;
      case "struct":
        data.fields.forEach(visit);
        return;
      default:
        buffers.add(data.values.buffer as ArrayBuffer);
    }
  };
  block.columns.forEach(visit);
  return [...buffers];
}
