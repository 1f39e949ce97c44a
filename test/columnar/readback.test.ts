// `rows` as Parquet and Arrow IPC, read back by engines that did not write them — DuckDB for
// Parquet, flechette for Arrow IPC (written with apache-arrow) — and compared column by column
// with the JSONL rows of the same input: the worked example, a generated batch with media, packed
// trees and bins. Types are SPEC's ("Columnar output").
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { cli, tempDir } from "../ingest/cli.js";
import { LOGIN_BUG } from "../support/fixtures.js";
import { ipcRecords, jsonlRecords, mixedBatch, parquetRecords } from "./support.js";

const LIST_OF_STRINGS = "VARCHAR[]";
const MEDIA = 'STRUCT(id VARCHAR, "offset" INTEGER, length INTEGER)[]';
const ARRAYS = { num_tokens: "INTEGER", token_ids: "INTEGER[]", logprobs: "FLOAT[]", loss_mask: "BOOLEAN[]" };

const DUCKDB_TYPES = {
  rows: {
    rollout_id: "VARCHAR",
    row: "INTEGER",
    leaf: "VARCHAR",
    agent: "VARCHAR",
    calls: LIST_OF_STRINGS,
    trained: LIST_OF_STRINGS,
    context: LIST_OF_STRINGS,
    ...ARRAYS,
    reward: "DOUBLE",
    group_id: "VARCHAR",
    media: MEDIA,
    routed_experts: "VARCHAR",
    weight_versions: "INTEGER[]",
  },
  trees: {
    rollout_id: "VARCHAR",
    tree: "INTEGER",
    roots: LIST_OF_STRINGS,
    calls: LIST_OF_STRINGS,
    ...ARRAYS,
    position_ids: "INTEGER[]",
    segments: 'STRUCT("call" VARCHAR, parent INTEGER, "start" INTEGER, length INTEGER, "end" INTEGER)[]',
    media: MEDIA,
    reward: "DOUBLE",
    group_id: "VARCHAR",
    routed_experts: "VARCHAR",
    weight_versions: "INTEGER[]",
  },
  bins: {
    rollout_id: "VARCHAR",
    bin: "INTEGER",
    roots: LIST_OF_STRINGS,
    calls: LIST_OF_STRINGS,
    ...ARRAYS,
    position_ids: "INTEGER[]",
    segments:
      'STRUCT("call" VARCHAR, parent INTEGER, "start" INTEGER, length INTEGER, ' +
      '"end" INTEGER, tree INTEGER, trained BOOLEAN)[]',
    media: MEDIA,
    reward: "DOUBLE",
    group_id: "VARCHAR",
    routed_experts: "VARCHAR",
    weight_versions: "INTEGER[]",
  },
};

const ARROW_MEDIA = "list<struct<id: utf8, offset: int32, length: int32>>";
const ARROW_ARRAYS = {
  num_tokens: "int32",
  token_ids: "list<int32>",
  logprobs: "list<float32>",
  loss_mask: "list<bool>",
};
const ARROW_TYPES = {
  rows: {
    rollout_id: "utf8",
    row: "int32",
    leaf: "utf8",
    agent: "utf8",
    calls: "list<utf8>",
    trained: "list<utf8>",
    context: "list<utf8>",
    ...ARROW_ARRAYS,
    reward: "float64",
    group_id: "utf8",
    media: ARROW_MEDIA,
    routed_experts: "utf8",
    weight_versions: "list<int32>",
  },
  trees: {
    rollout_id: "utf8",
    tree: "int32",
    roots: "list<utf8>",
    calls: "list<utf8>",
    ...ARROW_ARRAYS,
    position_ids: "list<int32>",
    segments: "list<struct<call: utf8, parent: int32, start: int32, length: int32, end: int32>>",
    media: ARROW_MEDIA,
    reward: "float64",
    group_id: "utf8",
    routed_experts: "utf8",
    weight_versions: "list<int32>",
  },
  bins: {
    rollout_id: "utf8",
    bin: "int32",
    roots: "list<utf8>",
    calls: "list<utf8>",
    ...ARROW_ARRAYS,
    position_ids: "list<int32>",
    segments:
      "list<struct<call: utf8, parent: int32, start: int32, length: int32, end: int32, tree: int32, trained: bool>>",
    media: ARROW_MEDIA,
    reward: "float64",
    group_id: "utf8",
    routed_experts: "utf8",
    weight_versions: "list<int32>",
  },
};

