// Gym's transformation lineage (PR #2616, `compaction/history.py`): each history item splits into
// semantic parts (one per content part, or the whole item), each part has a source digest, and a
// policy decision maps every part to a disposition (kept, dropped, replaced by an omission
// marker). `transformation_id` hashes the unit records as Gym does — through Python's `repr` of
// its frozen dataclass, since `canonical_digest` falls back to `default=repr` — and each model
// call's lineage delta upserts what changed since the previous call's.
import { canonicalJson, sha256HexSync } from "./digest.js";

export type LineageDisposition = "kept" | "dropped" | "replaced";

/** One semantic part as Gym's SemanticHistory splits an item. */
export interface GymPart {
  id: string;
  kind: string;
  /** The content part (images reduced to their media id), or the whole item when content is not a list. */
  payload: unknown;
  mediaId: string | null;
  groupId: string | null;
  /** `_semantic_part_digest`. */
  digest: string;
}

export interface UnitLineageRecord {
  source_unit_id: string;
  source_digest: string;
  disposition: LineageDisposition;
  output_unit_ids: string[];
  output_digests: string[];
}

/** The fields Gym's two lineage records share (their order in the JSON is the builders'). */
interface TransformationCommon {
  transformation_id: string;
  transformation_type: string;
  transformation_version: string;
  configuration_digest: string;
  deterministic: true;
  lossy: boolean;
  generator_contract_id: null;
  validator_result: "passed";
}

export interface TransformationLineageRecord extends TransformationCommon {
  unit_records: UnitLineageRecord[];
}

export interface TransformationLineageDeltaRecord extends TransformationCommon {
  parent_transformation_id: string | null;
  unit_upserts: UnitLineageRecord[];
  source_unit_count: number;
  state_digest: string;
}

const digestOf = (value: unknown) => sha256HexSync(canonicalJson(value));
const pad = (n: number, width: number) => String(n).padStart(width, "0");

const TOKEN_FIELDS = ["prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts"];
const IMAGE_PART_TYPES = ["image", "image_url", "input_image"];

/** `strip_completion_evidence`: the item without token fields, private ids, or part logprobs. */
function semanticItem(item: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const value: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(item)) if (!TOKEN_FIELDS.includes(k) && !k.startsWith("_nemo_gym_")) value[k] = v;
  if (Array.isArray(value.content))
    value.content = value.content.map((part) => {
      if (typeof part !== "object" || part === null || Array.isArray(part)) return part;
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(part)) if (k !== "logprobs" && !k.startsWith("_nemo_gym_")) out[k] = v;
      return out;
    });
  return value;
}

/** `_part_kind`. */
function partKind(role: string, itemType: string, partType: string | null, initial: boolean): string {
  if (partType !== null && IMAGE_PART_TYPES.includes(partType)) return "image";
  if (itemType === "reasoning") return "reasoning";
  if (itemType === "function_call" || role === "assistant") return "assistant_action";
  if (itemType === "function_call_output") return "environment_text";
  if (role === "system" || role === "developer") return "system_text";
  return initial ? "user_text" : "environment_text";
}

/** Gym's media id of an image part: `media-` and 24 hex digits of its canonical digest. */
export function gymMediaId(sourcePart: unknown): string {
  return `media-${digestOf(sourcePart).slice(0, 24)}`;
}

/** `SemanticHistory.append_items` for one item, the `event`-th of the history. */
export function gymParts(item: Readonly<Record<string, unknown>>, event: number, initial: boolean): GymPart[] {
  const semantic = semanticItem(item);
  const role = String(semantic.role ?? "unknown");
  const itemType = String(semantic.type ?? "message");
  const base = `part-${pad(event, 6)}`;
  const make = (id: string, kind: string, payload: unknown, mediaId: string | null, groupId: string | null) => ({
    id,
    kind,
    payload,
    mediaId,
    groupId,
    digest: digestOf({ kind, payload, media_id: mediaId, observation_group_id: groupId }),
  });
  if (!Array.isArray(semantic.content))
    return [make(`${base}-000`, partKind(role, itemType, null, initial), semantic, null, null)];
  return semantic.content.map((part, k) => {
    const partType =
      typeof part === "object" && part !== null && (part as { type?: unknown }).type != null
        ? String((part as { type: unknown }).type)
        : null;
    const kind = partKind(role, itemType, partType, initial);
    if (kind !== "image") return make(`${base}-${pad(k, 3)}`, kind, part, null, null);
    const mediaId = gymMediaId(part);
    return make(
      `${base}-${pad(k, 3)}`,
      kind,
      { type: partType, _nemo_gym_media_id: mediaId },
      mediaId,
      `observation-${pad(event, 6)}`,
    );
  });
}

/** An omission marker that replaced a run of image groups. */
export interface OmissionArtifact {
  id: string;
  text: string;
}

