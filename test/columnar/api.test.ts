// The columnar API (toArrowTable, toArrowIPC, toParquet, createColumnarWriter) and the pieces
// under it: bit copies, column blocks cut into row groups the same way however records arrive.
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { createColumnarWriter, init, toArrowIPC, toArrowTable, toParquet, type Plan } from "../../src/index.js";
import { copyBits } from "../../src/columnar/buffers.js";
import { RecordColumns, type ColumnBlock } from "../../src/columnar/columns.js";
import { ColumnarWriter, GroupCutter, type GroupBuffers } from "../../src/columnar/writer.js";
import { loadArrowBundle, loadParquet } from "../../src/columnar/load-node.js";
import { ArrowCodec } from "../../src/columnar/arrow.js";
import { generateMediaRollout, generateSmallRollouts } from "../../bench/generate.js";
import { cli, tempDir } from "../ingest/cli.js";
import { LOGIN_BUG, ROOT } from "../support/fixtures.js";
import { duckdb, ipcRecords, jsonlRecords, parquetRecords } from "./support.js";
import type { Layout } from "../../src/columnar/schema.js";
import { ThreadedColumnarWriter } from "../../src/columnar/threaded-writer.js";
import type { ColumnarWriter as ColumnarWriterType } from "../../src/columnar/types.js";

const cf = await init();
const codec = new ArrowCodec(await import("apache-arrow"));
const example = JSON.parse(readFileSync(LOGIN_BUG, "utf8"));

/** Plans of a varied batch (the example, small generated rollouts, a media-heavy one), with trees and bins. */
function plans(): Plan[] {
  const rollouts = [
    example,
    ...generateSmallRollouts(25, 5, { arrays: "plain" }),
    generateMediaRollout({ turns: 9, imageTokens: 7, swapEvery: 4, seed: 2 }),
  ];
  return rollouts.map((rollout) => cf.plan(rollout, { trees: true, capacity: 8192 }));
}

describe("copyBits", () => {
  test("copies any run of bits from any offset to any offset (against bit by bit)", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 1, maxLength: 40 }),
        fc.nat(320),
        fc.nat(320),
        fc.nat(64),
        (src, srcBit, dstBit, count) => {
          srcBit %= src.length * 8;
          count = Math.min(count, src.length * 8 - srcBit);
          const dst = new Uint8Array(((dstBit + count + 7) >> 3) + 1);
          copyBits(src, srcBit, dst, dstBit, count);
          const expected = new Uint8Array(dst.length);
          for (let i = 0; i < count; i++)
            if ((src[(srcBit + i) >> 3] >> ((srcBit + i) & 7)) & 1)
              expected[(dstBit + i) >> 3] |= 1 << ((dstBit + i) & 7);
          expect(dst).toEqual(expected);
        },
      ),
    );
  });
});

