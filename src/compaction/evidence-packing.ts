// The packed evidence envelope: the same record with what repeats stored once. A call's prompt is
// what it adds to its parent's full sequence (or, at a rewrite, the copies of what the rewrite
// kept from the previous call's); float32 logprobs are their bytes; media are indices into the
// media table; and what a boundary, a decision or the attempt log repeats from the calls is
// derived again on expansion. `expandEvidence(packEvidence(e))` is `e`, byte for byte as JSON:
// every packed part is expanded and compared when it is packed, and kept as it was otherwise.
import type { AttemptRecord, CallEvidence, EvidenceRecord } from "./evidence-types.js";
import type { BoundaryRecord } from "./controller.js";
import { EvidenceError } from "./errors.js";
import { encodeDelta, expandDelta, type DeltaPiece } from "./prompt-delta.js";

export const PACKING = "callforest-evidence-delta/1";

type Json = Record<string, unknown>;

/**
 * A record as `packEvidence` writes it: `packing` names the encoding; `validateEvidence` and
 * `rolloutFromEvidence` take it as is.
 */
export interface PackedEvidenceRecord {
  packing: typeof PACKING;
  [field: string]: unknown;
}

export function isPackedEvidence(value: unknown): value is PackedEvidenceRecord {
  return typeof value === "object" && value !== null && (value as Json).packing !== undefined;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** A copy of `o` with each key replaced where it stands (`swap` returns [newKey, value] or null to drop it). */
function mapKeys(o: Json, swap: (key: string, value: unknown) => [string, unknown] | null): Json {
  const out: Json = {};
  for (const [key, value] of Object.entries(o)) {
    const next = swap(key, value);
    if (next) out[next[0]] = next[1];
  }
  return out;
}

// Float32 logprobs as little-endian bytes in base64 (4 bytes a value instead of ~19 characters).
function f32Base64(values: readonly number[]): string | null {
  if (!values.every((v) => typeof v === "number" && Math.fround(v) === v)) return null;
  const bytes = new Uint8Array(new Float32Array(values).buffer);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function f32FromBase64(where: string, text: unknown): number[] {
  if (typeof text !== "string") throw new EvidenceError(`${where} must be a base64 string`);
  let binary: string;
  try {
    binary = atob(text);
  } catch {
    throw new EvidenceError(`${where} is not base64`);
  }
  if (binary.length % 4 !== 0)
    throw new EvidenceError(`${where} holds ${binary.length} bytes, not whole float32 values`);
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  return Array.from(new Float32Array(bytes.buffer));
}

/** prompt ++ generation of a call. */
function fullSequence(call: CallEvidence): number[] {
  const out = call.prompt_token_ids.slice();
  for (const t of call.generation_token_ids) out.push(t);
  return out;
}

interface Context {
  record: EvidenceRecord;
  /** Full sequences of the calls expanded so far, by id. */
  sequences: Map<string, number[]>;
  mediaIds: string[];
}

function packCall(ctx: Context, call: CallEvidence, previous: CallEvidence | undefined): Json {
  const base = call.parent_call ?? previous?.call_id ?? null;
  const policy = ctx.record.compaction.policy;
  return mapKeys(call as unknown as Json, (key, value) => {
    if (key === "prompt_token_ids" && base !== null) {
      return [
        "prompt_delta",
        { base_call: base, pieces: encodeDelta(ctx.sequences.get(base)!, call.prompt_token_ids) },
      ];
    }
    if (key === "generation_log_probs") {
      const bytes = f32Base64(call.generation_log_probs);
      return bytes === null ? [key, value] : ["generation_log_probs_f32le", bytes];
    }
    if (key === "media") {
      const refs = call.media.map((id) => ctx.mediaIds.indexOf(id));
      return refs.includes(-1) ? [key, value] : ["media_refs", refs];
    }
    if (
      key === "decision" &&
      call.decision &&
      policy &&
      same(
        [call.decision.name, call.decision.version, call.decision.config_digest],
        [policy.name, policy.version, policy.config_digest],
      )
    ) {
      return ["decision", { trigger: call.decision.trigger, chunk: call.decision.chunk }];
    }
    return [key, value];
  });
}

function expandCall(ctx: Context, raw: Json, i: number): CallEvidence {
  const where = `evidence calls[${i}] (${String(raw.call_id)})`;
  const policy = ctx.record.compaction?.policy;
  return mapKeys(raw, (key, value) => {
    if (key === "prompt_delta") {
      const delta = value as { base_call?: unknown; pieces?: DeltaPiece[] } | null;
      const base = typeof delta?.base_call === "string" ? ctx.sequences.get(delta.base_call) : undefined;
      if (!base)
        throw new EvidenceError(
          `${where}.prompt_delta.base_call names ${JSON.stringify(delta?.base_call)}, not an earlier call`,
        );
      return ["prompt_token_ids", expandDelta(`${where}.prompt_delta`, base, delta!.pieces)];
    }
    if (key === "generation_log_probs_f32le")
      return ["generation_log_probs", f32FromBase64(`${where}.generation_log_probs_f32le`, value)];
    if (key === "media_refs") {
      if (!Array.isArray(value)) throw new EvidenceError(`${where}.media_refs must be an array`);
      return [
        "media",
        value.map((k, j) => {
          const id = ctx.mediaIds[k as number];
          if (id === undefined)
            throw new EvidenceError(
              `${where}.media_refs[${j}] is ${JSON.stringify(k)}, not an index into the media table`,
            );
          return id;
        }),
      ];
    }
    if (key === "decision" && value !== null && typeof value === "object" && !("name" in value)) {
      if (!policy) throw new EvidenceError(`${where}.decision has no policy and the record's compaction names none`);
      return ["decision", { ...policy, ...(value as Json) }];
    }
    return [key, value];
  }) as unknown as CallEvidence;
}

// A boundary repeats its calls: the digests, counts and decision of its first call and the one before.
function derivedBoundary(b: Json, calls: ReadonlyMap<string, CallEvidence>, where: string): BoundaryRecord {
  const first = calls.get(b.first_call as string);
  const previous = calls.get(b.previous_call as string);
  if (!first || !previous || !first.decision)
    throw new EvidenceError(
      `${where} names calls that are not recorded (${String(b.first_call)}, ${String(b.previous_call)})`,
    );
  const { trigger, chunk: _chunk, ...policy } = first.decision;
  const ranges = (b.changed as number[][]).map(([old_start, old_end, new_start, new_end]) => ({
    old_start,
    old_end,
    new_start,
    new_end,
  }));
  return {
    boundary: b.boundary as number,
    segment: first.segment,
    first_call: first.call_id,
    previous_call: previous.call_id,
    reason: b.reason as BoundaryRecord["reason"],
    trigger,
    policy,
    old_view_digest: previous.view_digest,
    new_view_digest: first.view_digest,
    changed_ranges: ranges,
    old_items: b.old_items as number,
    new_items: first.view.input_items,
    old_media: previous.media.length,
    new_media: first.media.length,
    retained: first.view.retained,
    omitted: first.view.omitted,
  };
}

function packBoundary(b: BoundaryRecord, calls: ReadonlyMap<string, CallEvidence>): Json {
  const packed = {
    boundary: b.boundary,
    first_call: b.first_call,
    previous_call: b.previous_call,
    reason: b.reason,
    changed: b.changed_ranges.map((r) => [r.old_start, r.old_end, r.new_start, r.new_end]),
    old_items: b.old_items,
    derived: true,
  };
  try {
    return same(derivedBoundary(packed, calls, "boundary"), b) ? packed : (b as unknown as Json);
  } catch {
    return b as unknown as Json;
  }
}

/** The attempt log a run writes: each call's failed attempts (in order), then its answer. */
function derivedAttempts(calls: readonly CallEvidence[], failed: readonly AttemptRecord[]): AttemptRecord[] {
  const out: AttemptRecord[] = [];
  for (const call of calls) {
    for (const f of failed) if (f.call_id === call.call_id) out.push(f);
    out.push({ call_id: call.call_id, attempt: call.attempts, status: "ok" });
  }
  return out;
}

/**
 * The packed envelope of a record (see the module comment); a part that would not expand
 * byte-identical is kept as it was.
 */
export function packEvidence(record: EvidenceRecord): PackedEvidenceRecord {
  const ctx: Context = { record, sequences: new Map(), mediaIds: record.media.map((m) => m.id) };
  const calls = record.calls.map((call, i) => {
    const packed = packCall(ctx, call, record.calls[i - 1]);
    let kept: Json = call as unknown as Json;
    try {
      if (same(expandCall(ctx, packed, i), call)) kept = packed;
    } catch {
      // kept as it was
    }
    ctx.sequences.set(call.call_id, fullSequence(call));
    return kept;
  });
  const byId = new Map(record.calls.map((c) => [c.call_id, c]));
  const failed = record.attempts.filter((a) => a.status === "failed");
  const attemptsDerive = same(derivedAttempts(record.calls, failed), record.attempts);
  const packed = mapKeys(record as unknown as Json, (key, value) => {
    if (key === "calls") return ["calls", calls];
    if (key === "boundaries") return ["boundaries", record.boundaries.map((b) => packBoundary(b, byId))];
    if (key === "attempts" && attemptsDerive) return ["failed_attempts", failed];
    return [key, value];
  });
  return { packing: PACKING, ...packed };
}

/** The record a packed envelope holds; throws EvidenceError naming the first part that does not expand. */
export function expandEvidence(packed: PackedEvidenceRecord): EvidenceRecord {
  if (packed.packing !== PACKING)
    throw new EvidenceError(
      `evidence packing: unsupported ${JSON.stringify(packed.packing)} (this reader knows ${PACKING})`,
    );
  const { packing: _packing, ...rest } = packed;
  const media = Array.isArray(rest.media) ? (rest.media as { id?: unknown }[]) : [];
  const ctx: Context = {
    record: rest as unknown as EvidenceRecord,
    sequences: new Map(),
    mediaIds: media.map((m) => String(m?.id)),
  };
  if (!Array.isArray(rest.calls)) throw new EvidenceError("evidence calls: must be an array");
  const calls = (rest.calls as Json[]).map((raw, i) => {
    if (typeof raw !== "object" || raw === null) throw new EvidenceError(`evidence calls[${i}]: must be an object`);
    const call = expandCall(ctx, raw, i);
    if (Array.isArray(call.prompt_token_ids) && Array.isArray(call.generation_token_ids))
      ctx.sequences.set(String(call.call_id), fullSequence(call));
    return call;
  });
  const byId = new Map(calls.map((c) => [c.call_id, c]));
  return mapKeys(rest, (key, value) => {
    if (key === "calls") return ["calls", calls];
    if (key === "boundaries" && Array.isArray(value)) {
      return [
        "boundaries",
        value.map((b: Json, i) =>
          b && b.derived === true ? derivedBoundary(b, byId, `evidence boundaries[${i}]`) : b,
        ),
      ];
    }
    if (key === "failed_attempts") {
      if (!Array.isArray(value)) throw new EvidenceError("evidence failed_attempts: must be an array");
      return ["attempts", derivedAttempts(calls, value as AttemptRecord[])];
    }
    return [key, value];
  }) as unknown as EvidenceRecord;
}
