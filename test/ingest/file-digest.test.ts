// A staged output's digest and early flushes (file-digest.ts, file-follower.ts, sink.ts): the
// SHA-256 of what is in the file, taken off the writing thread once the file is large, on this
// thread when it is small; a file shorter than the writer said fails with a one-line reason; and
// the file's data is flushed to the disk while it is written, not only before its rename.
import { createHash, randomBytes } from "node:crypto";
import { closeSync, existsSync, openSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test, vi } from "vitest";
import { FileDigest } from "../../src/ingest/file-digest.js";
import { openByteSink } from "../../src/ingest/sink.js";
import { tempDirs } from "../support/temp-dirs.js";

// Every fdatasync of this process, counted (passed through to the real one).
const flushes = { count: 0 };
vi.mock("node:fs", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:fs")>();
  return {
    ...real,
    fdatasync: (fd: number, callback: (error: NodeJS.ErrnoException | null) => void) => {
      flushes.count++;
      return real.fdatasync(fd, callback);
    },
  };
});

const tempDir = tempDirs("file-digest");
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** Writes `parts` through a staged sink on `path`, in order, and commits it; returns its digest. */
async function writeStaged(path: string, parts: (Uint8Array | string)[], digestThreadFromBytes?: number) {
  const sink = openByteSink(path, { digest: true, digestThreadFromBytes });
  expect(sink.staged).toBe(true);
  for (const part of parts) await sink.write(part);
  await sink.close();
  sink.commit!();
  return sink.digest!();
}

/** About `total` bytes as byte chunks of uneven sizes and strings with multi-byte characters. */
function mixedParts(total: number): (Uint8Array | string)[] {
  const parts: (Uint8Array | string)[] = [];
  let size = 0;
  for (let i = 0; size < total; i++) {
    const part = i % 3 === 2 ? `line ${i}: é✓😀 ${"x".repeat(i % 1000)}\n` : randomBytes(((i * 7919) % (3 << 20)) + 1);
    parts.push(part);
    size += typeof part === "string" ? Buffer.byteLength(part) : part.byteLength;
  }
  return parts;
}

describe("a staged file's digest", () => {
  test("is the SHA-256 and size of the file's bytes, hashed on a thread once the file is large", async () => {
    const path = join(tempDir(), "rows.jsonl");
    const digest = await writeStaged(path, mixedParts(24 << 20), 1 << 20);
    const bytes = readFileSync(path);
    expect(digest).toEqual({ bytes: bytes.byteLength, sha256: sha256(bytes) });
  });

  test("of a small file is taken at the end, on this thread; an empty file's too", async () => {
    const dir = tempDir();
    for (const parts of [mixedParts(100_000), []]) {
      const path = join(dir, `rows-${parts.length}.jsonl`);
      const digest = await writeStaged(path, parts);
      const bytes = readFileSync(path);
      expect(digest).toEqual({ bytes: bytes.byteLength, sha256: sha256(bytes) });
    }
  });

  test("FileDigest: a thread starts at the threshold, not before, and follows the file as told", async () => {
    const path = join(tempDir(), "file");
    const bytes = randomBytes(10 << 20);
    writeFileSync(path, bytes);
    const fd = openSync(path, "r");
    try {
      const digest = new FileDigest(fd, 6 << 20);
      digest.written(5 << 20);
      expect(digest.threaded).toBe(false);
      digest.written(6 << 20);
      expect(digest.threaded).toBe(true);
      for (let at = 6 << 20; at <= bytes.length; at += 1 << 20) digest.written(at);
      expect(await digest.finish(bytes.length)).toBe(sha256(bytes));
    } finally {
      closeSync(fd);
    }
  });

  test("FileDigest: a file shorter than the writer said fails, on a thread and on this one", async () => {
    const path = join(tempDir(), "short");
    writeFileSync(path, randomBytes(3 << 20));
    const fd = openSync(path, "r");
    try {
      const threaded = new FileDigest(fd, 1 << 20);
      threaded.written(2 << 20);
      expect(threaded.threaded).toBe(true);
      await expect(threaded.finish(5 << 20)).rejects.toThrow(
        /^the file ends at 3145728 bytes, before the 5242880 written$/,
      );
      await expect(new FileDigest(fd).finish(5 << 20)).rejects.toThrow(/^the file ends at 3145728 bytes/);
    } finally {
      closeSync(fd);
    }
  });

  test("FileDigest: once stopped, it hashes no more and says so", async () => {
    const path = join(tempDir(), "stopped");
    writeFileSync(path, randomBytes(4 << 20));
    const fd = openSync(path, "r");
    try {
      const digest = new FileDigest(fd, 1 << 20);
      digest.written(2 << 20);
      await digest.abort();
      expect(digest.threaded).toBe(false);
      digest.written(4 << 20); // no new thread
      expect(digest.threaded).toBe(false);
      await expect(digest.finish(4 << 20)).rejects.toThrow("hashing was stopped");
    } finally {
      closeSync(fd);
    }
  });
});

describe("a staged file's data", () => {
  test("is flushed to the disk while it is written, and a discarded one leaves nothing", async () => {
    const dir = tempDir();
    const path = join(dir, "rows.jsonl");
    const sink = openByteSink(path, { digest: true });
    const before = flushes.count;
    const chunk = randomBytes(4 << 20);
    for (let i = 0; i < 20; i++) await sink.write(chunk);
    await new Promise<void>((resolve) => sink.write("", resolve)); // everything before it is in the file
    expect(flushes.count - before).toBeGreaterThanOrEqual(1); // 80 MB: at least one flush on the way
    await sink.close();
    sink.discard!();
    expect(existsSync(path)).toBe(false);
    expect(readdirSync(dir)).toEqual([]);
  });
});
