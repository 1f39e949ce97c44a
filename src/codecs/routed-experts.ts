// MoE routed experts' envelope (SPEC `calls[].routed_experts`, NeMo RL's
// `nrlre1:<dtype>:<S>x<L>x<K>:<base64>`: little-endian C-order bytes), read into and written from
// one typed array per call. src/plan/routed-experts.ts reads a call's routed experts (an envelope
// or nested lists) with it; the JSONL and columnar writers write envelopes with it.
import { BASE64, fromBase64, toBase64 } from "./base64.js";
import type { RoutedExperts } from "../types.js";

type ExpertType = "int8" | "int16" | "int32";

const ENVELOPE = /^nrlre1:(int8|int16|int32):(\d+)x(\d+)x(\d+):([A-Za-z0-9+/]*={0,2})$/;
const ITEM_BYTES: Record<ExpertType, number> = { int8: 1, int16: 2, int32: 4 };
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function isIndexText(text: string): boolean {
  return text.length < 10 && Number(text) <= 2 ** 31 - 1;
}

/**
 * Whether `payload` (of base64 characters, at most two `=` at its end) is standard base64 as NeMo
 * RL writes it: padded to a multiple of 4, with no stray bits in the character before the padding
 * (so one byte string has one text).
 */
function isStandardBase64(payload: string): boolean {
  if (payload.length % 4 !== 0) return false;
  const padding = payload.endsWith("==") ? 2 : payload.endsWith("=") ? 1 : 0;
  if (padding === 0) return true;
  const last = BASE64.indexOf(payload[payload.length - padding - 1]);
  return (last & (padding === 2 ? 0b1111 : 0b11)) === 0;
}

/** The envelope's array, what is wrong with it, or null when `text` is no envelope at all. */
export function decodeEnvelope(text: string): RoutedExperts | string | null {
  const match = ENVELOPE.exec(text);
  if (match === null) return null;
  const [, type, s, l, k, payload] = match as unknown as [string, ExpertType, string, string, string, string];
  // (S = 0 holds no entries and so states no L and K: any, 0 included, is taken.)
  if (![s, l, k].every(isIndexText) || (Number(s) > 0 && (Number(l) === 0 || Number(k) === 0)))
    return `routed_experts has a bad shape ${s}x${l}x${k}`;
  if (!isStandardBase64(payload))
    return `routed_experts' payload is not standard padded base64 (length ${payload.length}, ending ${JSON.stringify(payload.slice(-4))})`;
  const [tokens, layers, topk] = [Number(s), Number(l), Number(k)];
  const bytes = fromBase64(payload);
  const expected = tokens * layers * topk * ITEM_BYTES[type];
  if (bytes.length !== expected)
    return `routed_experts holds ${bytes.length} bytes, not the ${expected} of ${type} ${tokens}x${layers}x${topk}`;
  // The payload read as the type (its bytes are little-endian); fromBase64 gives a fresh buffer.
  const buffer =
    bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes.buffer : bytes.slice().buffer;
  if (!LITTLE_ENDIAN && type !== "int8")
    for (let i = 0; i < bytes.length; i += ITEM_BYTES[type]) new Uint8Array(buffer, i, ITEM_BYTES[type]).reverse();
  const data =
    type === "int8" ? new Int8Array(buffer) : type === "int16" ? new Int16Array(buffer) : new Int32Array(buffer);
  return { tokens, layers, topk, data };
}

/** SPEC's envelope for `data` (int16 or int32 by its type) of `tokens` × L × K. */
export function encodeRoutedExperts(
  data: Int16Array | Int32Array,
  tokens: number,
  layers: number,
  topk: number,
): string {
  const type = data instanceof Int16Array ? "int16" : "int32";
  let bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (!LITTLE_ENDIAN) {
    bytes = bytes.slice();
    for (let i = 0; i < bytes.length; i += data.BYTES_PER_ELEMENT)
      bytes.subarray(i, i + data.BYTES_PER_ELEMENT).reverse();
  }
  return `nrlre1:${type}:${tokens}x${layers}x${topk}:${toBase64(bytes)}`;
}
