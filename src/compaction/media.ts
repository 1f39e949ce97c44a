// Content-addressed media store: each image's bytes are kept once, under the SHA-256 of the bytes.
import { sha256Hex } from "./digest.js";
import { CompactionError } from "./errors.js";
import { toBase64 } from "../output.js";

export interface MediaRecord {
  /** `sha256:<hex>` of the bytes: stable across runs and processes. */
  id: string;
  mime: string;
  width: number;
  height: number;
  byteLength: number;
}

const PNG_SIGNATURE = [137, 80, 78, 71, 13, 10, 26, 10];

/** PNG's largest width or height (2^31 - 1). */
const PNG_MAX_SIDE = 0x7fffffff;

/**
 * Width and height from a PNG's IHDR chunk; throws on bytes that are not a PNG: no signature, no
 * complete 13-byte IHDR first (33 bytes with its CRC), or a side outside [1, 2^31-1] (PNG's rule).
 */
export function pngSize(bytes: Uint8Array): { width: number; height: number } {
  const notPng = (why: string) => new CompactionError(`media: not a PNG image (${bytes.length} bytes): ${why}`);
  if (bytes.length < 33 || !PNG_SIGNATURE.every((b, i) => bytes[i] === b)) throw notPng("no PNG signature and header");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(8) !== 13 || String.fromCharCode(bytes[12], bytes[13], bytes[14], bytes[15]) !== "IHDR") throw notPng("the first chunk is not a 13-byte IHDR");
  const width = view.getUint32(16);
  const height = view.getUint32(20);
  if (width < 1 || height < 1 || width > PNG_MAX_SIDE || height > PNG_MAX_SIDE) throw notPng(`${width}x${height} is not a PNG size`);
  return { width, height };
}

export class MediaStore {
  private readonly records = new Map<string, MediaRecord>();
  private readonly data = new Map<string, Uint8Array>();

  /** Stores the bytes (once) and returns their record. Only PNG is accepted: its size is read from the bytes. */
  async put(bytes: Uint8Array, mime = "image/png"): Promise<MediaRecord> {
    if (mime !== "image/png") throw new CompactionError(`media: unsupported mime type ${mime} (only image/png)`);
    // A copy first, and everything from it: the caller may reuse its buffer, even while we hash
    // (and a Node Buffer's slice() is a view, not a copy).
    const own = new Uint8Array(bytes);
    const { width, height } = pngSize(own);
    const id = `sha256:${await sha256Hex(own)}`;
    const known = this.records.get(id);
    if (known) return known;
    const record: MediaRecord = Object.freeze({ id, mime, width, height, byteLength: own.length });
    this.records.set(id, record);
    this.data.set(id, own);
    return record;
  }

  record(id: string): MediaRecord {
    const record = this.records.get(id);
    if (!record) throw new CompactionError(`media: unknown media id ${id}`);
    return record;
  }

  /** A copy of the stored bytes. */
  bytes(id: string): Uint8Array {
    const bytes = this.data.get(id);
    if (!bytes) throw new CompactionError(`media: unknown media id ${id}`);
    return new Uint8Array(bytes);
  }

  has(id: string): boolean {
    return this.records.has(id);
  }

  get size(): number {
    return this.records.size;
  }

  /** Base64 data URL of an image, as Responses `input_image.image_url` carries it. */
  dataUrl(id: string): string {
    const record = this.record(id);
    return `data:${record.mime};base64,${toBase64(this.data.get(id)!)}`;
  }
}

