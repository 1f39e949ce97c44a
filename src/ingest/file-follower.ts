// What follows a staged output file as the sink writes it (see sink.ts), through a descriptor of
// its own: its data is flushed to the disk as it grows, so the fsync before the rename waits for
// the last few megabytes rather than all of them, and its SHA-256 is taken off the writing
// thread (FileDigest). Linux flushes a file, not a descriptor, so one opened for reading will do.
import { closeSync, fdatasync, fsyncSync, openSync } from "node:fs";
import { DIGEST_THREAD_FROM_BYTES, FileDigest } from "./file-digest.js";

/** A flush to the disk starts once this many bytes were written since the last one began. */
const WRITEBACK_BYTES = 32 << 20;

export interface FollowOptions {
  /** Take the file's SHA-256 (finish() returns it). */
  digest: boolean;
  /** From this size on, it is hashed on a thread (default DIGEST_THREAD_FROM_BYTES; tests use less). */
  digestThreadFromBytes?: number;
}

export class FileFollower {
  private readonly fd: number;
  private readonly digest: FileDigest | null;
  /** Bytes in the file (written by the sink's stream). */
  private inFile = 0;
  private flushedTo = 0;
  private flushing: Promise<void> | null = null;
  private failure: Error | null = null;
  private open = true;

  /** Opens `path` for reading (throws the open's error). */
  constructor(path: string, options: FollowOptions) {
    this.fd = openSync(path, "r");
    this.digest = options.digest
      ? new FileDigest(this.fd, options.digestThreadFromBytes ?? DIGEST_THREAD_FROM_BYTES)
      : null;
  }

  /** `bytes` more bytes are in the file, after those before them. */
  written(bytes: number): void {
    if (!this.open) return;
    this.inFile += bytes;
    this.digest?.written(this.inFile);
    if (this.flushing === null && this.inFile - this.flushedTo >= WRITEBACK_BYTES) {
      this.flushedTo = this.inFile;
      this.flushing = new Promise<void>((resolve) =>
        fdatasync(this.fd, (error) => {
          // An error is told once per open file (errseq): the fsync in finish() might not see it again.
          if (error) this.failure ??= error;
          this.flushing = null;
          resolve();
        }),
      );
    }
  }

  /**
   * Once everything is written: the file's data and size on the disk (fsync), then its SHA-256
   * (null unless asked for). Closes the descriptor; throws the first failure.
   */
  async finish(): Promise<string | null> {
    try {
      await this.flushing;
      if (this.failure !== null) throw this.failure;
      fsyncSync(this.fd);
      return this.digest === null ? null : await this.digest.finish(this.inFile);
    } finally {
      this.close();
    }
  }

  /**
   * Stops following (idempotent): no more hashing or flushing; the descriptor is closed once no
   * read or flush can still use it (its number could otherwise be reused under them).
   */
  close(): void {
    if (!this.open) return;
    this.open = false;
    const stopped = [this.flushing, this.digest?.abort()].filter((p) => p != null);
    if (stopped.length === 0) closeSync(this.fd);
    else void Promise.all(stopped).then(() => closeSync(this.fd));
  }
}
