// Shared by the columnar tests: inputs (the worked example, a generated batch with media), and
// readers that turn what `rows` wrote back into plain JSON values — JSONL as SPEC writes it,
// Parquet through DuckDB, Arrow IPC through flechette (neither is the writer's library).
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { tableFromIPC } from "@uwdata/flechette";
import { generateMediaRollout, generateSmallRollouts } from "../../bench/generate.js";
import { rolloutToJson } from "../../src/ingest/read.js";
import { fromBase64, maskToInts } from "../../src/output/jsonl.js";
import { LOGIN_BUG } from "../support/fixtures.js";
import { SWAP_FILE } from "../support/media-rollouts.js";

/** The worked example, the screenshot example, small generated rollouts and two media-heavy ones, as JSONL. */
export function mixedBatch(dir: string, small = 40): string {
  const lines = [
    JSON.stringify(JSON.parse(readFileSync(LOGIN_BUG, "utf8"))),
    JSON.stringify(JSON.parse(readFileSync(SWAP_FILE, "utf8"))),
    ...generateSmallRollouts(small, 11, { arrays: "plain" }).map((r) => rolloutToJson(r)),
    rolloutToJson(generateMediaRollout({ turns: 12, imageTokens: 16, swapEvery: 4, seed: 3 })),
    rolloutToJson(generateMediaRollout({ turns: 7, imageTokens: 5, swapEvery: 3, seed: 4 })),
  ];
  const path = join(dir, "mixed.jsonl");
  writeFileSync(path, lines.join("\n") + "\n");
  return path;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A JSONL record with loss_mask as booleans and logprobs as the float32 values they spell. */
export function normalizeJsonl(record: Record<string, Json>): Record<string, Json> {
  const n = record.num_tokens as number;
  return {
    ...record,
    // The columns always hold routed_experts: null where the JSONL has none.
    routed_experts: record.routed_experts ?? null,
    weight_versions: record.weight_versions ?? null,
    logprobs: (record.logprobs as number[]).map((x) => Math.fround(x)),
    loss_mask: Array.from(maskToInts(fromBase64(record.loss_mask as string), n), (bit) => bit === 1),
  };
}

export function jsonlRecords(path: string): Record<string, Json>[] {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => normalizeJsonl(JSON.parse(line)));
}

/** Plain JSON values of what a reader gave: typed arrays as arrays, -0 kept. */
function plain(value: unknown): Json {
  if (value === null || typeof value !== "object") return typeof value === "bigint" ? Number(value) : (value as Json);
  if (ArrayBuffer.isView(value)) return Array.from(value as unknown as ArrayLike<number>);
  if (Array.isArray(value)) return value.map(plain);
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
}

export async function duckdb() {
  const instance = await DuckDBInstance.create(":memory:", { threads: "1" });
  return instance.connect();
}

/** Every row of a Parquet file, read by DuckDB, and its columns' DuckDB types. */
export async function parquetRecords(
  path: string,
): Promise<{ records: Record<string, Json>[]; types: Record<string, string> }> {
  const db = await duckdb();
  try {
    const source = `read_parquet('${path.replace(/'/g, "''")}')`;
    const described = await db.runAndReadAll(`DESCRIBE SELECT * FROM ${source}`);
    const types = Object.fromEntries(described.getRows().map((row) => [String(row[0]), String(row[1])]));
    const reader = await db.runAndReadAll(`SELECT * FROM ${source}`);
    return { records: reader.getRowObjectsJS().map((row) => plain(row) as Record<string, Json>), types };
  } finally {
    db.closeSync();
  }
}

/** Every row of an Arrow IPC file or stream, read by flechette, and its columns' Arrow types. */
export function ipcRecords(path: string): { records: Record<string, Json>[]; types: Record<string, string> } {
  const table = tableFromIPC(readFileSync(path), { useProxy: false });
  const types = Object.fromEntries(
    table.schema.fields.map((field) => [field.name, typeName(field.type as unknown as FlechetteType)]),
  );
  return { records: table.toArray().map((row) => plain(row) as Record<string, Json>), types };
}

interface FlechetteType {
  typeId: number;
  bitWidth?: number;
  precision?: number;
  children?: { name: string; type: FlechetteType }[];
}

/** A flechette type as `list<int32>`, `struct<id: utf8, ...>`. */
function typeName(type: FlechetteType): string {
  // flechette's type ids are Arrow's (Schema.fbs): 2 Int, 3 FloatingPoint, 5 Utf8, 6 Bool, 12 List, 13 Struct.
  switch (type.typeId) {
    case 2:
      return `int${type.bitWidth}`;
    case 3:
      return ["float16", "float32", "float64"][type.precision!];
    case 5:
      return "utf8";
    case 6:
      return "bool";
    case 12:
      return `list<${typeName(type.children![0].type)}>`;
    case 13:
      return `struct<${type.children!.map((child) => `${child.name}: ${typeName(child.type)}`).join(", ")}>`;
    default:
      return `type ${type.typeId}`;
  }
}
