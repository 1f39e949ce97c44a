// Gym's PolicyDecisionRecord of each model call (PR #2616, `compaction/policies.py` and the
// turn-chunked controller): which semantic parts the view kept, which it omitted and what marker
// replaced them, the protected parts, the selection digest and the transformation lineage. Built
// from this runtime's view plans over Gym's part split of the same items, so a NeMo RL bridge
// reading Gym's lineage gets the records Gym's agent would write for these views.
import {
  gymParts,
  lineageRecord,
  unitRecord,
  type GymPart,
  type OmissionArtifact,
  type UnitLineageRecord,
} from "./gym-lineage.js";
import type { TransformationLineageRecord } from "./gym-lineage.js";
import { isImageGroup, type HistoryEntry } from "./history.js";
import { entryItem } from "./materialize.js";
import type { MediaStore } from "./media.js";
import type { PolicyIdentity, ViewPlan } from "./policies.js";
import { orderedIdDigest } from "./gym-ids.js";

export interface PolicyDecisionRecord {
  policy_name: string;
  policy_version: string;
  config_digest: string;
  protected_part_ids: string[];
  changed_part_ranges: [string, string][];
  retained_part_count: number;
  omitted_part_count: number;
  selection_digest: string;
  inserted_artifact_ids: string[];
  decision_turn: number;
  lineage: TransformationLineageRecord;
}

/** What decides protection: Gym's recency settings (absent: nothing is protected). */
interface Protection {
  images: { enabled: boolean; protectInitialContext: boolean };
  reasoning: { enabled: boolean; keepFirstBlock: boolean };
}

/** The recency settings in a policy's Gym form (`{type, config}`), if it is Gym's recency policy. */
function protectionOf(form: Readonly<Record<string, unknown>>): Protection | null {
  if (form.type !== "recency") return null;
  const config = form.config as {
    images: { enabled: boolean; protect_initial_context: boolean };
    reasoning: { enabled: boolean; keep_first_block: boolean };
  };
  return {
    images: { enabled: config.images.enabled, protectInitialContext: config.images.protect_initial_context },
    reasoning: { enabled: config.reasoning.enabled, keepFirstBlock: config.reasoning.keep_first_block },
  };
}

/** Gym's parts of the history entries, memoized by entry (an entry's parts never change), and their unit records. */
export class GymPartIndex {
  private readonly cache = new Map<number, GymPart[]>();
  private readonly units = new Map<string, UnitLineageRecord>();
  constructor(private readonly media: MediaStore) {}
  /** The part's unit record, the same object for the same disposition (later calls reuse its digests). */
  unit(part: GymPart, kept: boolean, artifact: OmissionArtifact | undefined): UnitLineageRecord {
    const key = `${part.id}\u0000${kept ? "" : (artifact?.id ?? "-")}`;
    let record = this.units.get(key);
    if (!record) {
      record = unitRecord(part, kept, artifact);
      this.units.set(key, record);
    }
    return record;
  }
  of(entry: HistoryEntry): GymPart[] {
    let parts = this.cache.get(entry.seq);
    if (!parts) {
      const item = entryItem(entry, this.media) as Record<string, unknown> | null;
      parts = item ? gymParts(item, entry.seq, entry.origin === "initial") : [];
      this.cache.set(entry.seq, parts);
    }
    return parts;
  }
}

/** The turn of the newest model output, -1 before the first (the pending observations follow it). */
function latestTurn(entries: readonly HistoryEntry[]): number {
  let turn = -1;
  for (const e of entries) if (e.origin === "model") turn = Math.max(turn, e.turn);
  return turn;
}

/**
 * The decision of one call: `plan` over `entries` (the history the call's request was built from),
 * `decisionTurn` Gym's 1-based step.
 */