/** The unit record of one part: kept as itself, replaced by its run's marker, or dropped. */
export function unitRecord(part: GymPart, kept: boolean, artifact: OmissionArtifact | undefined): UnitLineageRecord {
  if (kept)
    return {
      source_unit_id: part.id,
      source_digest: part.digest,
      disposition: "kept",
      output_unit_ids: [part.id],
      output_digests: [part.digest],
    };
  if (artifact)
    return {
      source_unit_id: part.id,
      source_digest: part.digest,
      disposition: "replaced",
      output_unit_ids: [artifact.id],
      output_digests: [digestOf({ type: "omission_marker", artifact_id: artifact.id, text: artifact.text })],
    };
  return {
    source_unit_id: part.id,
    source_digest: part.digest,
    disposition: "dropped",
    output_unit_ids: [],
    output_digests: [],
  };
}

/** Python's `repr` of a str made of ids and hex digits (no quotes or escapes in them). */
function reprString(s: string): string {
  if (/['\\\n\r\t]|[^\x20-\x7e]/.test(s))
    throw new Error(`gym lineage: cannot write ${JSON.stringify(s)} as Python's repr`);
  return `'${s}'`;
}

/** Python's `repr` of a tuple of such strings: `()`, `('a',)`, `('a', 'b')`. */
function reprTuple(xs: readonly string[]): string {
  if (xs.length === 1) return `(${reprString(xs[0])},)`;
  return `(${xs.map(reprString).join(", ")})`;
}

/** Python's `repr` of Gym's frozen UnitLineageRecord dataclass: what `canonical_digest` hashes for it. */
export function unitRecordRepr(r: UnitLineageRecord): string {
  return (
    `UnitLineageRecord(source_unit_id=${reprString(r.source_unit_id)}, ` +
    `source_digest=${reprString(r.source_digest)}, disposition=${reprString(r.disposition)}, ` +
    `output_unit_ids=${reprTuple(r.output_unit_ids)}, output_digests=${reprTuple(r.output_digests)})`
  );
}

/** A record's repr (as a JSON string) and canonical JSON, computed once per record. */
const forms = new WeakMap<UnitLineageRecord, { repr: string; json: string }>();
function formsOf(r: UnitLineageRecord): { repr: string; json: string } {
  let f = forms.get(r);
  if (!f) {
    f = { repr: JSON.stringify(unitRecordRepr(r)), json: canonicalJson(r) };
    forms.set(r, f);
  }
  return f;
}

/** `_lineage_record`. */
export function lineageRecord(
  type: string,
  version: string,
  configDigest: string,
  units: UnitLineageRecord[],
  lossy: boolean,
): TransformationLineageRecord {
  // canonical_digest({type, version, config, units}): keys sorted, each unit its repr string.
  const identity = sha256HexSync(
    `{"config":${JSON.stringify(configDigest)},"type":${JSON.stringify(type)},` +
      `"units":[${units.map((u) => formsOf(u).repr).join(",")}],"version":${JSON.stringify(version)}}`,
  );
  return {
    transformation_id: `transform-${identity.slice(0, 24)}`,
    transformation_type: type,
    transformation_version: version,
    configuration_digest: configDigest,
    deterministic: true,
    lossy,
    generator_contract_id: null,
    unit_records: units,
    validator_result: "passed",
  };
}

/** `lineage_state_digest`: the records sorted by source unit id. */
function stateDigest(records: readonly UnitLineageRecord[]): string {
  const sorted = [...records].sort((a, b) =>
    a.source_unit_id < b.source_unit_id ? -1 : a.source_unit_id > b.source_unit_id ? 1 : 0,
  );
  // Each record's canonical JSON is that of the dict Gym builds from its five fields.
  return sha256HexSync(`[${sorted.map((r) => formsOf(r).json).join(",")}]`);
}

/** `build_lineage_delta`: the records that differ from the previous call's, and the new state. */
export function lineageDelta(
  lineage: TransformationLineageRecord,
  previous: ReadonlyMap<string, UnitLineageRecord>,
  parentTransformationId: string | null,
): { delta: TransformationLineageDeltaRecord; state: Map<string, UnitLineageRecord> } {
  const state = new Map(lineage.unit_records.map((r) => [r.source_unit_id, r]));
  const same = (a: UnitLineageRecord | undefined, b: UnitLineageRecord) =>
    a !== undefined && (a === b || formsOf(a).json === formsOf(b).json);
  const upserts = [...state.values()].filter((r) => !same(previous.get(r.source_unit_id), r));
  return {
    delta: {
      transformation_id: lineage.transformation_id,
      parent_transformation_id: parentTransformationId,
      transformation_type: lineage.transformation_type,
      transformation_version: lineage.transformation_version,
      configuration_digest: lineage.configuration_digest,
      deterministic: true,
      lossy: lineage.lossy,
      generator_contract_id: null,
      unit_upserts: upserts,
      source_unit_count: state.size,
      state_digest: stateDigest([...state.values()]),
      validator_result: "passed",
    },
    state,
  };
}
