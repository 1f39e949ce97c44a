// The Parquet encoder's own thread (`rows -o x.parquet`): column blocks come in, in order, and
// go through a ColumnarWriter; the file's bytes go back to the thread that writes them out.
// Encoding is the costliest step of Parquet output; here it runs beside planning instead of
// taking turns with it on the thread that routes every piece.
import { parentPort, workerData } from "node:worker_threads";
import { errorLine } from "../messages.js";
import type { ColumnBlock } from "./columns.js";
import { loadParquet } from "./load-node.js";
import { ColumnarWriter, type ColumnarWriterOptions } from "./writer.js";

export type ToEncoder = { type: "block"; block: ColumnBlock } | { type: "close" };
export type FromEncoder =
  | { type: "bytes"; bytes: Uint8Array }
  | { type: "taken"; groups: number }
  | { type: "closed"; rows: number; groups: number }
  | { type: "error"; message: string };

const port = parentPort!;
const post = (message: FromEncoder, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);
const options = workerData as ColumnarWriterOptions;

const output = {
  write(bytes: Uint8Array) {
    // Sent without a copy when the chunk owns its whole buffer.
    const own = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice();
    post({ type: "bytes", bytes: own }, [own.buffer as ArrayBuffer]);
  },
};

let failed = false;
const writer = (async () =>
  new ColumnarWriter(options, output, options.format === "parquet" ? await loadParquet() : null))();
let queue: Promise<unknown> = writer.catch((error: unknown) => {
  failed = true;
  post({ type: "error", message: errorLine(error) });
});

port.on("message", (message: ToEncoder) => {
  queue = queue.then(async () => {
    if (failed) return;
    try {
      if (message.type === "block") {
        const taking = await writer;
        await taking.writeBlock(message.block);
        post({ type: "taken", groups: taking.groups });
      } else {
        const done = await writer;
        await done.close();
        post({ type: "closed", rows: done.rows, groups: done.groups });
      }
    } catch (error) {
      failed = true;
      post({ type: "error", message: errorLine(error) });
    }
  });
});
