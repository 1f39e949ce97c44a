// RowSerializer: one row or packed record as SPEC's JSONL line, byte for byte `rowToJson` or
// `packedToJson` + "\n" (src/output/jsonl.ts), written as bounded Uint8Array chunks: a row can be
// longer than V8's maximum string length, so its arrays are never one string. Token ids, logprobs
// (shortest float32 text, as formatFloat32) and the mask are formatted by assembly/scan in linear
// memory; only the routed_experts envelope is made in JS, as one string (expertsField).
import {
  checkPackedArrays,
  checkRowArrays,
  expertsField,
  mediaList,
  packedHead,
  rewardText,
  segmentList,
  type MaskFormat,
} from "../output/jsonl.js";
import type { PackedBin, PackedTree, Row } from "../types.js";
import { instantiateScan, type ScanExports, type ScanModuleOptions } from "./scan-module.js";

export interface RowSerializerOptions extends ScanModuleOptions {
  /** Largest chunk handed to `emit`, in bytes (default 256 KiB, at least 128 KiB). */
  chunkBytes?: number;
}

/**
 * Receives each chunk of output. The chunk is a view over the serializer's workspace, valid only
 * until `emit` returns: the next chunk overwrites it. A receiver that keeps bytes copies them
 * (LineProcessor's RowBytes copies each into its output block: one copy, none here).
 */
export type EmitChunk = (chunk: Uint8Array) => void;

const STAGE_VALUES = 4096; // values formatted per call into WebAssembly
const MAX_INT_TEXT = 12; // ",-2147483648"
const MAX_FLOAT_TEXT = 25; // "," + "-0.0000012345678" / "-1.23456789e-38" / 22-digit integers
const MASK_STAGE_BYTES = 3 * 1024; // base64 works on whole 3-byte groups
const encoder = new TextEncoder();

export class RowSerializer {
  private readonly stage: number;
  private readonly chunk: number;
  private readonly bytes: Uint8Array;
  private readonly stagedInts: Int32Array;
  private readonly stagedFloats: Float32Array;
  private readonly stagedBytes: Uint8Array;
  private used = 0;
  private emit: EmitChunk = () => {};

  private constructor(
    private readonly wasm: ScanExports,
    private readonly capacity: number,
  ) {
    const stageBytes = STAGE_VALUES * 4;
    const base = wasm.workspace(stageBytes + capacity);
    if (base === 0) throw new Error("RowSerializer: cannot allocate its workspace");
    this.stage = base;
    this.chunk = base + stageBytes;
    const buffer = wasm.memory.buffer; // never grows after this
    this.stagedInts = new Int32Array(buffer, this.stage, STAGE_VALUES);
    this.stagedFloats = new Float32Array(buffer, this.stage, STAGE_VALUES);
    this.stagedBytes = new Uint8Array(buffer, this.stage, stageBytes);
    this.bytes = new Uint8Array(buffer, this.chunk, capacity);
  }

  static async create(options: RowSerializerOptions = {}): Promise<RowSerializer> {
    const capacity = Math.max(options.chunkBytes ?? 256 * 1024, 128 * 1024);
    return new RowSerializer(await instantiateScan(options), capacity);
  }

  /** Writes `rowToJson(row, maskFormat) + "\n"` through `emit`, in chunks of at most chunkBytes. */
  writeRow(row: Row, maskFormat: MaskFormat, emit: EmitChunk): void {
    checkRowArrays(row);
    this.emit = emit;
    this.used = 0;
    this.text(`{"rollout_id":${JSON.stringify(row.rolloutId)},"row":${row.index},"leaf":${JSON.stringify(row.leaf)},`);
    this.text(`"agent":${JSON.stringify(row.agent)},"calls":`);
    this.stringList(row.calls);
    this.text(`,"trained":`);
    this.stringList(row.trained);
    this.text(`,"context":`);
    this.stringList(row.context);
    this.text(`,"num_tokens":${row.numTokens},"token_ids":[`);
    this.numbers(row.tokenIds, this.stagedInts, MAX_INT_TEXT, this.wasm.formatInts);
    this.text(`],"logprobs":[`);
    this.numbers(row.logprobs, this.stagedFloats, MAX_FLOAT_TEXT, this.wasm.formatFloats);
    this.text(`],"loss_mask":`);
    if (maskFormat === "bits") this.maskBase64(row.lossMask);
    else this.maskInts(row.lossMask, row.numTokens);
    this.text(
      `,"reward":${rewardText(row.reward)},"group_id":${JSON.stringify(row.groupId)},"media":${mediaList(row.media)}`,
    );
    this.tail(row);
    this.flush();
    this.emit = () => {};
  }

