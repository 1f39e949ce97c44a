// A writer's row groups filled straight from a plan's records (DirectColumns, what `rows` uses on
// the writer's own thread): the same bytes as records written the usual way, however direct
// records, blocks and rolled-back rollouts mix, for Arrow IPC, in-process Parquet and the
// threaded Parquet encoder; and `rows` itself, whose direct path undoes a rollout that fails
// half-way.
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { init, type Row } from "../../src/index.js";
import { ArrowCodec } from "../../src/columnar/arrow.js";
import { RecordColumns } from "../../src/columnar/columns.js";
import { loadParquet } from "../../src/columnar/load-node.js";
import { ThreadedColumnarWriter } from "../../src/columnar/threaded-writer.js";
import { ColumnarWriter, type ColumnarWriterOptions } from "../../src/columnar/writer.js";
import type { ColumnarFormat } from "../../src/columnar/types.js";
import { LineProcessor, type IngestOptions } from "../../src/ingest/process.js";
import type { Batch } from "../../src/ingest/batches.js";
import { generateSmallRollouts } from "../../bench/generate.js";
import { goodLines } from "../ingest/cli.js";

const cf = await init();
const pq = await loadParquet();
const arrow = new ArrowCodec(await import("apache-arrow"));

/** Each rollout's rows, with arrays of their own (a plan's are views of the core's memory). */
const rollouts: Row[][] = generateSmallRollouts(24, 21, { arrays: "plain" }).map((rollout) => {
  const plan = cf.plan(rollout);
  const rows = plan.rows.map((row) => {
    const copy: Record<string, unknown> = { ...row };
    for (const [field, value] of Object.entries(row))
      if (ArrayBuffer.isView(value)) copy[field] = (value as Uint8Array).slice();
    return copy as unknown as Row;
  });
  plan.release();
  return rows;
});

type Writer = ColumnarWriter<"rows">;
type Make = (options: ColumnarWriterOptions & { layout: "rows" }, output: { write(bytes: Uint8Array): void }) => Writer;

const inProcess: Make = (options, output) => new ColumnarWriter(options, output, { arrow, parquet: pq });
const threaded: Make = (options, output) => new ThreadedColumnarWriter(options, output, arrow);

const WRITERS: [string, ColumnarFormat, Make][] = [
  ["arrow", "arrow", inProcess],
  ["arrows", "arrows", inProcess],
  ["parquet", "parquet", inProcess],
  ["parquet, threaded", "parquet", threaded],
];

/** A rollout's fate: written through direct, written as a block, or added through direct and rolled back. */
type Step = { rollout: number; how: "direct" | "block" | "rolled back" };

async function bytesOf(
  make: Make,
  format: ColumnarFormat,
  rowGroupRows: number,
  steps: readonly Step[],
  direct: boolean,
) {
  const chunks: Uint8Array[] = [];
  const writer = make(
    { format, layout: "rows", rowGroupRows, direct },
    { write: (bytes) => void chunks.push(bytes.slice()) },
  );
  for (const { rollout, how } of steps) {
    const rows = rollouts[rollout];
    if (how === "block") {
      const block = new RecordColumns("rows");
      for (const row of rows) block.add(row);
      await writer.writeBlock(block.finish());
    } else if (!direct) {
      if (how === "direct") await writer.write(rows);
    } else {
      const mark = writer.direct!.mark();
      for (const row of rows) writer.direct!.add(row);
      if (how === "rolled back") writer.direct!.rollback(mark);
      // As `rows` does: what completed groups wait for is written once a piece is flushed.
      else if (rollout % 3 === 0) await writer.direct!.drain();
    }
  }
  await writer.close();
  return { bytes: Buffer.concat(chunks), rows: writer.rows, groups: writer.groups };
}

