// A writer's row groups filled straight from a plan's records (DirectColumns, what `rows` uses on
// the writer's own thread): the same bytes as records written the usual way, however direct
// records, blocks and rolled-back rollouts mix, for Arrow IPC, in-process Parquet and the
// threaded Parquet encoder; and `rows` itself, whose direct path undoes a rollout that fails
// half-way.
import fc from "fast-check";
import { afterEach, describe, expect, test, vi } from "vitest";
import { createColumnarWriter, init, type Row } from "../../src/index.js";
import { ArrowCodec } from "../../src/columnar/arrow.js";
import { Growable, recycler } from "../../src/columnar/buffers.js";
import { RecordColumns, blockBuffers, type ColumnBlock } from "../../src/columnar/columns.js";
import { loadParquet } from "../../src/columnar/load-node.js";
import { ThreadedColumnarWriter } from "../../src/columnar/threaded-writer.js";
import { ColumnarWriter, type ColumnarWriterOptions } from "../../src/columnar/writer.js";
import type { ColumnarFormat } from "../../src/columnar/types.js";
import { LineProcessor, type IngestOptions } from "../../src/ingest/process.js";
import type { Batch } from "../../src/ingest/batches.js";
import { generateRollout, generateSmallRollouts } from "../../bench/generate.js";
import { goodLines } from "../ingest/cli.js";

const cf = await init();
const pq = await loadParquet();
const arrow = new ArrowCodec(await import("apache-arrow"));

/** A row with arrays of its own (a plan's are views of the core's memory). */
function ownArrays(row: Row): Row {
  const copy: Record<string, unknown> = { ...row };
  for (const [field, value] of Object.entries(row))
    if (ArrayBuffer.isView(value)) copy[field] = (value as Uint8Array).slice();
  return copy as unknown as Row;
}

