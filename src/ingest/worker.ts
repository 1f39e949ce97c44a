// Worker thread for `rows --jobs N`: its own WASM instances (core, scanner, row writer), one
// batch at a time. Batches arrive transferred (no copy); row bytes go back transferred, in order,
// in pieces, with the batch's buffer; written row blocks come back here for reuse.
import { parentPort, workerData } from "node:worker_threads";
import { LineProcessor, type IngestOptions, type Piece } from "./process.js";
import type { ToWorker, FromWorker } from "./pool.js";
import type { Batch } from "./batches.js";
import { CoreUnavailableError } from "../core/errors.js";
import { errorLine } from "../messages.js";
import { blockBuffers } from "../columnar/columns.js";

const port = parentPort!;
const post = (message: FromWorker, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);

let processor: LineProcessor | null = null;
let queue: Promise<void> = LineProcessor.create(workerData as IngestOptions).then(
  (created) => {
    processor = created;
  },
  (error: unknown) => post(fatal(errorLine(error), error)),
);

/** The fatal message for `error`, with its kind when the main thread maps it to an exit code. */
function fatal(message: string, error: unknown): FromWorker {
  return error instanceof CoreUnavailableError
    ? { type: "fatal", message, kind: "core_unavailable" }
    : { type: "fatal", message };
}

port.on("message", (received: ToWorker) => {
  if ("blocks" in received) {
    for (const block of received.blocks) processor?.giveBlock(block);
    return;
  }
  const message = received;
  // One batch after another: pieces of a batch must leave in order.
  queue = queue.then(async () => {
    if (processor === null) return;
    const views = message.buffers.map((buffer, i) => new Uint8Array(buffer, 0, message.lengths[i]));
    const { firstLine, lineCount, dropped } = message;
    const batch: Batch =
      dropped !== undefined
        ? { bytes: new Uint8Array(0), dropped, firstLine, lineCount }
        : message.parts
          ? { bytes: new Uint8Array(0), parts: views, firstLine, lineCount }
          : { bytes: views[0], firstLine, lineCount };
    try {
      await processor.processBatch(batch, message.name, (piece: Piece) => {
        const transfer = piece.rows.map((chunk) => chunk.buffer as ArrayBuffer);
        if (piece.columns !== undefined) transfer.push(...blockBuffers(piece.columns)); // a few dozen buffers
        // The last piece takes the input buffers home for reuse.
        // not push(...): a line may come in 100,000s of parts
        if (piece.last) for (const buffer of message.buffers) transfer.push(buffer);
        post({ type: "piece", seq: message.seq, piece, ...(piece.last ? { buffers: message.buffers } : {}) }, transfer);
      });
    } catch (error) {
      post(fatal(`${message.name}:${message.firstLine}+: ${errorLine(error)}`, error));
    }
  });
});