describe("row groups", () => {
  const layouts: [Layout, (plan: Plan) => readonly unknown[]][] = [
    ["rows", (plan) => plan.rows],
    ["trees", (plan) => plan.trees],
    ["bins", (plan) => plan.bins],
  ];

  test.each(layouts)(
    "%s: records one by one and in blocks cut anywhere make the same groups, byte for byte",
    (layout, recordsOf) => {
      const planned = plans();
      const records = planned.flatMap(recordsOf);
      const bytesOf = (groups: ColumnBlock[]) =>
        groups.map((group) => Buffer.from(codec.ipcStream(layout, codec.recordBatch(group))).toString("base64"));
      const oneByOne = (rows: number, bytes: number) => {
        const cutter = new GroupCutter(layout, rows, bytes);
        const groups = records
          .map((record) => cutter.add(record as never))
          .filter((group): group is ColumnBlock => group !== null);
        return bytesOf([...groups, cutter.end()]);
      };
      fc.assert(
        fc.property(
          fc.integer({ min: 1, max: 9 }),
          fc.integer({ min: 1, max: 60_000 }),
          fc.array(fc.nat(records.length), { maxLength: 8 }),
          fc.constantFrom<GroupBuffers>("reused", "copied", "handedOff"),
          fc.constantFrom(0, 1 << 12, undefined),
          (rows, bytes, cuts, buffers, keepBytes) => {
            const ends = [...new Set([...cuts, records.length])].sort((a, b) => a - b);
            const cutter = new GroupCutter(layout, rows, bytes, buffers);
            const groups: string[] = [];
            let from = 0;
            // One builder for every block, as a planning thread has: past keepBytes, finish()
            // hands out its own buffers and starts on new ones.
            const block = new RecordColumns(layout, keepBytes);
            for (const end of ends) {
              for (const record of records.slice(from, end)) block.add(record as never);
              // used before the next
              for (const group of cutter.addBlock(block.finish())) groups.push(...bytesOf([group]));
              from = end;
            }
            groups.push(...bytesOf([cutter.end()]));
            expect(groups).toEqual(oneByOne(rows, bytes));
          },
        ),
        { numRuns: 60 },
      );
      for (const plan of planned) plan.release();
    },
  );

  test.each(layouts)(
    "%s: a block finished past keepBytes keeps its records when the builder goes on",
    (layout, recordsOf) => {
      const planned = plans();
      const records = planned.flatMap(recordsOf);
      const half = records.length >> 1;
      const alone = (part: readonly unknown[]) => {
        const columns = new RecordColumns(layout);
        for (const record of part) columns.add(record as never);
        return Buffer.from(codec.ipcStream(layout, codec.recordBatch(columns.finish()))).toString("base64");
      };
      const columns = new RecordColumns(layout, 0); // every finish() hands out its buffers
      for (const record of records.slice(0, half)) columns.add(record as never);
      const first = columns.finish();
      for (const record of records.slice(half)) columns.add(record as never);
      const second = columns.finish();
      expect(first.length).toBe(half);
      expect(Buffer.from(codec.ipcStream(layout, codec.recordBatch(first))).toString("base64")).toBe(
        alone(records.slice(0, half)),
      );
      expect(Buffer.from(codec.ipcStream(layout, codec.recordBatch(second))).toString("base64")).toBe(
        alone(records.slice(half)),
      );
      for (const plan of planned) plan.release();
    },
  );

  test("a group ends with the record that brings it to the row or byte limit, never before", async () => {
    const planned = plans();
    const cutter = new GroupCutter("rows", 50, 20_000);
    const groups = planned
      .flatMap((plan) => plan.rows.map((row) => cutter.add(row)))
      .filter((group): group is ColumnBlock => group !== null);
    expect(groups.length).toBeGreaterThan(3);
    for (const group of groups) {
      const weights = Array.from(group.weights);
      const before = weights.slice(0, -1).reduce((a, b) => a + b, 0);
      expect(before < 20_000 && group.length < 50).toBe(true);
      expect(before + weights[weights.length - 1] >= 20_000 || group.length === 50).toBe(true);
    }
    const table = await toArrowTable(planned, { rowGroupBytes: 20_000, rowGroupRows: 50 });
    const last = cutter.end().length;
    expect(table.batches.map((batch) => batch.numRows)).toEqual([
      ...groups.map((group) => group.length),
      ...(last > 0 ? [last] : []),
    ]);
    for (const plan of planned) plan.release();
  });
});

