// SPEC "Columnar output": the columns of rows, packed trees and bins, in SPEC's field order, each
// with its type and how to read it from a record. A description only (no Arrow library), shared
// by the builders in worker threads and by the Arrow conversion on the main thread.
import { expertsEnvelope, isBin } from "../output/jsonl.js";
import type { BinSegment, MediaItem, PackedBin, PackedSegment, PackedTree, RoutedExperts, Row } from "../types.js";

export type ColumnType =
  | { kind: "utf8" }
  | { kind: "int32" }
  | { kind: "float32" }
  | { kind: "float64" }
  | { kind: "bool" }
  | { kind: "list"; item: ColumnType }
  | { kind: "struct"; fields: readonly StructField[] };

export interface StructField {
  name: string;
  type: ColumnType;
}

/** A bitset value: `length` bits of `bits` (SPEC's order). */
export interface Bits {
  bits: Uint8Array;
  length: number;
}

/** A top-level column: its name, type, and its value in a record. */
export interface Column<R> extends StructField {
  value(record: R): unknown;
  /** Null where the record has no value (only `routed_experts`: when the rollout gives none). */
  nullable?: boolean;
}

/** What the records of a table are: SPEC's rows, packed trees, or bins. */
export type Layout = "rows" | "trees" | "bins";

export type RecordOf<L extends Layout> = L extends "rows" ? Row : L extends "trees" ? PackedTree : PackedBin;

const utf8 = { kind: "utf8" } as const;
const int32 = { kind: "int32" } as const;
const float32 = { kind: "float32" } as const;
const float64 = { kind: "float64" } as const;
const bool = { kind: "bool" } as const;
const listOf = (item: ColumnType): ColumnType => ({ kind: "list", item });
const structOf = (fields: StructField[]): ColumnType => ({ kind: "struct", fields });

const MEDIA = listOf(
  structOf([
    { name: "id", type: utf8 },
    { name: "offset", type: int32 },
    { name: "length", type: int32 },
  ]),
);
const SEGMENT_FIELDS: StructField[] = ["parent", "start", "length", "end"].map((name) => ({ name, type: int32 }));
const TREE_SEGMENTS = listOf(structOf([{ name: "call", type: utf8 }, ...SEGMENT_FIELDS]));
const BIN_SEGMENTS = listOf(
  structOf([
    { name: "call", type: utf8 },
    ...SEGMENT_FIELDS,
    { name: "tree", type: int32 },
    { name: "trained", type: bool },
  ]),
);

/** SPEC v4's `weight_versions` column: null when the rollout gives none. */
const versions = (record: { weightVersions?: Int32Array }): Int32Array | null => record.weightVersions ?? null;

/** SPEC's `routed_experts` column: the envelope, null when the rollout gives none. */
const experts = (record: { routedExperts?: RoutedExperts }): string | null =>
  record.routedExperts === undefined ? null : expertsEnvelope(record.routedExperts);

const mask = (record: { lossMask: Uint8Array; numTokens: number }): Bits => ({
  bits: record.lossMask,
  length: record.numTokens,
});

export const ROW_COLUMNS: readonly Column<Row>[] = [
  { name: "rollout_id", type: utf8, value: (r) => r.rolloutId },
  { name: "row", type: int32, value: (r) => r.index },
  { name: "leaf", type: utf8, value: (r) => r.leaf },
  { name: "agent", type: utf8, value: (r) => r.agent },
  { name: "calls", type: listOf(utf8), value: (r) => r.calls },
  { name: "trained", type: listOf(utf8), value: (r) => r.trained },
  { name: "context", type: listOf(utf8), value: (r) => r.context },
  { name: "num_tokens", type: int32, value: (r) => r.numTokens },
  { name: "token_ids", type: listOf(int32), value: (r) => r.tokenIds },
  { name: "logprobs", type: listOf(float32), value: (r) => r.logprobs },
  { name: "loss_mask", type: listOf(bool), value: mask },
  { name: "reward", type: float64, value: (r) => r.reward },
  { name: "group_id", type: utf8, nullable: true, value: (r) => r.groupId },
  { name: "media", type: MEDIA, value: (r): readonly MediaItem[] => r.media },
  { name: "routed_experts", type: utf8, nullable: true, value: experts },
  { name: "weight_versions", type: listOf(int32), nullable: true, value: versions },
];

/** The arrays and tail every packed record has, after its names (SPEC's order). */
function packedColumns<R extends PackedTree | PackedBin>(segments: ColumnType): Column<R>[] {
  return [
    { name: "calls", type: listOf(utf8), value: (r) => r.calls },
    { name: "num_tokens", type: int32, value: (r) => r.numTokens },
    { name: "token_ids", type: listOf(int32), value: (r) => r.tokenIds },
    { name: "position_ids", type: listOf(int32), value: (r) => r.positionIds },
    { name: "logprobs", type: listOf(float32), value: (r) => r.logprobs },
    { name: "loss_mask", type: listOf(bool), value: mask },
    { name: "segments", type: segments, value: (r): readonly (PackedSegment | BinSegment)[] => r.segments },
    { name: "media", type: MEDIA, value: (r) => r.media },
    { name: "reward", type: float64, value: (r) => r.reward },
    { name: "group_id", type: utf8, nullable: true, value: (r) => r.groupId },
    { name: "routed_experts", type: utf8, nullable: true, value: experts },
    { name: "weight_versions", type: listOf(int32), nullable: true, value: versions },
  ];
}

export const TREE_COLUMNS: readonly Column<PackedTree>[] = [
  { name: "rollout_id", type: utf8, value: (r) => r.rolloutId },
  { name: "tree", type: int32, value: (r) => r.index },
  { name: "roots", type: listOf(utf8), value: (r) => r.roots },
  ...packedColumns<PackedTree>(TREE_SEGMENTS),
];

export const BIN_COLUMNS: readonly Column<PackedBin>[] = [
  { name: "rollout_id", type: utf8, value: (r) => r.rolloutId },
  { name: "bin", type: int32, value: (r) => r.index },
  { name: "roots", type: listOf(utf8), value: (r) => r.roots },
  ...packedColumns<PackedBin>(BIN_SEGMENTS),
];

export function columnsOf<L extends Layout>(layout: L): readonly Column<RecordOf<L>>[] {
  const columns =
    layout === "rows" ? ROW_COLUMNS : layout === "trees" ? TREE_COLUMNS : layout === "bins" ? BIN_COLUMNS : null;
  if (columns === null) throw new TypeError(`layout must be "rows", "trees" or "bins", got ${JSON.stringify(layout)}`);
  return columns as readonly Column<RecordOf<L>>[];
}

/** The layout of a record (a Row, a PackedTree or a PackedBin). */
export function layoutOf(record: Row | PackedTree | PackedBin): Layout {
  return "leaf" in record ? "rows" : isBin(record) ? "bins" : "trees";
}
