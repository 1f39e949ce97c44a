// Growable typed arrays and bit runs: the storage column builders append to. Plain typed arrays
// (no Arrow library), so worker threads can build columns and transfer them without a copy.

type TypedArray = Int32Array | Float32Array | Float64Array | Uint8Array;
type TypedArrayClass<T extends TypedArray> = {
  new (length: number): T;
  new (buffer: ArrayBuffer, byteOffset: number, length: number): T;
  readonly BYTES_PER_ELEMENT: number;
};

/** Buffers smaller than this are not pooled (the allocator reuses small blocks itself). */
const RECYCLED_MIN_BYTES = 64 << 10;

/** ES2024's resizable ArrayBuffer (Node 20; newer than this project's TypeScript library). */
interface ResizableArrayBuffer extends ArrayBuffer {
  readonly resizable: boolean;
  readonly maxByteLength: number;
  resize(bytes: number): void;
}
const ResizableArrayBuffer = ArrayBuffer as unknown as new (
  bytes: number,
  options: { maxByteLength: number },
) => ResizableArrayBuffer;

/** With growInPlace, fresh buffers from this size on are resizable ... */
const RESIZABLE_FROM_BYTES = 256 << 10;
/** ... up to this size: twice a row group's column bytes, so a builder of one grows within it. */
const RESIZABLE_MAX_BYTES = 32 << 20;

/**
 * Column buffers that were used up, for the next column copies to fill. A column's bytes are
 * copied on their way out (into a builder, a worker's block, a row group), each time into a
 * buffer as large as the data; fresh, every one of those pages is touched for the first time,
 * which on this project's VMs costs more than the copy (about 12 µs a 4 KiB page:
 * docs/performance.md, "Where the time goes"). Recycled, they are warm. Off (a limit of 0) unless
 * a thread turns it on: pooled buffers are memory held, so only `rows` writing Parquet or Arrow
 * IPC does, on the thread that fills the row groups, for as long as its writer runs (a library
 * caller would be left holding the pool). Buffers go back only from code that knows nothing
 * refers to them any more (recycleBlock, a builder's grown or replaced array); a buffer is reused
 * for data at least half its size.
 */
export class BufferRecycler {
  private readonly free: ArrayBuffer[] = [];
  private pooled = 0;
  /**
   * Fresh buffers of RESIZABLE_FROM_BYTES or more are resizable, and a Growable over one grows
   * it in place: a builder that doubles its way up to a row group's size then neither copies
   * nor leaves the smaller buffers it outgrew, touched, behind (on the mix, 3,000 fewer first
   * touches). Only `rows` turns it on, with the pool: resizable buffers are ES2024.
   */
  growInPlace = false;

  constructor(private limitBytes = 0) {}

  /** Pools up to `bytes` from now on (0: none; buffers pooled past it are let go). */
  setLimit(bytes: number): void {
    this.limitBytes = bytes;
    while (this.pooled > bytes) this.pooled -= this.free.pop()!.byteLength;
  }

  /** A pooled buffer of at least `bytes` and at most twice that (its contents are not cleared), or null. */
  take(bytes: number): ArrayBuffer | null {
    if (bytes < RECYCLED_MIN_BYTES || this.free.length === 0) return null;
    let best = -1;
    for (let i = 0; i < this.free.length; i++) {
      const size = this.free[i].byteLength;
      if (size >= bytes && size <= 2 * bytes && (best < 0 || size < this.free[best].byteLength)) best = i;
    }
    if (best < 0) return null;
    const [buffer] = this.free.splice(best, 1);
    this.pooled -= buffer.byteLength;
    return buffer;
  }

  /** Takes back a buffer nothing refers to any more (one that was transferred away is ignored). */
  give(buffer: ArrayBuffer): void {
    const size = buffer.byteLength;
    if (size < RECYCLED_MIN_BYTES || this.pooled + size > this.limitBytes || this.free.includes(buffer)) return;
    this.free.push(buffer);
    this.pooled += size;
  }

  /** The most bytes pooled (0: off). */
  get limit(): number {
    return this.limitBytes;
  }