describe("toArrowTable, toArrowIPC, toParquet", () => {
  test("an Arrow table of a plan's rows: SPEC's columns, the rows' values", async () => {
    const plan = cf.plan(example);
    const table = await toArrowTable(plan);
    expect(table.numRows).toBe(5);
    expect(table.schema.fields.map((field) => `${field.name}: ${field.type}`)).toEqual([
      "rollout_id: Utf8",
      "row: Int32",
      "leaf: Utf8",
      "agent: Utf8",
      "calls: List<Utf8>",
      "trained: List<Utf8>",
      "context: List<Utf8>",
      "num_tokens: Int32",
      "token_ids: List<Int32>",
      "logprobs: List<Float32>",
      "loss_mask: List<Bool>",
      "reward: Float64",
      "group_id: Utf8",
      "media: List<Struct<{id:Utf8, offset:Int32, length:Int32}>>",
      "routed_experts: Utf8",
      "weight_versions: List<Int32>",
    ]);
    // null where a rollout gives no group, routed experts or weight versions
    expect(table.schema.fields.filter((f) => f.nullable).map((f) => f.name)).toEqual([
      "group_id",
      "routed_experts",
      "weight_versions",
    ]);
    const row = plan.rows[2];
    expect(Array.from(table.getChild("token_ids")!.get(2)!.toArray() as Int32Array)).toEqual(Array.from(row.tokenIds));
    expect([...table.getChild("loss_mask")!.get(2)!].map(Number)).toEqual(
      Array.from({ length: row.numTokens }, (_, i) => (row.lossMask[i >> 3] >> (i & 7)) & 1),
    );
    expect([...table.getChild("trained")!.get(2)!]).toEqual(row.trained);
    plan.release();
  });

  test("toParquet and toArrowIPC give the bytes `rows` writes for the same records (rows, trees, bins)", async () => {
    const dir = tempDir();
    const plan = cf.plan(example, { trees: true, capacity: 64 });
    for (const [layout, argv] of [
      ["rows", []],
      ["trees", ["--layout", "packed"]],
      ["bins", ["--capacity", "64"]],
    ] as const) {
      for (const [extension, bytes] of [
        [".parquet", await toParquet(plan, { layout })],
        [".arrow", await toArrowIPC(plan, { layout })],
        [".arrows", await toArrowIPC(plan, { layout, format: "stream" })],
      ] as const) {
        const out = join(dir, `${layout}${extension}`);
        expect((await cli("rows", LOGIN_BUG, "-o", out, "--quiet", ...argv)).code).toBe(0);
        expect(Buffer.from(bytes).equals(readFileSync(out)), `${layout}${extension}`).toBe(true);
      }
    }
    plan.release();
  });

  test("records of different layouts in one table are refused; an empty list is a table with the schema", async () => {
    const plan = cf.plan(example, { trees: true });
    await expect(toParquet([...plan.rows, ...plan.trees] as never)).rejects.toThrow(
      "the records mix rows and trees: one table holds one layout",
    );
    const dir = tempDir();
    writeFileSync(join(dir, "empty.parquet"), await toParquet([], { layout: "bins" }));
    const { records, types } = await parquetRecords(join(dir, "empty.parquet"));
    expect(records).toEqual([]);
    expect(Object.keys(types)[1]).toBe("bin");
    plan.release();
  });
});

test(
  "createColumnarWriter: plans written as they come (each released after), " + "read back equal to the JSONL rows",
  async () => {
    const dir = tempDir();
    const input = join(dir, "batch.jsonl");
    const rollouts = [example, ...generateSmallRollouts(30, 9, { arrays: "plain" })];
    writeFileSync(input, rollouts.map((r) => JSON.stringify(r)).join("\n") + "\n");
    expect((await cli("rows", input, "-o", join(dir, "rows.jsonl"), "--quiet")).code).toBe(0);
    const chunks: Uint8Array[] = [];
    const writer = await createColumnarWriter(
      { write: (chunk) => void chunks.push(chunk.slice()) },
      { format: "arrows", layout: "rows", rowGroupRows: 16 },
    );
    for (const rollout of rollouts) {
      const plan = cf.plan(rollout);
      await writer.write(plan.rows);
      plan.release();
    }
    await writer.close();
    writeFileSync(join(dir, "rows.arrows"), Buffer.concat(chunks));
    expect(writer.groups).toBeGreaterThan(2);
    expect(ipcRecords(join(dir, "rows.arrows")).records).toEqual(jsonlRecords(join(dir, "rows.jsonl")));
    const parquetWriter = await createColumnarWriter(
      { write: (chunk) => void chunks.push(chunk.slice()) },
      { format: "parquet", layout: "rows", compression: "snappy" },
    );
    chunks.length = 0;
    for (const rollout of rollouts) {
      const plan = cf.plan(rollout);
      await parquetWriter.write(plan.rows);
      plan.release();
    }
    await parquetWriter.close();
    writeFileSync(join(dir, "rows.parquet"), Buffer.concat(chunks));
    expect((await parquetRecords(join(dir, "rows.parquet"))).records).toEqual(jsonlRecords(join(dir, "rows.jsonl")));
    const db = await duckdb();
    const codecs = await db.runAndReadAll(
      `SELECT DISTINCT compression FROM parquet_metadata('${join(dir, "rows.parquet")}')`,
    );
    expect(codecs.getRows().map((row) => String(row[0]))).toEqual(["SNAPPY"]);
    db.closeSync();
  },
);