/** Each rollout's rows, with arrays of their own. */
const rollouts: Row[][] = generateSmallRollouts(24, 21, { arrays: "plain" }).map((rollout) => {
  const plan = cf.plan(rollout);
  const rows = plan.rows.map(ownArrays);
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

/**
 * A rollout's fate: written through direct, written as a block, added through direct and rolled
 * back, or failed (an allocation throws at its `failAt`-th growth of a column buffer, as when
 * memory runs out, anywhere in adding its records) and rolled back.
 */
type Step = { rollout: number; how: "direct" | "block" | "rolled back" | "failed"; failAt: number };

/** Row group limits: records and column bytes. */
type Limits = { rows: number; bytes?: number };

/** Adds a rollout's records, the `failAt`-th growth of a column buffer throwing as out of memory. */
function addFailing(writer: Writer, rows: readonly Row[], failAt: number): boolean {
  const reserve = Growable.prototype.reserve;
  let growths = 0;
  const spy = vi.spyOn(Growable.prototype, "reserve").mockImplementation(function (this: Growable<Int32Array>, more) {
    if (more > 0 && this.length + more > this.data.length && ++growths === failAt)
      throw new RangeError("Array buffer allocation failed");
    reserve.call(this, more);
  });
  try {
    for (const row of rows) writer.direct!.add(row);
    return false;
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    return true;
  } finally {
    spy.mockRestore();
  }
}

async function bytesOf(make: Make, format: ColumnarFormat, limits: Limits, steps: readonly Step[], direct: boolean) {
  const chunks: Uint8Array[] = [];
  const writer = make(
    { format, layout: "rows", rowGroupRows: limits.rows, rowGroupBytes: limits.bytes, direct },
    // Copied as they come, and said to be written: Arrow's groups are recycled then.
    {
      write: (bytes, written?: () => void) => {
        chunks.push(bytes.slice());
        written?.();
      },
    },
  );
  /** The steps that were to fail and went in whole (no column buffer grew). */
  const whole = new Set<number>();
  for (const [i, { rollout, how, failAt }] of steps.entries()) {
    const rows = rollouts[rollout];
    if (how === "block") {
      const block = new RecordColumns("rows");
      for (const row of rows) block.add(row);
      await writer.writeBlock(block.finish());
    } else if (!direct) {
      if (how === "direct") await writer.write(rows);
    } else {
      const mark = writer.direct!.mark();
      if (how === "failed") {
        if (addFailing(writer, rows, failAt)) writer.direct!.rollback(mark);
        else whole.add(i);
      } else {
        for (const row of rows) writer.direct!.add(row);
        if (how === "rolled back") writer.direct!.rollback(mark);
      }
      // As `rows` does: what completed groups wait for is written once a piece is flushed.
      if (rollout % 3 === 0) await writer.direct!.drain();
    }
  }
  await writer.close();
  return { bytes: Buffer.concat(chunks), rows: writer.rows, groups: writer.groups, whole };
}

/** Random steps over the rollouts. */
const stepsArbitrary = fc.array(
  fc.record({
    rollout: fc.nat(rollouts.length - 1),
    how: fc.constantFrom<Step["how"]>("direct", "direct", "block", "rolled back", "failed"),
    failAt: fc.integer({ min: 1, max: 12 }),
  }),
  { minLength: 1, maxLength: 12 },
);

/** Direct records against the same kept records written as usual: the same bytes and counts. */
async function sameAsUsual(make: Make, format: ColumnarFormat, limits: Limits, steps: readonly Step[]) {
  const got = await bytesOf(make, format, limits, steps, true);
  const kept = steps.map((step, i): Step => (got.whole.has(i) ? { ...step, how: "direct" } : step));
  const expected = await bytesOf(inProcess, format, limits, kept, false);
  expect(got.rows).toBe(expected.rows);
  expect(got.groups).toBe(expected.groups);
  expect(got.bytes.equals(expected.bytes)).toBe(true);
}

describe("DirectColumns", () => {
  afterEach(() => recycler.setLimit(0));

  test.each(WRITERS)(
    "%s: direct records, blocks, rollbacks and failures give the bytes of the kept records written as usual",
    async (_name, format, make) => {
      await fc.assert(
        fc.asyncProperty(
          stepsArbitrary,
          fc.integer({ min: 1, max: 9 }),
          fc.option(fc.integer({ min: 1, max: 40_000 }), { nil: undefined }),
          async (steps, rows, bytes) => sameAsUsual(make, format, { rows, bytes }, steps),
        ),
        { numRuns: make === threaded ? 4 : 25 },
      );
    },
  );

  test.each(WRITERS.filter(([name]) => name !== "parquet, threaded"))(
    "%s: the same with column buffers recycled, as `rows` has them (groups large enough to pool)",
    async (_name, format, make) => {
      let pooled = 0;
      await fc.assert(
        fc.asyncProperty(stepsArbitrary, fc.integer({ min: 20, max: 60 }), async (steps, rows) => {
          recycler.setLimit(0); // an empty pool for each run
          recycler.setLimit(32 << 20);
          await sameAsUsual(make, format, { rows }, steps);
          if (recycler.bytes > 0) pooled++;
        }),
        { numRuns: 12 },
      );
      expect(pooled).toBeGreaterThan(0); // else nothing here was ever pooled
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

  test("a rollback takes back the first group it drops as the open group's buffers and pools only the others", async () => {
    recycler.setLimit(64 << 20);
    const plan = cf.plan(generateRollout({ calls: 200, seed: 5, arrays: "plain" }));
    const rows = plan.rows.map(ownArrays);
    plan.release();
    const chunks: Uint8Array[] = [];
    const writer = new ColumnarWriter(
      { format: "arrows", layout: "rows", rowGroupRows: 2, direct: true },
      {
        write: (bytes, written?: () => void) => {
          chunks.push(bytes.slice());
          written?.();
        },
      },
      { arrow },
    );
    const direct = writer.direct!;
    direct.add(rows[0]);
    const mark = direct.mark();
    for (const row of rows.slice(1, 7)) direct.add(row);
    const queued = [...(writer as unknown as { waiting: ColumnBlock[] }).waiting];
    expect(queued.length).toBe(3);
    direct.rollback(mark);
    const pooled = new Set((recycler as unknown as { free: ArrayBuffer[] }).free);
    expect(blockBuffers(queued[0]).some((buffer) => pooled.has(buffer))).toBe(false); // the open group's again
    expect(blockBuffers(queued[1]).some((buffer) => pooled.has(buffer))).toBe(true); // used up: pooled
    // The run goes on as if the rolled-back records had never come.
    for (const row of rows.slice(7)) direct.add(row);
    await writer.close();
    const reference: Uint8Array[] = [];
    const expected = await createColumnarWriter(
      { write: (bytes) => void reference.push(bytes.slice()) },
      { format: "arrows", layout: "rows", rowGroupRows: 2 },
    );
    await expected.write([rows[0], ...rows.slice(7)]);
    await expected.close();
    expect(Buffer.concat(chunks).equals(Buffer.concat(reference))).toBe(true);
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
