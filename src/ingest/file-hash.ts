// Reading a file back into a SHA-256, in order: FileDigest (file-digest.ts) does it on the
// writing thread for a small file, its thread (file-digest-thread.ts) for a large one.
import type { Hash } from "node:crypto";
import { readSync } from "node:fs";

/** Bytes read back per read. */
export const READ_BYTES = 4 << 20;

/** Adds bytes [from, to) of the open file `fd` to `hash`, through `buffer`; returns `to`. */
export function hashRange(hash: Hash, fd: number, from: number, to: number, buffer: Buffer): number {
  for (let at = from; at < to; ) {
    const got = readSync(fd, buffer, 0, Math.min(buffer.length, to - at), at);
    if (got === 0) throw new Error(`the file ends at ${at} bytes, before the ${to} written`);
    hash.update(buffer.subarray(0, got));
    at += got;
  }
  return to;
}
