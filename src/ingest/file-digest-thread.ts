// FileDigest's thread (file-digest.ts): reads a file back, in order, as far as it is told the
// writer has written, and hashes it; with the last range it sends the SHA-256 (hex).
import { createHash } from "node:crypto";
import { parentPort, workerData } from "node:worker_threads";
import { errorLine } from "../messages.js";
import { READ_BYTES, hashRange } from "./file-hash.js";

export type ToDigestThread = { upTo: number; last: boolean };
export type FromDigestThread = { sha256: string } | { error: string };

const port = parentPort!;
const { fd } = workerData as { fd: number };
const hash = createHash("sha256");
const buffer = Buffer.allocUnsafe(READ_BYTES);
let at = 0;
let failed = false;

port.on("message", ({ upTo, last }: ToDigestThread) => {
  if (failed) return;
  try {
    if (upTo > at) at = hashRange(hash, fd, at, upTo, buffer);
    if (last) port.postMessage({ sha256: hash.digest("hex") } satisfies FromDigestThread);
  } catch (error) {
    failed = true;
    port.postMessage({ error: errorLine(error) } satisfies FromDigestThread);
  }
});