  /** Writes `packedToJson(record, maskFormat) + "\n"` through `emit` (see writeRow). */
  writePacked(record: PackedTree | PackedBin, maskFormat: MaskFormat, emit: EmitChunk): void {
    checkPackedArrays(record);
    this.emit = emit;
    this.used = 0;
    this.text(packedHead(record) + `,"token_ids":[`);
    this.numbers(record.tokenIds, this.stagedInts, MAX_INT_TEXT, this.wasm.formatInts);
    this.text(`],"position_ids":[`);
    this.numbers(record.positionIds, this.stagedInts, MAX_INT_TEXT, this.wasm.formatInts);
    this.text(`],"logprobs":[`);
    this.numbers(record.logprobs, this.stagedFloats, MAX_FLOAT_TEXT, this.wasm.formatFloats);
    this.text(`],"loss_mask":`);
    if (maskFormat === "bits") this.maskBase64(record.lossMask);
    else this.maskInts(record.lossMask, record.numTokens);
    this.text(
      `,"segments":${segmentList(record.segments)},"media":${mediaList(record.media)},` +
        `"reward":${rewardText(record.reward)},"group_id":${JSON.stringify(record.groupId)}`,
    );
    this.tail(record);
    this.flush();
    this.emit = () => {};
  }

  /** The fields SPEC writes only when the rollout gives them, and the line's end. */
  private tail(record: Row | PackedTree | PackedBin): void {
    if (record.routedExperts !== undefined) this.text(expertsField(record.routedExperts));
    if (record.weightVersions !== undefined) {
      this.text(`,"weight_versions":[`);
      this.numbers(record.weightVersions, this.stagedInts, MAX_INT_TEXT, this.wasm.formatInts);
      this.text("]");
    }
    this.text("}\n");
  }

  private flush(): void {
    if (this.used === 0) return;
    this.emit(this.bytes.subarray(0, this.used));
    this.used = 0;
  }

  private room(bytes: number): void {
    if (this.used + bytes > this.capacity) this.flush();
  }

  private text(text: string): void {
    const most = text.length * 3;
    if (most > this.capacity) {
      // A huge string (an id): encode it in slices, never splitting a surrogate pair.
      const step = Math.floor(this.capacity / 3);
      for (let i = 0; i < text.length; ) {
        let end = Math.min(i + step, text.length);
        const last = text.charCodeAt(end - 1);
        if (end < text.length && last >= 0xd800 && last <= 0xdbff) end--;
        this.text(text.slice(i, end));
        i = end;
      }
      return;
    }
    this.room(most);
    this.used += encoder.encodeInto(text, this.bytes.subarray(this.used)).written;
  }

  /** JSON.stringify(list) of strings, one item at a time. */
  private stringList(list: readonly string[]): void {
    this.text("[");
    for (let i = 0; i < list.length; i++) this.text((i === 0 ? "" : ",") + JSON.stringify(list[i]));
    this.text("]");
  }

  /** Writes `values` comma-separated, staging a batch at a time for `format` (a WASM formatter). */
  private numbers(
    values: Int32Array | Float32Array,
    staged: Int32Array | Float32Array,
    maxText: number,
    format: (stage: number, count: number, at: number, comma: number) => number,
  ): void {
    for (let i = 0; i < values.length; i += STAGE_VALUES) {
      const n = Math.min(STAGE_VALUES, values.length - i);
      staged.set(values.subarray(i, i + n));
      this.room(n * maxText);
      const at = this.chunk + this.used;
      this.used += format(this.stage, n, at, i > 0 ? 1 : 0) - at;
    }
  }

  private maskBase64(mask: Uint8Array): void {
    this.text('"');
    for (let i = 0; i < mask.length; i += MASK_STAGE_BYTES) {
      const n = Math.min(MASK_STAGE_BYTES, mask.length - i);
      this.stagedBytes.set(mask.subarray(i, i + n));
      this.room(((n + 2) / 3) * 4 + 1);
      const at = this.chunk + this.used;
      this.used += this.wasm.base64(this.stage, n, at) - at;
    }
    this.text('"');
  }

  private maskInts(mask: Uint8Array, bits: number): void {
    this.text("[");
    const bytesPerStep = MASK_STAGE_BYTES; // 8 bits each, two output bytes per bit
    for (let first = 0; first < bits; first += bytesPerStep * 8) {
      const count = Math.min(bytesPerStep * 8, bits - first);
      const byte = first >> 3;
      this.stagedBytes.set(mask.subarray(byte, byte + ((count + 7) >> 3)));
      this.room(count * 2);
      const at = this.chunk + this.used;
      this.used += this.wasm.maskInts(this.stage, 0, count, at, first > 0 ? 1 : 0) - at;
    }
    this.text("]");
  }
}
