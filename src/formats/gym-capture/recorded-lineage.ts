// Gym's recorded lineage (`parent_call_id`, `parent_resolution` and its reason) as evidence next
// to the forest: calls link by exact token prefixes only. What Gym recorded is compared with
// that link after planning (`recorded_parent_differs`), and what it could not prove is noted.
import type { Diagnostic, ForestCall } from "../../types.js";
import type { TokenEntry } from "./token-entry.js";
import { q } from "../values.js";

/** A parent Gym recorded for a call, and where (token file:line). */
export interface RecordedParent {
  parent: string;
  where: string;
}

/** The parents Gym recorded, by call id (for `recordedParentNotes` once the forest is known). */
export function recordedParents(entries: readonly TokenEntry[]): Map<string, RecordedParent> {
  const out = new Map<string, RecordedParent>();
  for (const entry of entries)
    if (entry.parentCallId !== null) out.set(entry.id, { parent: entry.parentCallId, where: entry.where });
  return out;
}

/**
 * Notes from the entries alone: an unresolved parent and Gym's reason, a v3+ entry with no
 * decision recorded, and a resolution its own validator would refuse (Gym's rules, §1.3).
 */
export function lineageNotes(entries: readonly TokenEntry[]): Diagnostic[] {
  const notes: Diagnostic[] = [];
  for (const entry of entries) {
    const { resolution, parentCallId, where } = entry;
    if (resolution === "unresolved") {
      const reason = entry.resolutionReason === "" ? "no reason recorded" : `reason ${q(entry.resolutionReason)}`;
      notes.push({
        code: "parent_unresolved",
        call: entry.id,
        detail: `${where}: parent_resolution "unresolved" (${reason})`,
      });
    } else if (resolution === null && entry.version !== null && entry.version >= 3) {
      notes.push({
        code: "parent_resolution_missing",
        call: entry.id,
        detail: `${where}: schema_version ${entry.version} without parent_resolution`,
      });
    }
    const inconsistent =
      (resolution === "resolved" && parentCallId === null) ||
      ((resolution === "root" || resolution === "unresolved") && parentCallId !== null) ||
      (entry.promptIsDelta && resolution !== null && resolution !== "resolved");
    if (inconsistent) {
      const parent = parentCallId === null ? "no parent_call_id" : `parent_call_id ${q(parentCallId)}`;
      const delta = entry.promptIsDelta ? ", prompt_is_delta" : "";
      notes.push({
        code: "recorded_lineage_invalid",
        call: entry.id,
        detail: `${where}: parent_resolution ${q(resolution)} with ${parent}${delta}`,
      });
    }
  }
  return notes;
}

/**
 * `recorded_parent_differs` for each eligible call whose recorded parent is not the parent exact
 * tokens gave it (the forest's, which stands).
 */
export function recordedParentNotes(
  recorded: ReadonlyMap<string, RecordedParent>,
  forest: readonly ForestCall[],
): Diagnostic[] {
  const byId = new Map(forest.map((call) => [call.id, call]));
  const notes: Diagnostic[] = [];
  for (const call of forest) {
    const claim = recorded.get(call.id);
    if (claim === undefined || !call.eligible || claim.parent === call.parent) continue;
    const claimed = byId.get(claim.parent);
    const why =
      claimed === undefined
        ? " (no token entry)"
        : !claimed.kept
          ? " (not kept)"
          : !claimed.eligible
            ? " (generated nothing)"
            : "";
    const linked = call.parent === null ? "exact tokens make it a root" : `exact tokens link it to ${q(call.parent)}`;
    notes.push({
      code: "recorded_parent_differs",
      call: call.id,
      detail: `${claim.where}: Gym recorded parent ${q(claim.parent)}${why}; ${linked}`,
    });
  }
  return notes;
}
