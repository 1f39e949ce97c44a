// Text output to a file or stdout that respects backpressure, so a large run never buffers
// its whole output in memory.
import { createWriteStream } from "node:fs";
import type { Writable } from "node:stream";

export interface Sink {
  write(text: string): Promise<void> | void;
  close(): Promise<void>;
}

export function openSink(path: string | undefined): Sink {
  const out: Writable = path === undefined || path === "-" ? process.stdout : createWriteStream(path);
  let failure: Error | null = null;
  out.on("error", (error) => {
    failure = error;
  });
  return {
    write(text) {
      if (failure) throw failure;
      if (out.write(text)) return;
      return new Promise((resolve) => out.once("drain", () => resolve()));
    },
    close() {
      if (out === process.stdout) return Promise.resolve();
      return new Promise<void>((resolve, reject) => out.end((error?: Error | null) => (error ? reject(error) : resolve())));
    },
  };
}