test(
  "the modules the browser entry loads use no Node built-ins " + "(only Node's loader and the CLI's encoder thread do)",
  () => {
    const dir = join(ROOT, "src", "columnar");
    const nodeOnly = ["encoder-thread.ts", "load-node.ts", "threaded-writer.ts", "wasm-tiering.ts"];
    for (const file of readdirSync(dir)) {
      const source = readFileSync(join(dir, file), "utf8");
      expect(/from "node:/.test(source), file).toBe(nodeOnly.includes(file));
      if (!nodeOnly.includes(file))
        expect(
          nodeOnly.some((other) => source.includes(`./${other.replace(".ts", ".js")}`)),
          file,
        ).toBe(false);
    }
    const browser = readFileSync(join(ROOT, "src", "browser.ts"), "utf8");
    expect(browser).toContain('from "./columnar/load-browser.js"');
    expect(browser).not.toContain("load-node");
  },
);

test("the CLI's threaded writer: the same bytes, row and group counts as the in-process writer", async () => {
  const cf = await init();
  const rollouts = [example, ...generateSmallRollouts(30, 9, { arrays: "plain" })];
  const options = { format: "parquet", layout: "rows", rowGroupRows: 16 } as const;
  const written = async (writer: ColumnarWriterType<"rows">, chunks: Uint8Array[]) => {
    for (const rollout of rollouts) {
      const plan = cf.plan(rollout);
      const columns = new RecordColumns("rows", 1 << 20);
      for (const row of plan.rows) columns.add(row);
      await writer.writeBlock(columns.finish());
      plan.release();
    }
    await writer.close();
    return { bytes: Buffer.concat(chunks), rows: writer.rows, groups: writer.groups };
  };
  const inProcess: Uint8Array[] = [];
  const threaded: Uint8Array[] = [];
  const expected = await written(
    await createColumnarWriter({ write: (chunk) => void inProcess.push(chunk.slice()) }, options),
    inProcess,
  );
  const got = await written(
    new ThreadedColumnarWriter(options, { write: (chunk) => void threaded.push(chunk) }, codec),
    threaded,
  );
  expect(expected.groups).toBeGreaterThan(2);
  expect(got.rows).toBe(expected.rows);
  expect(got.groups).toBe(expected.groups);
  expect(got.bytes.equals(expected.bytes)).toBe(true);
});

test("the CLI's apache-arrow build (its one-file bundle) writes the bytes the library's ES modules do", async () => {
  const esm = await import("apache-arrow");
  const bundle = loadArrowBundle();
  expect(bundle.Table).not.toBe(esm.Table); // two builds, not one module twice
  const pq = await loadParquet();
  const planned = plans();
  for (const layout of ["rows", "trees", "bins"] as const) {
    const records = planned.flatMap((plan): readonly unknown[] =>
      layout === "rows" ? plan.rows : layout === "trees" ? plan.trees : plan.bins,
    );
    for (const format of ["arrow", "arrows", "parquet"] as const) {
      const bytesWith = async (arrow: ArrowCodec) => {
        const chunks: Uint8Array[] = [];
        const writer = new ColumnarWriter(
          { format, layout, rowGroupRows: 7 },
          { write: (chunk) => void chunks.push(chunk.slice()) },
          { arrow, parquet: pq },
        );
        await writer.write(records as never);
        await writer.close();
        return Buffer.concat(chunks);
      };
      const expected = await bytesWith(new ArrowCodec(esm));
      expect((await bytesWith(new ArrowCodec(bundle))).equals(expected), `${layout} ${format}`).toBe(true);
    }
  }
});
