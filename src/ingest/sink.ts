// Byte output to a file or stdout with backpressure: a write waits for 'drain' when the stream's
// buffer is full, so a large run never holds its whole output in memory.
import { createWriteStream } from "node:fs";
import type { Writable } from "node:stream";

export interface ByteSink {
  /** `written` is called once the stream is done with `data` (its buffer may then be reused). */
  write(data: Uint8Array | string, written?: () => void): Promise<void> | void;
  close(): Promise<void>;
}

export function openByteSink(path: string | undefined): ByteSink {
  const toStdout = path === undefined || path === "-";
  // A deep buffer lets queued chunks leave in one writev and keeps the writer from waiting on
  // every 'drain' (the default 16 KB is less than one row chunk).
  const out: Writable = toStdout ? process.stdout : createWriteStream(path, { highWaterMark: 8 << 20 });
  let failure: Error | null = null;
  const onError = (error: Error) => {
    failure = error;
  };
  out.on("error", onError);
  return {
    write(data, written) {
      if (failure) throw failure;
      if (out.write(data, written === undefined ? undefined : () => written())) return;
      return new Promise((resolve, reject) => {
        const done = () => {
          out.off("drain", done);
          out.off("error", done);
          if (failure) reject(failure);
          else resolve();
        };
        out.once("drain", done);
        out.once("error", done);
      });
    },
    close() {
      if (toStdout) {
        out.off("error", onError);
        return failure ? Promise.reject(failure) : Promise.resolve();
      }
      return new Promise<void>((resolve, reject) => out.end((error?: Error | null) => (error ? reject(error) : resolve())));
    },
  };
}