  /** Bytes pooled now. */
  get bytes(): number {
    return this.pooled;
  }
}

/** This thread's recycler (each worker thread has its own; off until setLimit). */
export const recycler = new BufferRecycler();

/** An array of `length` values, in a recycled buffer when there is one (its values are not cleared then). */
export function recycledArray<T extends TypedArray>(Type: TypedArrayClass<T>, length: number): T {
  const bytes = length * Type.BYTES_PER_ELEMENT;
  const buffer = recycler.take(bytes);
  if (buffer !== null) return new Type(buffer, 0, length);
  if (recycler.growInPlace && bytes >= RESIZABLE_FROM_BYTES && bytes <= RESIZABLE_MAX_BYTES)
    return new Type(new ResizableArrayBuffer(bytes, { maxByteLength: RESIZABLE_MAX_BYTES }), 0, length);
  return new Type(length);
}

/** What an emptied Growable or BitRun starts again with (too small for its allocation to fail). */
const SMALL_CAPACITY = 64;

/** A typed array that doubles as it fills; `view()` is the filled part. */
export class Growable<T extends TypedArray> {
  data: T;
  length = 0;
  /** The least the next growth goes to (set by detach: the size of the buffer handed out). */
  private nextCapacity = 0;

  constructor(
    private readonly Type: TypedArrayClass<T>,
    capacity = 64,
  ) {
    this.data = new Type(capacity);
  }

  /**
   * The filled part, handed out with the buffer under it, and this empty again. Its next growth
   * goes straight to the size of the buffer handed out (from the recycler when it has one)
   * unless that held more than `keepBytes`, so a builder that is emptied often does not grow
   * again every time. Nothing large is allocated here, and nothing grows: a caller handing out
   * many arrays at once cannot be stopped half-way by a failed allocation. With `first`, this
   * starts again holding that one value (an offsets array's leading 0).
   */
  detach(keepBytes: number, first?: number): T {
    const filled = this.view();
    this.nextCapacity = this.data.byteLength <= keepBytes ? this.data.length : 0;
    this.data = new this.Type(SMALL_CAPACITY);
    this.length = 0;
    if (first !== undefined) this.data[this.length++] = first;
    return filled;
  }

  /**
   * Takes back an array detach() handed out, as its first `length` values (at most its length):
   * undoes a detach and the appends since, allocating nothing. This one's own buffer is let go.
   */
  restore(
    filled: ArrayBufferView & { readonly length: number; readonly BYTES_PER_ELEMENT: number },
    length: number,
  ): void {
    recycler.give(this.data.buffer as ArrayBuffer);
    const room = (filled.buffer.byteLength - filled.byteOffset) / filled.BYTES_PER_ELEMENT;
    this.data = new this.Type(filled.buffer as ArrayBuffer, filled.byteOffset, Math.floor(room));
    this.length = Math.min(length, filled.length);
    this.nextCapacity = 0;
  }

  /** Room for `more` values past `length`. */
  reserve(more: number): void {
    const need = this.length + more;
    if (need <= this.data.length) return;
    let capacity = Math.max(this.data.length * 2, this.nextCapacity);
    while (capacity < need) capacity *= 2;
    this.nextCapacity = 0;
    const buffer = this.data.buffer as ResizableArrayBuffer;
    const bytes = capacity * this.Type.BYTES_PER_ELEMENT;
    if (buffer.resizable === true && this.data.byteOffset === 0 && bytes <= buffer.maxByteLength) {
      // In place (see BufferRecycler.growInPlace). Views handed out are of the old length, and
      // are used up before the next append anyway.
      if (bytes > buffer.byteLength) buffer.resize(bytes);
      this.data = new this.Type(buffer, 0, capacity);
      return;
    }
    // Only the filled part is copied: a recycled buffer's other values are never read.
    const grown = recycledArray(this.Type, capacity);
    grown.set(this.data.subarray(0, this.length) as never);
    // No view of the old buffer outlives this: views handed out (view()) are used up before
    // the next append, by the contract of every builder over this (see RecordColumns).
    recycler.give(this.data.buffer as ArrayBuffer);
    this.data = grown;
  }