describe("DirectColumns", () => {
  test.each(WRITERS)(
    "%s: direct records, blocks and rollbacks give the bytes of the kept records written as usual",
    async (_name, format, make) => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.record({
              rollout: fc.nat(rollouts.length - 1),
              how: fc.constantFrom<Step["how"]>("direct", "direct", "block", "rolled back"),
            }),
            { minLength: 1, maxLength: 12 },
          ),
          fc.integer({ min: 1, max: 9 }),
          async (steps, rowGroupRows) => {
            const got = await bytesOf(make, format, rowGroupRows, steps, true);
            const expected = await bytesOf(inProcess, format, rowGroupRows, steps, false);
            expect(got.rows).toBe(expected.rows);
            expect(got.groups).toBe(expected.groups);
            expect(got.bytes.equals(expected.bytes)).toBe(true);
          },
        ),
        { numRuns: make === threaded ? 4 : 25 },
      );
    },
  );

  test("a rollback undoes records that completed groups, and ones that did not", async () => {
    const writer = new ColumnarWriter(
      { format: "arrows", layout: "rows", rowGroupRows: 3, direct: true },
      { write: () => {} },
      { arrow },
    );
    const direct = writer.direct!;
    const many = rollouts.find((rows) => rows.length >= 7)!;
    direct.add(many[0]);
    const mark = direct.mark();
    for (const row of many) direct.add(row);
    expect(direct.bytes).toBeGreaterThan(0); // groups completed since the mark ...
    direct.rollback(mark);
    expect(direct.bytes).toBe(0); // ... are dropped, and the open group holds its one record again
    const again = direct.mark();
    expect(again.cut.length).toBe(1);
    direct.add(many[1]);
    direct.rollback(again);
    expect(direct.mark().cut).toEqual(again.cut);
    await writer.close();
    expect(writer.rows).toBe(1);
  });

  test("a writer without the option has none (Parquet's groups then reuse their buffers)", () => {
    for (const format of ["arrow", "parquet"] as const)
      expect(
        new ColumnarWriter({ format, layout: "rows" }, { write: () => {} }, { arrow, parquet: pq }).direct,
      ).toBeNull();
  });
});

describe("rows' direct path", () => {
  const OPTIONS: IngestOptions = {
    reader: "scan",
    backend: "wasm",
    from: "auto",
    maskFormat: "bits",
    notes: true,
    columns: true,
  };
  const batchOf = (lines: string[]): Batch => ({
    bytes: new Uint8Array(Buffer.from(lines.join("\n") + "\n")),
    firstLine: 1,
    lineCount: lines.length,
  });

  /** The Arrow IPC bytes and reports of a batch planned with the writer's direct path. */
  async function planned(lines: string[], failOn?: string) {
    const chunks: Uint8Array[] = [];
    const writer = new ColumnarWriter(
      { format: "arrows", layout: "rows", rowGroupRows: 2, direct: true },
      { write: (bytes) => void chunks.push(bytes.slice()) },
      { arrow },
    );
    const direct = writer.direct!;
    const add = direct.add.bind(direct);
    let added = 0;
    // The rollout `failOn` runs out of memory at its third record, after a group completed.
    direct.add = (record) => {
      if ((record as Row).rolloutId === failOn && ++added === 3) throw new RangeError("Array buffer allocation failed");
      add(record);
    };
    const processor = await LineProcessor.create(OPTIONS, direct);
    let reports = "";
    await processor.processBatch(batchOf(lines), "in.jsonl", async (piece) => {
      expect(piece.columns).toBeUndefined(); // records went to the writer, not into a block
      await direct.drain();
      reports += piece.reports;
    });
    await writer.close();
    return { bytes: Buffer.concat(chunks), reports: reports.split("\n").filter((line) => line !== "") };
  }

  test("a rollout that fails half-way is undone; the others' bytes are those of a run without it", async () => {
    const [first, big, third] = goodLines(2, 5);
    const bigId = JSON.parse(big).rollout_id as string;
    const reference = await planned([first, third]);
    const result = await planned([first, big, third], bigId);
    expect(JSON.parse(result.reports[1])).toMatchObject({ rollout_id: bigId, reason: "rollout_too_large" });
    expect(result.bytes.equals(reference.bytes)).toBe(true);
  });
});
