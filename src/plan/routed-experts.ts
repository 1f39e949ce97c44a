// MoE routed experts (SPEC `calls[].routed_experts`): for each token of a call's full sequence,
// the experts its router chose in each MoE layer. Read from NeMo RL's envelope
// `nrlre1:<dtype>:<S>x<L>x<K>:<base64>` (little-endian C-order bytes) or nested lists [S][L][K],
// kept as one typed array per call (never a JS array per token), and written back as envelopes.
import { fromBase64, toBase64 } from "../output/base64.js";
import { describeValue } from "../messages.js";
import type { RoutedExperts } from "../types.js";

type ExpertType = "int8" | "int16" | "int32";

const ENVELOPE = /^nrlre1:(int8|int16|int32):(\d+)x(\d+)x(\d+):([A-Za-z0-9+/]*={0,2})$/;
const ITEM_BYTES: Record<ExpertType, number> = { int8: 1, int16: 2, int32: 4 };
const BASE64_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
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
  const last = BASE64_DIGITS.indexOf(payload[payload.length - padding - 1]);
  return (last & (padding === 2 ? 0b1111 : 0b11)) === 0;
}

/** The envelope's array, or what is wrong with it. */
function decodeEnvelope(text: string): RoutedExperts | string {
  const match = ENVELOPE.exec(text);
  if (match === null)
    return (
      `routed_experts must be an nrlre1:<int8|int16|int32>:<S>x<L>x<K>:<base64> envelope, ` +
      `got ${describeValue(text.length > 60 ? text.slice(0, 60) + "…" : text)}`
    );
  const [, type, s, l, k, payload] = match as unknown as [string, ExpertType, string, string, string, string];
  // (S = 0 holds no entries and so states no L and K: any, 0 included, is taken.)
  if (![s, l, k].every(isIndexText) || (Number(s) > 0 && (Number(l) === 0 || Number(k) === 0)))
    return `routed_experts has a bad shape ${s}x${l}x${k}`;
  if (!isStandardBase64(payload))
    return `routed_experts' payload is not standard padded base64 (length ${payload.length}, ending ${describeValue(payload.slice(-4))})`;
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

/** Nested integer lists [S][L][K] as one Int32Array, or what is wrong with them. */
function decodeLists(value: unknown[]): RoutedExperts | string {
  const tokens = value.length;
  const first: unknown = value[0];
  const layers = Array.isArray(first) ? first.length : 0;
  const topk = layers > 0 && Array.isArray((first as unknown[])[0]) ? ((first as unknown[])[0] as unknown[]).length : 0;
  if (tokens > 0 && (layers === 0 || topk === 0))
    return "routed_experts must be an [S][L][K] array of integers (L, K >= 1)";
  const data = new Int32Array(tokens * layers * topk);
  let at = 0;
  for (let t = 0; t < tokens; t++) {
    const perToken: unknown = value[t];
    if (!Array.isArray(perToken) || perToken.length !== layers)
      return `routed_experts[${t}] must hold ${layers} layers, as routed_experts[0] does`;
    for (let l = 0; l < layers; l++) {
      const chosen: unknown = perToken[l];
      if (!Array.isArray(chosen) || chosen.length !== topk)
        return `routed_experts[${t}][${l}] must hold ${topk} experts, as routed_experts[0][0] does`;
      for (let k = 0; k < topk; k++) {
        const expert: unknown = chosen[k];
        if (typeof expert !== "number" || (expert | 0) !== expert)
          return `routed_experts[${t}][${l}][${k}] must be an int32, got ${describeValue(expert)}`;
        data[at++] = expert;
      }
    }
  }
  return { tokens, layers, topk, data };
}

/**
 * A call's routed experts (null when absent or null), or what is wrong with them for SPEC's
 * `invalid_routed_experts`: they must cover the call's `fullLength` tokens.
 */
export function readRoutedExperts(value: unknown, fullLength: number): RoutedExperts | null | string {
  if (value === undefined || value === null) return null;
  const experts =
    typeof value === "string"
      ? decodeEnvelope(value)
      : Array.isArray(value)
        ? decodeLists(value)
        : `routed_experts must be an nrlre1 envelope string or an [S][L][K] array, got ${describeValue(value)}`;
  if (typeof experts === "string") return experts;
  if (experts.tokens < fullLength)
    return `routed_experts covers ${experts.tokens} tokens, fewer than the call's ${fullLength} (prompt + generation)`;
  return experts;
}

/** Copies the entries of tokens [from, to) of `experts` into `into`, from element `at`. */
export function copyTokens(
  experts: RoutedExperts,
  from: number,
  to: number,
  into: Int16Array | Int32Array,
  at: number,
): void {
  const width = experts.layers * experts.topk;
  into.set(experts.data.subarray(from * width, to * width), at);
}

/** Entries of `tokens` × L × K, to fill with copyTokens; int16 unless some entry needs int32. */
export function expertArray(tokens: number, layers: number, topk: number, wide: boolean): Int16Array | Int32Array {
  return wide ? new Int32Array(tokens * layers * topk) : new Int16Array(tokens * layers * topk);
}

/** Whether any entry of tokens [from, to) is outside int16. */
export function needsInt32(experts: RoutedExperts, from: number, to: number): boolean {
  if (!(experts.data instanceof Int32Array)) return false;
  const width = experts.layers * experts.topk;
  for (let i = from * width; i < to * width; i++) if (experts.data[i] < -32768 || experts.data[i] > 32767) return true;
  return false;
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