  push(value: number): void {
    if (this.length === this.data.length) this.reserve(1);
    this.data[this.length++] = value;
  }

  pushAll(values: ArrayLike<number>): void {
    this.reserve(values.length);
    this.data.set(values as never, this.length);
    this.length += values.length;
  }

  view(): T {
    return this.data.subarray(0, this.length) as T;
  }
}

/**
 * Copies `count` bits from `src` (starting at bit `srcBit`) to `dst` (at bit `dstBit`), bit `i`
 * being bit `i % 8` of byte `i / 8` (Arrow's and SPEC's order). The bits of `dst` it writes must
 * be 0 (they are ORed in); bits of `src` past `srcBit + count` are ignored.
 */
export function copyBits(src: Uint8Array, srcBit: number, dst: Uint8Array, dstBit: number, count: number): void {
  if (count <= 0) return;
  if ((srcBit & 7) === 0 && (dstBit & 7) === 0) {
    const whole = count >> 3;
    dst.set(src.subarray(srcBit >> 3, (srcBit >> 3) + whole), dstBit >> 3);
    const rest = count & 7;
    if (rest > 0) dst[(dstBit >> 3) + whole] |= src[(srcBit >> 3) + whole] & ((1 << rest) - 1);
    return;
  }
  const shift = dstBit & 7;
  for (let done = 0; done < count; done += 8) {
    const at = srcBit + done;
    const byte = at >> 3;
    const offset = at & 7;
    let bits = offset === 0 ? src[byte] : ((src[byte] >> offset) | ((src[byte + 1] ?? 0) << (8 - offset))) & 0xff;
    const take = Math.min(8, count - done);
    if (take < 8) bits &= (1 << take) - 1;
    const to = (dstBit + done) >> 3;
    dst[to] |= (bits << shift) & 0xff;
    if (shift !== 0 && take > 8 - shift) dst[to + 1] |= bits >> (8 - shift);
  }
}

/** A growing run of bits (Arrow's boolean layout). */
export class BitRun {
  bytes = new Uint8Array(64);
  length = 0;

  private reserve(more: number): void {
    const need = (this.length + more + 7) >> 3;
    if (need <= this.bytes.length) return;
    let capacity = this.bytes.length * 2;
    while (capacity < need) capacity *= 2;
    const grown = new Uint8Array(capacity); // zeroed: copyBits ORs into it
    grown.set(this.bytes);
    this.bytes = grown;
  }

  push(bit: boolean): void {
    this.reserve(1);
    if (bit) this.bytes[this.length >> 3] |= 1 << (this.length & 7);
    this.length++;
  }

  /** Appends `count` bits of `src` from bit `srcBit`. */
  pushBits(src: Uint8Array, srcBit: number, count: number): void {
    this.reserve(count);
    copyBits(src, srcBit, this.bytes, this.length, count);
    this.length += count;
  }

  /** Back to `length` bits; the bits past it are cleared (appends OR into zeroed bits). */
  truncate(length: number): void {
    if (length >= this.length) return;
    const end = (this.length + 7) >> 3;
    const keep = length >> 3;
    if ((length & 7) !== 0) this.bytes[keep] &= (1 << (length & 7)) - 1;
    this.bytes.fill(0, (length & 7) === 0 ? keep : keep + 1, end);
    this.length = length;
  }

  view(): Uint8Array {
    return this.bytes.subarray(0, (this.length + 7) >> 3);
  }

  /** The bits so far, handed out with their buffer, and this empty again (see Growable.detach). */
  detach(): Uint8Array {
    const filled = this.view();
    this.bytes = new Uint8Array(SMALL_CAPACITY);
    this.length = 0;
    return filled;
  }

  /** Takes back bits detach() handed out, `count` of them, as its first `length` (see Growable.restore). */
  restore(bits: Uint8Array, count: number, length: number): void {
    this.bytes = new Uint8Array(bits.buffer as ArrayBuffer, bits.byteOffset, bits.buffer.byteLength - bits.byteOffset);
    this.length = count;
    this.truncate(length);
  }
}
