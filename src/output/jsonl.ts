// Serialization of rows and reports as SPEC's JSONL.
import { fromBase64, toBase64 } from "../codecs/base64.js";
import { formatFloat32 } from "../codecs/float32.js";
import { encodeRoutedExperts } from "../codecs/routed-experts.js";
import type {
  BinSegment,
  MediaItem,
  PackedBin,
  PackedSegment,
  PackedTree,
  Report,
  RoutedExperts,
  Row,
} from "../types.js";

export { formatFloat32, fromBase64, toBase64 };

export type MaskFormat = "bits" | "ints";

/** Bit i of a SPEC bitset. */
export function maskBit(mask: Uint8Array, i: number): number {
  return (mask[i >> 3] >> (i & 7)) & 1;
}

/** The loss mask as 0/1 per token. */
export function maskToInts(mask: Uint8Array, numTokens: number): Uint8Array {
  const out = new Uint8Array(numTokens);
  for (let i = 0; i < numTokens; i++) out[i] = (mask[i >> 3] >> (i & 7)) & 1;
  return out;
}

function floatList(values: Float32Array): string {
  let out = "[";
  for (let i = 0; i < values.length; i++) out += (i === 0 ? "" : ",") + formatFloat32(values[i]);
  return out + "]";
}

/**
 * A reward as JSON: the number as given, and -0 as "-0" (JSON.stringify writes 0), so that every
 * number callforest writes reads back as the same value — logprobs keep their sign of zero too.
 */
export function rewardText(reward: number): string {
  return Object.is(reward, -0) ? "-0" : JSON.stringify(reward);
}

/** A row's media as SPEC's JSON: `{id, offset, length}` objects in that key order. */
export function mediaList(media: readonly MediaItem[]): string {
  if (media.length === 0) return "[]";
  return JSON.stringify(media.map(({ id, offset, length }) => ({ id, offset, length })));
}

/** `,"routed_experts":"nrlre1:…"` when a row or record has them (SPEC: only when the rollout gives them). */
export function expertsField(experts: RoutedExperts | undefined): string {
  return experts === undefined ? "" : `,"routed_experts":"${expertsEnvelope(experts)}"`;
}

/** `,"weight_versions":[…]` when a row or record has them (SPEC v4: only when some call gives one). */
export function versionsField(versions: Int32Array | undefined): string {
  return versions === undefined ? "" : `,"weight_versions":[${versions.join(",")}]`;
}

/** SPEC's envelope of a row's or record's routed experts (int8 is written as int16). */
export function expertsEnvelope(experts: RoutedExperts): string {
  const data = experts.data instanceof Int8Array ? Int16Array.from(experts.data) : experts.data;
  return encodeRoutedExperts(data, experts.tokens, experts.layers, experts.topk);
}

/** Throws unless the row's arrays hold its numTokens tokens (a released plan's rows hold none). */
export function checkRowArrays(row: Row): void {
  if (
    row.tokenIds.length !== row.numTokens ||
    row.logprobs.length !== row.numTokens ||
    row.lossMask.length !== (row.numTokens + 7) >> 3
  ) {
    throw new Error(
      `row ${row.index} of ${JSON.stringify(row.rolloutId)}: its arrays do not hold its ${row.numTokens} tokens ` +
        `(was its plan released? write rows before release())`,
    );
  }
}

/** A typo ("bit") must not quietly change the output's format. */
function checkMaskFormat(maskFormat: MaskFormat): void {
  if (maskFormat !== "bits" && maskFormat !== "ints")
    throw new TypeError(`maskFormat must be "bits" or "ints", got ${JSON.stringify(maskFormat)}`);
}

/** The loss_mask field's value: the bitset in base64, or the 0/1 list. */
function maskJson(mask: Uint8Array, numTokens: number, maskFormat: MaskFormat): string {
  return maskFormat === "bits" ? JSON.stringify(toBase64(mask)) : "[" + maskToInts(mask, numTokens).join(",") + "]";
}

