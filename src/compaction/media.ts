// Content-addressed media store: each image's bytes are kept once, under the SHA-256 of the bytes.
// PNG, JPEG and WebP, their sizes (for the vision-token guard) read by image-size.
import { sha256Hex } from "./digest.js";
import { CompactionError } from "./errors.js";
import { toBase64 } from "../codecs/base64.js";
import { loadFeature } from "../optional-dependency.js";

// An optional peer: a missing one is one line naming what to install (src/optional-dependency.ts).
const { imageSize } = await loadFeature("the compaction runtime (callforest/compaction)", () => import("image-size"));

export interface MediaRecord {
  /** `sha256:<hex>` of the bytes: stable across runs and processes. */
  id: string;
  mime: string;
  width: number;
  height: number;
  byteLength: number;
}

/** The image types a request can carry, by mime type, as image-size names them. */
export const IMAGE_TYPES = { "image/png": "png", "image/jpeg": "jpg", "image/webp": "webp" } as const;
export type ImageMime = keyof typeof IMAGE_TYPES;

const MAX_SIDE = 0x7fffffff;

/**
 * Width and height of a PNG, JPEG or WebP image, read by image-size; throws CompactionError when
 * the bytes are not an image of `mime` (or of no type image-size knows), or the size is not one.
 */
export function imageDimensions(bytes: Uint8Array, mime: ImageMime): { width: number; height: number } {
  const expected = IMAGE_TYPES[mime];
  const refuse = (why: string) =>
    new CompactionError(`media: ${bytes.length} bytes are not a valid ${mime} image: ${why}`);
  let size: { width?: number; height?: number; type?: string };
  try {
    size = imageSize(bytes);
  } catch (error) {
    throw refuse(error instanceof Error ? error.message : String(error));
  }
  if (size.type !== expected) throw refuse(`its bytes are ${size.type ?? "not an image"}`);
  const { width, height } = size;
  if (
    !Number.isInteger(width) ||
    !Number.isInteger(height) ||
    width! < 1 ||
    height! < 1 ||
    width! > MAX_SIDE ||
    height! > MAX_SIDE
  ) {
    throw refuse(`${width}x${height} is not an image size`);
  }
  return { width: width!, height: height! };
}

/** Width and height of a PNG (see imageDimensions). */
export function pngSize(bytes: Uint8Array): { width: number; height: number } {
  return imageDimensions(bytes, "image/png");
}

/** The mime type of a `data:` URL's image, if it is one of IMAGE_TYPES. */
export function dataUrlImage(url: string): { mime: ImageMime; base64: string } | null {
  const match = /^data:(image\/(?:png|jpeg|webp));base64,(.+)$/.exec(url);
  return match ? { mime: match[1] as ImageMime, base64: match[2] } : null;
}

/** A data URL's image bytes and type, or null when `url` is no base64 PNG, JPEG or WebP data URL. */
export function dataUrlBytes(url: string): { bytes: Uint8Array; mime: ImageMime } | null {
  const image = dataUrlImage(url);
  return image && { bytes: Uint8Array.from(atob(image.base64), (c) => c.charCodeAt(0)), mime: image.mime };
}

export class MediaStore {
  private readonly records = new Map<string, MediaRecord>();
  private readonly data = new Map<string, Uint8Array>();

  /** Stores the bytes (once) and returns their record. PNG, JPEG and WebP: the size is read from the bytes. */
  async put(bytes: Uint8Array, mime: string = "image/png"): Promise<MediaRecord> {
    if (!(mime in IMAGE_TYPES))
      throw new CompactionError(
        `media: unsupported mime type ${mime} (expected ${Object.keys(IMAGE_TYPES).join(", ")})`,
      );
    // A copy first, and everything from it: the caller may reuse its buffer, even while we hash
    // (and a Node Buffer's slice() is a view, not a copy).
    const own = new Uint8Array(bytes);
    const { width, height } = imageDimensions(own, mime as ImageMime);
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
