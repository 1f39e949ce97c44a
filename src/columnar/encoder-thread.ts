// The Parquet encoder's own thread (`rows -o x.parquet`): row groups come in, in order, as Arrow
// IPC streams (most in buffers shared with the writing thread), and go through parquet-wasm; the
// file's bytes go back to the thread that writes them out, and word that each stream is copied
// in, so that its buffer can be filled again (and, first, a spare buffer touched here for the
// first stream). Encoding is the costliest step of Parquet output; here it runs beside planning
// instead of taking turns with it.
import { parentPort, workerData } from "node:worker_threads";
import { errorLine } from "../messages.js";
import { loadParquet, parquetWasmExports } from "./load-node.js";
import { touchInSteps, warmHeap } from "./warm-heap.js";
import { ParquetStreamEncoder } from "./parquet.js";
import type { ParquetCompression } from "./types.js";

export type ToEncoder = { type: "ipc"; bytes: Uint8Array } | { type: "close" };
export type FromEncoder =
  | { type: "bytes"; bytes: Uint8Array }
  | { type: "copied" }
  | { type: "spare"; buffer: SharedArrayBuffer }
  | { type: "taken" }
  | { type: "closed" }
  | { type: "error"; message: string };

export interface EncoderOptions {
  compression?: ParquetCompression;
  /**
   * V8's tiering budget for parquet-wasm's compile here (see wasm-tiering.ts); V8's own when not
   * given. The writing thread gives it only when no other thread may be compiling meanwhile.
   */
  tieringBudget?: number;
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

/**
 * Bytes of parquet-wasm's heap to touch while this thread waits for its first row group. Encoding
 * row groups of 16 MiB grows the heap to 65-81 MB (measured on the bench's inputs), and the first
 * touch of each page costs about 12 µs on this project's VMs: about 0.2 s on the encoder, which
 * is the slower of the two threads once groups come. The main thread takes most of a second to
 * fill the first group of a large input, so the touches fit in that wait; a small input's first
 * group comes sooner and stops them early, so it does not pay for them.
 */
const WARM_BYTES = 64 << 20;

/**
 * A buffer, touched here once the heap is warm and before the first row group comes, for the
 * writing thread to put that group's IPC stream in (see threaded-writer.ts). Fresh, its first
 * touches cost the writing thread about 60 ms (a 16 MiB group's stream) just as its first group
 * is due here; this thread has that time to spare. Room for 1.5 groups, as the writing thread
 * would make.
 */
const SPARE_STREAM_BYTES = 24 << 20;

/** Touches a spare stream buffer and sends it to the writing thread; the function returned stops it. */
function sendSpareBuffer(): () => void {
  const buffer = new SharedArrayBuffer(SPARE_STREAM_BYTES);
  const bytes = new Uint8Array(buffer);
  return touchInSteps(
    () => bytes,
    () => post({ type: "spare", buffer }),
  );
}

let failed = false;
let stopWarming = () => {};
let stopSpare = () => {};
const encoder = (async () => {
  const parquet = new ParquetStreamEncoder(
    await loadParquet({ tieringBudget: options.tieringBudget }),
    output,
    options.compression,
  );
  stopWarming = warmHeap(await parquetWasmExports(), WARM_BYTES, () => {
    stopSpare = sendSpareBuffer();
  });
  return parquet;
})();
let queue: Promise<unknown> = encoder.catch((error: unknown) => {
  failed = true;
  post({ type: "error", message: errorLine(error) });
});

port.on("message", (message: ToEncoder) => {
  queue = queue.then(async () => {
    stopWarming();
    stopSpare();
    if (failed) return;
    try {
      if (message.type === "ipc") {
        const parquet = await encoder;
        const taking = parquet.write(message.bytes);
        // write() copies the stream into parquet-wasm before it returns: its buffer can take the
        // next group's stream at once, while this one waits for the encoder.
        post({ type: "copied" });
        await taking;
        post({ type: "taken" });
      } else {
        // The writing thread sends a batch before closing, an empty one if it had none.
        await (await encoder).finish(() => {
          throw new Error("the Parquet encoder thread was closed before any batch");
        });
        post({ type: "closed" });
        // Nothing more comes: the thread ends by itself, torn down (20-40 ms, measured, with
        // parquet-wasm's heap to free) while the writing thread goes on to the run's report.
        port.close();
      }
    } catch (error) {
      failed = true;
      post({ type: "error", message: errorLine(error) });
    }
  });
});
