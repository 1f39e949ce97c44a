// The Parquet encoder's own thread (`rows -o x.parquet`): row groups come in, in order, as Arrow
// IPC streams, and go through parquet-wasm; the file's bytes go back to the thread that writes
// them out, and so does each stream's buffer, to be filled again. Encoding is the costliest step
// of Parquet output; here it runs beside planning instead of taking turns with it.
import { parentPort, workerData } from "node:worker_threads";
import { errorLine } from "../messages.js";
import { loadParquet } from "./load-node.js";
import { ParquetStreamEncoder } from "./parquet.js";
import type { ParquetCompression } from "./types.js";

export type ToEncoder = { type: "ipc"; bytes: Uint8Array } | { type: "close" };
export type FromEncoder =
  | { type: "bytes"; bytes: Uint8Array }
  | { type: "taken"; buffer: ArrayBuffer }
  | { type: "closed" }
  | { type: "error"; message: string };

export interface EncoderOptions {
  compression?: ParquetCompression;
}

const port = parentPort!;
const post = (message: FromEncoder, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);
const options = workerData as EncoderOptions;

const output = {
  write(bytes: Uint8Array) {
    // Sent without a copy when the chunk owns its whole buffer.
    const own = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice();
    post({ type: "bytes", bytes: own }, [own.buffer as ArrayBuffer]);
  },
};

let failed = false;
const encoder = (async () => new ParquetStreamEncoder(await loadParquet(), output, options.compression))();
let queue: Promise<unknown> = encoder.catch((error: unknown) => {
  failed = true;
  post({ type: "error", message: errorLine(error) });
});

port.on("message", (message: ToEncoder) => {
  queue = queue.then(async () => {
    if (failed) return;
    try {
      if (message.type === "ipc") {
        await (await encoder).write(message.bytes);
        post({ type: "taken", buffer: message.bytes.buffer as ArrayBuffer }, [message.bytes.buffer as ArrayBuffer]);
      } else {
        // The writing thread sends a batch before closing, an empty one if it had none.
        await (await encoder).finish(() => {
          throw new Error("the Parquet encoder thread was closed before any batch");
        });
        post({ type: "closed" });
      }
    } catch (error) {
      failed = true;
      post({ type: "error", message: errorLine(error) });
    }
  });
});
