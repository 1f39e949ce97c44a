// A ColumnarWriter over an output that queues (`queued`, what `rows` gives it: a Node stream)
// hands a row group's chunks over at once and waits for them only before the next group: the
// same bytes as waiting on every chunk, never more than one group waiting in the output, and a
// failed write reported by the writer's next call.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { init, type Row } from "../../src/index.js";
import { ArrowCodec } from "../../src/columnar/arrow.js";
import { ColumnarWriter } from "../../src/columnar/writer.js";
import { generateSmallRollouts } from "../../bench/generate.js";

const cf = await init();
const arrow = new ArrowCodec(await import("apache-arrow"));

/** Rows with arrays of their own (a plan's are views of the core's memory). */
const rows: Row[] = generateSmallRollouts(12, 5, { arrays: "plain" }).flatMap((rollout) => {
  const plan = cf.plan(rollout);
  const own = plan.rows.map((row) => {
    const copy: Record<string, unknown> = { ...row };
    for (const [field, value] of Object.entries(row))
      if (ArrayBuffer.isView(value)) copy[field] = (value as Uint8Array).slice();
    return copy as unknown as Row;
  });
  plan.release();
  return own;
});

/**
 * An output that queues what it is given and writes it only when flushed, as a stream over its
 * buffer does: each write returns the wait for the next flush (shared, as ByteSink's is).
 */
class QueueingOutput {
  readonly out: Uint8Array[] = [];
  private queue: { chunk: Uint8Array; written?: () => void }[] = [];
  private flushed: { promise: Promise<void>; resolve: () => void; reject: (error: Error) => void } | null = null;

  write(chunk: Uint8Array, written?: () => void): Promise<void> {
    this.queue.push({ chunk: chunk.slice(), written });
    if (this.flushed === null) {
      let resolve!: () => void;
      let reject!: (error: Error) => void;
      const promise = new Promise<void>((yes, no) => {
        resolve = yes;
        reject = no;
      });
      this.flushed = { promise, resolve, reject };
    }
    return this.flushed.promise;
  }

  /** Bytes handed over and not yet written. */
  get queuedBytes(): Buffer {
    return Buffer.concat(this.queue.map(({ chunk }) => chunk));
  }

  flush(failure?: Error): void {
    const queue = this.queue;
    const flushed = this.flushed;
    this.queue = [];
    this.flushed = null;
    if (failure !== undefined) {
      flushed?.reject(failure);
      return;
    }
    for (const { chunk } of queue) this.out.push(chunk);
    for (const { written } of queue) written?.();
    flushed?.resolve();
  }

  bytes(): Buffer {
    return Buffer.concat(this.out);
  }
}

/** Turns of the event loop: enough for a writer that is not waiting on the output to go on. */
const turns = async (count = 5) => {
  for (let i = 0; i < count; i++) await new Promise((resolve) => setImmediate(resolve));
};

/** Runs `work` against `output`, flushing it whenever the writer waits on it, until `work` settles. */
async function flushingUntil(output: QueueingOutput, work: Promise<void>): Promise<void> {
  let settled = false;
  const done = work.finally(() => {
    settled = true;
  });
  while (!settled) {
    await turns();
    output.flush();
  }
  await done;
}

/** The bytes of the usual writer, whose output is waited on for every chunk. */
async function usualBytes(format: "arrow" | "arrows", rowGroupRows: number, records: Row[]): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  const writer = new ColumnarWriter(
    { format, layout: "rows", rowGroupRows },
    { write: (chunk) => void chunks.push(chunk.slice()) },
    { arrow },
  );
  await writer.write(records);
  await writer.close();
  return Buffer.concat(chunks);
}

/** Record batches in IPC stream bytes (ended here with the end-of-stream marker if they lack it). */
async function batchesIn(stream: Uint8Array): Promise<number> {
  const { RecordBatchReader } = await import("apache-arrow");
  const ended = Buffer.concat([stream, new Uint8Array([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0])]);
  let count = 0;
  for (const _ of RecordBatchReader.from(ended)) count++;
  return count;
}

describe("ColumnarWriter with `queued`", () => {
  test.each(["arrow", "arrows"] as const)("%s: the bytes of the writer that waits on every chunk", async (format) => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 0, max: rows.length }),
        async (rowGroupRows, count) => {
          const records = rows.slice(0, count);
          const output = new QueueingOutput();
          const writer = new ColumnarWriter({ format, layout: "rows", rowGroupRows, queued: true }, output, { arrow });
          await flushingUntil(
            output,
            (async () => {
              await writer.write(records);
              await writer.close();
            })(),
          );
          expect(output.bytes().equals(await usualBytes(format, rowGroupRows, records))).toBe(true);
        },
      ),
      { numRuns: 15 },
    );
  });

  test("one row group at a time waits in the output: the next is handed over once it is written", async () => {
    const output = new QueueingOutput();
    const writer = new ColumnarWriter({ format: "arrows", layout: "rows", rowGroupRows: 2, queued: true }, output, {
      arrow,
    });
    const written = writer.write(rows.slice(0, 7)); // groups of 2, 2, 2 (and 1 left open)
    let settled = false;
    void written.then(() => {
      settled = true;
    });
    await turns();
    expect(await batchesIn(output.queuedBytes)).toBe(1); // the schema and the first group, no more
    expect(settled).toBe(false);
    for (const group of ["second", "third"]) {
      output.flush(); // the group before it written
      await turns();
      const queued = Buffer.concat([schemaOf(output.bytes()), output.queuedBytes]);
      expect(await batchesIn(queued), group).toBe(1); // this group alone
    }
    // The third group is handed over, and write() is done: it does not wait for its own group.
    expect(settled).toBe(true);
    await flushingUntil(output, writer.close());
    expect(output.bytes().equals(await usualBytes("arrows", 2, rows.slice(0, 7)))).toBe(true);
  });

  test("a failed write is reported by the writer's next call, not as an unhandled rejection", async () => {
    const output = new QueueingOutput();
    const writer = new ColumnarWriter({ format: "arrow", layout: "rows", rowGroupRows: 2, queued: true }, output, {
      arrow,
    });
    await writer.write(rows.slice(0, 2)); // the first group, handed over
    output.flush(new Error("disk full"));
    await turns(); // no unhandled rejection meanwhile (vitest fails the run on one)
    await expect(writer.write(rows.slice(2, 4))).rejects.toThrow("disk full");
  });
});

/** The schema message an IPC stream starts with: its marker, its length, then that many bytes. */
function schemaOf(stream: Uint8Array): Uint8Array {
  const length = new DataView(stream.buffer, stream.byteOffset + 4, 4).getInt32(0, true);
  return stream.subarray(0, 8 + length);
}
