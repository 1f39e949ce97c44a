// A rollout's token file read whole: every entry checked (versions, types, one entry per call),
// full prompts rebuilt from delta entries and checked against cum_len and digest, the entries
// put in ledger order (created_at, then file order), and Gym's recorded lineage kept aside.
import type { Diagnostic } from "../../types.js";
import type { TokenEntries } from "../types.js";
import { FormatError } from "../values.js";
import { compareTimes } from "./created-at.js";
import { fullPrompts } from "./full-prompts.js";
import { lineageNotes, recordedParents, type RecordedParent } from "./recorded-lineage.js";
import { readTokenEntry, type TokenEntry } from "./token-entry.js";
import { q } from "../values.js";

export interface CapturedCalls {
  /** Ledger order. */
  entries: TokenEntry[];
  /** Each entry's full prompt (a delta's rebuilt; otherwise the stored array itself). */
  prompts: ReadonlyMap<string, ArrayLike<unknown>>;
  /** Lineage notes that need no forest (`parent_unresolved`, ...). */
  notes: Diagnostic[];
  recordedParents: Map<string, RecordedParent>;
}

export function readCapturedCalls(file: TokenEntries, rolloutId: string): CapturedCalls {
  const entries: TokenEntry[] = [];
  const lineOf = new Map<string, number>();
  // The first line that is not JSON: it rejects the file, after the entries before it are read
  // (so a delta whose parent may be that line is named as such).
  let unreadable: FormatError | null = null;
  for (const line of file.lines) {
    const where = `${file.file}:${line.line}`;
    if ("error" in line) {
      unreadable ??= new FormatError("malformed_token_entry", `${where}: ${line.error}`);
      continue;
    }
    let entry: TokenEntry;
    try {
      entry = readTokenEntry(line.value, where, line.line, rolloutId);
    } catch (error) {
      throw unreadable ?? error;
    }
    const previous = lineOf.get(entry.id);
    if (previous !== undefined) {
      throw (
        unreadable ??
        new FormatError(
          "duplicate_call_id",
          `${entry.label}model_call_id repeats line ${previous}`,
          "duplicate_call_id",
        )
      );
    }
    lineOf.set(entry.id, line.line);
    entries.push(entry);
  }
  if (unreadable !== null) throw orphanedDelta(entries, lineOf, unreadable) ?? unreadable;
  // In file order, so a broken delta chain is named at the first entry that needs it.
  const prompts = fullPrompts(entries, file.file);
  const order = new Map(entries.map((entry, i) => [entry, i]));
  entries.sort((a, b) => compareTimes(a.createdAt, b.createdAt) || order.get(a)! - order.get(b)!);
  return { entries, prompts, notes: lineageNotes(entries), recordedParents: recordedParents(entries) };
}

/** The first delta whose parent has no readable entry, when a line is not JSON: it may be that line. */
function orphanedDelta(
  entries: readonly TokenEntry[],
  ids: ReadonlyMap<string, number>,
  unreadable: FormatError,
): FormatError | null {
  const orphan = entries.find((e) => e.promptIsDelta && e.parentCallId !== null && !ids.has(e.parentCallId));
  if (orphan === undefined) return null;
  return new FormatError(
    "delta_parent_unreadable",
    `${orphan.label}prompt_is_delta, but its parent ${q(orphan.parentCallId)} ` +
      `has no readable entry (${unreadable.detail})`,
  );
}