export function policyDecision(
  policy: PolicyIdentity,
  form: Readonly<Record<string, unknown>>,
  plan: ViewPlan,
  entries: readonly HistoryEntry[],
  parts: GymPartIndex,
  decisionTurn: number,
): PolicyDecisionRecord {
  const shown = new Map(plan.items.map((item) => [item.entry, item]));
  const protection = protectionOf(form);
  const latest = latestTurn(entries);
  const pending = (e: HistoryEntry) =>
    latest < 0 ? e.origin === "initial" : e.origin === "environment" && e.turn === latest;
  const reasoningTurns = entries.filter((e) => e.kind === "reasoning").map((e) => e.turn);
  const firstReasoningTurn = reasoningTurns.length ? reasoningTurns[0] : null;

  const retained: string[] = [];
  const omitted: string[] = [];
  const protectedIds: string[] = [];
  const changed: [string, string][] = [];
  const artifacts: OmissionArtifact[] = [];
  const units = [];
  let run: string[] = [];
  let artifact: OmissionArtifact | null = null;
  for (const entry of entries) {
    const item = shown.get(entry.seq);
    const imageGroup = isImageGroup(entry);
    const dropped = item === undefined || item.dropImages === true;
    if (imageGroup && !dropped) artifact = null; // a kept image group ends a run of omitted ones
    const entryParts = parts.of(entry);
    if (imageGroup && dropped && item?.marker !== undefined) {
      const first = entryParts.find((p) => p.kind === "image")!;
      artifact = { id: `omission-${policy.config_digest.slice(0, 12)}-${first.id}`, text: item.marker };
      artifacts.push(artifact);
    }
    for (const part of entryParts) {
      const kept = item !== undefined && !(part.kind === "image" && item.dropImages === true);
      units.push(parts.unit(part, kept, !kept && part.kind === "image" ? (artifact ?? undefined) : undefined));
      if (!kept) {
        omitted.push(part.id);
        run.push(part.id);
        continue;
      }
      retained.push(part.id);
      if (run.length) changed.push([run[0], run[run.length - 1]]);
      run = [];
      const isProtected =
        protection !== null &&
        ((part.kind === "image" &&
          protection.images.enabled &&
          ((protection.images.protectInitialContext && entry.origin === "initial") || pending(entry))) ||
          (part.kind === "reasoning" &&
            protection.reasoning.enabled &&
            protection.reasoning.keepFirstBlock &&
            entry.turn === firstReasoningTurn));
      if (isProtected) protectedIds.push(part.id);
    }
  }
  if (run.length) changed.push([run[0], run[run.length - 1]]);
  const selection =
    policy.name === "identity" ? orderedIdDigest(retained) : orderedIdDigest([...retained, "--omitted--", ...omitted]);
  return {
    policy_name: policy.name,
    policy_version: policy.version,
    config_digest: policy.config_digest,
    protected_part_ids: protectedIds,
    changed_part_ranges: changed,
    retained_part_count: retained.length,
    omitted_part_count: omitted.length,
    selection_digest: selection,
    inserted_artifact_ids: artifacts.map((a) => a.id),
    decision_turn: decisionTurn,
    lineage: lineageRecord(policy.name, policy.version, policy.config_digest, units, omitted.length > 0),
  };
}

/**
 * A call in the tail of a turn-chunked chunk, as Gym's TurnChunkedHistoryController decides it: the
 * chunk's base decision (made at its first call) with the tail kept, the selection digest chained
 * to the base's, and the lineage over the whole history.
 */
export function chunkedDecision(base: PolicyDecisionRecord, own: PolicyDecisionRecord): PolicyDecisionRecord {
  const retained = own.lineage.unit_records.filter((u) => u.disposition === "kept").map((u) => u.source_unit_id);
  return {
    ...base,
    retained_part_count: own.retained_part_count,
    selection_digest: orderedIdDigest([...retained, "--base-selection--", base.selection_digest]),
    decision_turn: own.decision_turn,
    lineage: lineageRecord(
      base.lineage.transformation_type,
      base.lineage.transformation_version,
      base.lineage.configuration_digest,
      own.lineage.unit_records,
      base.lineage.lossy,
    ),
  };
}