/** One row as a JSONL line (no trailing newline), SPEC's field order. */
export function rowToJson(row: Row, maskFormat: MaskFormat = "bits"): string {
  checkMaskFormat(maskFormat);
  checkRowArrays(row);
  const mask = maskJson(row.lossMask, row.numTokens, maskFormat);
  return (
    `{"rollout_id":${JSON.stringify(row.rolloutId)},"row":${row.index},"leaf":${JSON.stringify(row.leaf)},` +
    `"agent":${JSON.stringify(row.agent)},"calls":${JSON.stringify(row.calls)},` +
    `"trained":${JSON.stringify(row.trained)},"context":${JSON.stringify(row.context)},` +
    `"num_tokens":${row.numTokens},"token_ids":[${row.tokenIds.join(",")}],` +
    `"logprobs":${floatList(row.logprobs)},"loss_mask":${mask},"reward":${rewardText(row.reward)},` +
    `"group_id":${JSON.stringify(row.groupId)},"media":${mediaList(row.media)}` +
    `${expertsField(row.routedExperts)}${versionsField(row.weightVersions)}}`
  );
}

/** Throws unless a packed record's arrays hold its numTokens tokens (see checkRowArrays). */
export function checkPackedArrays(record: PackedTree | PackedBin): void {
  const n = record.numTokens;
  if (
    record.tokenIds.length !== n ||
    record.positionIds.length !== n ||
    record.logprobs.length !== n ||
    record.lossMask.length !== (n + 7) >> 3
  ) {
    throw new Error(
      `packed record ${record.index} of ${JSON.stringify(record.rolloutId)}: its arrays do not hold its ${n} tokens ` +
        `(was its plan released? write records before release())`,
    );
  }
}

/** SPEC's segments list: `{call, parent, start, length, end}` (bins: `tree`, `trained` too). */
export function segmentList(segments: readonly (PackedSegment | BinSegment)[]): string {
  let out = "[";
  segments.forEach((s, i) => {
    out +=
      `${i === 0 ? "" : ","}{"call":${JSON.stringify(s.call)},"parent":${s.parent},` +
      `"start":${s.start},"length":${s.length},"end":${s.end}`;
    if ("tree" in s) out += `,"tree":${s.tree},"trained":${s.trained}`;
    out += "}";
  });
  return out + "]";
}

/** Whether a packed record is a bin (its segments name their tree). */
export function isBin(record: PackedTree | PackedBin): record is PackedBin {
  return record.segments.length > 0 && "tree" in record.segments[0];
}

/** A packed record's head, up to its token arrays: what names it, in SPEC's field order. */
export function packedHead(record: PackedTree | PackedBin): string {
  const names = `${isBin(record) ? `"bin"` : `"tree"`}:${record.index},"roots":${JSON.stringify(record.roots)}`;
  return (
    `{"rollout_id":${JSON.stringify(record.rolloutId)},${names},` +
    `"calls":${JSON.stringify(record.calls)},"num_tokens":${record.numTokens}`
  );
}

/** One packed tree or bin as a JSONL line (no trailing newline), SPEC's field order. */
export function packedToJson(record: PackedTree | PackedBin, maskFormat: MaskFormat = "bits"): string {
  checkMaskFormat(maskFormat);
  checkPackedArrays(record);
  const mask = maskJson(record.lossMask, record.numTokens, maskFormat);
  return (
    packedHead(record) +
    `,"token_ids":[${record.tokenIds.join(",")}],"position_ids":[${record.positionIds.join(",")}],` +
    `"logprobs":${floatList(record.logprobs)},"loss_mask":${mask},"segments":${segmentList(record.segments)},` +
    `"media":${mediaList(record.media)},"reward":${rewardText(record.reward)},` +
    `"group_id":${JSON.stringify(record.groupId)}${expertsField(record.routedExperts)}` +
    `${versionsField(record.weightVersions)}}`
  );
}

/** One report as a JSONL line (no trailing newline), SPEC's field order. */
export function reportToJson(report: Report): string {
  const ordered: Record<string, unknown> = { rollout_id: report.rollout_id, status: report.status };
  if (report.reason !== undefined) ordered.reason = report.reason;
  if (report.detail !== undefined) ordered.detail = report.detail;
  if (report.line !== undefined) ordered.line = report.line;
  for (const key of [
    "calls",
    "eligible",
    "roots",
    "leaves",
    "rows",
    "captured_tokens",
    "trained_tokens",
    "row_tokens",
    "unique_tokens",
    "trie_tokens",
    "packed_tokens",
    "diagnostics",
  ] as const) {
    if (report[key] !== undefined) ordered[key] = report[key];
  }
  return JSON.stringify(ordered);
}
