// Canonical bytes and SHA-256 digests (Web Crypto, so the runtime also works in browsers).
import { sha256 } from "../formats/gym-capture/sha256.js";

const encoder = new TextEncoder();

export function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

/**
 * JSON with object keys sorted and `undefined` members dropped: the same value always gives
 * the same bytes, whatever order its keys were built in.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") {
    if (typeof value === "number" && !Number.isFinite(value))
      throw new TypeError(`canonicalJson: non-finite number ${value}`);
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? "null" : canonicalJson(v))).join(",")}]`;
  if (ArrayBuffer.isView(value)) return canonicalJson(Array.from(value as unknown as ArrayLike<number>));
  const keys = Object.keys(value as Record<string, unknown>).sort();
  const parts: string[] = [];
  for (const key of keys) {
    const v = (value as Record<string, unknown>)[key];
    if (v === undefined) continue;
    parts.push(`${JSON.stringify(key)}:${canonicalJson(v)}`);
  }
  return `{${parts.join(",")}}`;
}

function subtle(): SubtleCrypto {
  const c = (globalThis as { crypto?: Crypto }).crypto;
  if (!c?.subtle) throw new Error("Web Crypto (crypto.subtle) is not available in this runtime");
  return c.subtle;
}

/** Lower-case hex SHA-256 of bytes or of a string's UTF-8. */
export async function sha256Hex(data: Uint8Array | string): Promise<string> {
  const bytes = typeof data === "string" ? utf8(data) : data;
  const hash = new Uint8Array(await subtle().digest("SHA-256", bytes as unknown as ArrayBuffer));
  let hex = "";
  for (const b of hash) hex += b.toString(16).padStart(2, "0");
  return hex;
}

/**
 * Synchronous SHA-256 of a string's UTF-8, for small inputs (policy configs) where an async
 * Web Crypto call would make every policy constructor async. Media bytes use `sha256Hex`.
 */
export function sha256HexSync(text: string): string {
  const hash = sha256();
  hash.update(utf8(text));
  return hash.hex();
}