const LAYOUTS = [
  { name: "rows", argv: [] },
  { name: "trees", argv: ["--layout", "packed"] },
  { name: "bins", argv: ["--capacity", "4096"] },
] as const;

/** Writes `input` as JSONL and as `extension`; returns both paths. */
async function both(dir: string, input: string, extension: string, argv: readonly string[]) {
  const jsonl = join(dir, `out-${argv.join("")}.jsonl`);
  const columnar = join(dir, `out-${argv.join("")}${extension}`);
  for (const output of [jsonl, columnar]) {
    const run = await cli("rows", input, "-o", output, "--quiet", "--jobs", "1", ...argv);
    expect(run, output).toMatchObject({ code: 0, stderr: "" });
  }
  return { jsonl, columnar };
}

describe.each([
  { input: "the worked example", make: () => LOGIN_BUG },
  { input: "a generated batch with media", make: (dir: string) => mixedBatch(dir) },
])("$input", ({ make }) => {
  describe.each(LAYOUTS)("$name", ({ name, argv }) => {
    test("Parquet, read by DuckDB: SPEC's types, every column equal to the JSONL's", async () => {
      const dir = tempDir();
      const { jsonl, columnar } = await both(dir, make(dir), ".parquet", argv);
      const expected = jsonlRecords(jsonl);
      const { records, types } = await parquetRecords(columnar);
      expect(types).toEqual(DUCKDB_TYPES[name]);
      expect(records.length).toBe(expected.length);
      expect(records).toEqual(expected);
    });

    test("Arrow IPC file and stream, read by flechette: SPEC's types, every column equal to the JSONL's", async () => {
      const dir = tempDir();
      const input = make(dir);
      for (const extension of [".arrow", ".arrows"]) {
        const { jsonl, columnar } = await both(dir, input, extension, argv);
        const { records, types } = ipcRecords(columnar);
        expect(types, extension).toEqual(ARROW_TYPES[name]);
        expect(records, extension).toEqual(jsonlRecords(jsonl));
      }
    });
  });
});

test("the generated batch has media in its records (the comparison covers it)", async () => {
  const dir = tempDir();
  const { jsonl } = await both(dir, mixedBatch(dir), ".parquet", []);
  const withMedia = jsonlRecords(jsonl).filter((record) => (record.media as unknown[]).length > 0);
  expect(withMedia.length).toBeGreaterThan(3);
});

test("routed experts: the envelope where a rollout gives them, null where not, read back by DuckDB", async () => {
  const dir = tempDir();
  const input = join(dir, "experts.jsonl");
  const base = '"prompt_token_ids":[1,2],"generation_token_ids":[3],"generation_log_probs":[-1]';
  writeFileSync(
    input,
    [
      `{"rollout_id":"with","reward":1,"calls":[{"id":"c",${base},"routed_experts":"nrlre1:int16:3x1x1:AQACAAMA"}]}`,
      `{"rollout_id":"without","reward":1,"calls":[{"id":"c",${base}}]}`,
    ].join("\n") + "\n",
  );
  for (const layout of [[], ["--layout", "packed"], ["--capacity", "64"]]) {
    const { jsonl, columnar } = await both(dir, input, ".parquet", layout);
    const { records } = await parquetRecords(columnar);
    // SPEC v4: a row's last token has no route (all -1).
    expect(records.map((r) => r.routed_experts)).toEqual(["nrlre1:int16:3x1x1:AQACAP//", null]);
    expect(records).toEqual(jsonlRecords(jsonl));
  }
});
