// The SHA-256 of a file while it is being written, off the thread that writes it: a worker
// thread reads the bytes back (from the page cache) as the writer reports them written, and
// hashes them. Hashing on the writing thread cost `rows` a quarter of a second per 400 MB of
// output (SHA-256 runs at ~1.7 GB/s here), all of it on the thread that plans and formats.
// A small file is hashed at the end instead, on the calling thread: a thread's start-up would
// cost it more than the hash.
import { createHash } from "node:crypto";
import { Worker } from "node:worker_threads";
import type { FromDigestThread, ToDigestThread } from "./file-digest-thread.js";
import { threadUrl } from "../thread-url.js";
import { READ_BYTES, hashRange } from "./file-hash.js";

/** A thread starts once this many bytes are written; smaller files are hashed at the end. */
export const DIGEST_THREAD_FROM_BYTES = 8 << 20;
/** The thread is told how far to read every this many bytes. */
const STEP_BYTES = 4 << 20;
/** SHA-256 (hex) of bytes [0, end) of the open file `fd`, read on this thread. */
function hashFile(fd: number, end: number): string {
  const hash = createHash("sha256");
  hashRange(hash, fd, 0, end, Buffer.allocUnsafe(Math.min(READ_BYTES, Math.max(end, 1))));
  return hash.digest("hex");
}

export class FileDigest {
  private worker: Worker | null = null;
  private told = 0;
  private failure: Error | null = null;
  private result: ((message: FromDigestThread) => void) | null = null;

  /**
   * `fd` is open for reading on the file (and stays open until finish() settles); files of at
   * least `threadFromBytes` are hashed on a thread.
   */
  constructor(
    private readonly fd: number,
    private readonly threadFromBytes = DIGEST_THREAD_FROM_BYTES,
  ) {}

  /** Whether a thread hashes the file (it has reached threadFromBytes). */
  get threaded(): boolean {
    return this.worker !== null;
  }

  /** The first `bytes` of the file are written (readable through the descriptor). */
  written(bytes: number): void {
    if (this.failure !== null) return;
    if (this.worker === null) {
      if (bytes < this.threadFromBytes) return;
      this.start();
    }
    if (bytes - this.told >= STEP_BYTES) this.tell({ upTo: bytes, last: false });
  }

  /** The file's SHA-256 (hex), once all `bytes` of it are written. */
  async finish(bytes: number): Promise<string> {
    if (this.failure !== null) throw this.failure;
    if (this.worker === null) return hashFile(this.fd, bytes);
    const worker = this.worker;
    worker.ref(); // nothing else may keep the process alive while it hashes the rest
    try {
      const message = await new Promise<FromDigestThread>((resolve) => {
        this.result = resolve;
        if (this.failure !== null) resolve({ error: this.failure.message });
        else this.tell({ upTo: bytes, last: true });
      });
      if ("error" in message) throw new Error(message.error);
      return message.sha256;
    } finally {
      void this.abort();
    }
  }

  private start(): void {
    const worker = new Worker(threadUrl(import.meta.url, "ingest", "file-digest-thread.js"), {
      workerData: { fd: this.fd },
    });
    worker.unref(); // while the file is written, its writes keep the process alive
    worker.on("message", (message: FromDigestThread) => this.settle(message));
    worker.on("error", (error) => this.settle({ error: error.message }));
    worker.on("exit", (code) => this.settle({ error: `the hashing thread stopped (exit code ${code})` }));
    this.worker = worker;
  }

  private tell(message: ToDigestThread): void {
    this.told = message.upTo;
    this.worker!.postMessage(message);
  }

  private settle(message: FromDigestThread): void {
    if ("error" in message) this.failure ??= new Error(message.error);
    const result = this.result;
    this.result = null;
    result?.(message);
  }

  /** Stops hashing; resolves once the thread has stopped (it reads no more), null when none ran. */
  abort(): Promise<void> | null {
    const worker = this.worker;
    if (worker === null) return null;
    this.worker = null;
    this.failure ??= new Error("hashing was stopped");
    worker.removeAllListeners("exit");
    return worker.terminate().then(
      () => undefined,
      () => undefined,
    );
  }
}
