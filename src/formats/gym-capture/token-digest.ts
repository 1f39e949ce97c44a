// Gym's token digest (records.py `compute_digest`, DIGEST_VERSION 1; gym-formats README §1.4):
//   hex(SHA-256("nemo-gym-tokens" ‖ u8(1) ‖ u64be(n) ‖ u64be(T[0]) ‖ … ‖ u64be(T[n-1])))
// and for no tokens the domain alone, with no header.
import { sha256, type Hasher } from "./sha256.js";

const DOMAIN = new TextEncoder().encode("nemo-gym-tokens");
const DIGEST_VERSION = 1;
/** Tokens encoded per update: 64 KiB of big-endian u64s. */
const CHUNK_TOKENS = 8192;

/**
 * The digest of the concatenated `parts`, or null when a token is not an integer in [0, 2^53):
 * Gym refuses negative ids, and a JSON number past 2^53 is no longer the id that was written.
 * (Such a token is the planner's `invalid_token` anyway.)
 */
export function tokenDigest(parts: readonly ArrayLike<unknown>[], hash: Hasher = sha256()): string | null {
  hash.update(DOMAIN);
  let count = 0;
  for (const part of parts) count += part.length;
  if (count === 0) return hash.hex();
  const chunk = new Uint8Array(CHUNK_TOKENS * 8);
  const view = new DataView(chunk.buffer);
  view.setUint8(0, DIGEST_VERSION);
  view.setBigUint64(1, BigInt(count));
  hash.update(chunk.subarray(0, 9));
  let filled = 0;
  for (const part of parts) {
    for (let i = 0; i < part.length; i++) {
      const token = part[i];
      if (typeof token !== "number" || !Number.isSafeInteger(token) || token < 0) return null;
      view.setUint32(filled, token > 0xffffffff ? Math.floor(token / 0x100000000) : 0);
      view.setUint32(filled + 4, token >>> 0);
      filled += 8;
      if (filled === chunk.length) {
        hash.update(chunk);
        filled = 0;
      }
    }
  }
  hash.update(chunk.subarray(0, filled));
  return hash.hex();
}
