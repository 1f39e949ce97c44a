// The controller compares each materialized request with the last acknowledged one. Append-
// compatible requests continue the context segment (and must continue its exact tokens);
// anything else is a rewrite boundary that starts a new segment. A boundary stays pending until
// its call succeeds, and a retry of that call reuses it: it is recorded once.
import { PrefixMismatchError } from "./errors.js";
import type { MaterializedView } from "./materialize.js";
import type { PolicyIdentity, ViewCounts } from "./policies.js";
import type { ViewTrigger } from "./schedules.js";

export interface ChangedRange {
  old_start: number;
  old_end: number;
  new_start: number;
  new_end: number;
}

export type BoundaryReason =
  /** An item the previous request sent is gone or different (an image became a marker, reasoning was dropped). */
  | "history_rewritten"
  /** The previous request survives, but the model's own output is not resent verbatim after it. */
  | "output_not_resent"
  /** The items line up but the media order does not. */
  | "media_rewritten"
  /** The items line up but the instructions or the tools changed (the prompt's header is rendered anew). */
  | "header_rewritten";

export interface BoundaryRecord {
  /** 0-based, in the order boundaries were committed. */
  boundary: number;
  /** The segment this boundary opens. */
  segment: number;
  /** The call that starts the new segment (the first call sent with the rewritten view). */
  first_call: string;
  /** The last acknowledged call of the previous segment. */
  previous_call: string;
  reason: BoundaryReason;
  trigger: ViewTrigger;
  policy: PolicyIdentity;
  old_view_digest: string;
  new_view_digest: string;
  /** Item ranges that differ between the acknowledged context (request + output) and the new request. */
  changed_ranges: ChangedRange[];
  old_items: number;
  new_items: number;
  old_media: number;
  new_media: number;
  retained: ViewCounts;
  omitted: ViewCounts;
}

interface Acknowledged {
  callId: string;
  segment: number;
  /** The request's instructions and tools (see PreparedCall.header). */
  header: string;
  /** Input items of the request, then the model's output items as they will be resent. */
  keys: string[];
  inputItems: number;
  mediaIds: string[];
  viewDigest: string;
  promptIds: number[];
  generationIds: number[];
}

export interface PreparedCall {
  callId: string;
  segment: number;
  /**
   * The request's instructions and tools, as one canonical string: they are rendered before the
   * items, so a change there changes the prompt's tokens from the start.
   */
  header: string;
  appendCompatible: boolean;
  /** previous prompt ++ previous generation, when the call continues the segment. */
  requiredPrefix: number[] | null;
  /** The acknowledged call this one continues. */
  parentCall: string | null;
  /** The boundary this call opens (pending until acknowledged). */
  boundary: BoundaryRecord | null;
  viewDigest: string;
}

export interface ViewDecision {
  policy: PolicyIdentity;
  trigger: ViewTrigger;
  retained: ViewCounts;
  omitted: ViewCounts;
}

function isPrefix<T>(prefix: readonly T[], whole: readonly T[]): boolean {
  if (prefix.length > whole.length) return false;
  for (let i = 0; i < prefix.length; i++) if (prefix[i] !== whole[i]) return false;
  return true;
}

/**
 * Ranges where two item lists differ, from a longest-common-subsequence alignment. A common
 * head and tail are matched first (they are part of some LCS): the table then covers only the
 * middle, so a boundary that changes a few items of a long history stays cheap.
 */
export function changedRanges(a: readonly string[], b: readonly string[]): ChangedRange[] {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const middle = middleRanges(a.slice(head, a.length - tail), b.slice(head, b.length - tail));
  return middle.map((r) => ({
    old_start: r.old_start + head,
    old_end: r.old_end + head,
    new_start: r.new_start + head,
    new_end: r.new_end + head,
  }));
}

function middleRanges(a: readonly string[], b: readonly string[]): ChangedRange[] {
  const n = a.length;
  const m = b.length;
  // lcs[i][j] = LCS length of a[i..], b[j..]
  const lcs = new Uint32Array((n + 1) * (m + 1));
  const at = (i: number, j: number) => i * (m + 1) + j;
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[at(i, j)] = a[i] === b[j] ? lcs[at(i + 1, j + 1)] + 1 : Math.max(lcs[at(i + 1, j)], lcs[at(i, j + 1)]);
    }
  }
  const ranges: ChangedRange[] = [];
  let i = 0;
  let j = 0;
  let open: ChangedRange | null = null;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      if (open) ranges.push(open);
      open = null;
      i++;
      j++;
      continue;
    }
    open ??= { old_start: i, old_end: i, new_start: j, new_end: j };
    if (j < m && (i === n || lcs[at(i, j + 1)] >= lcs[at(i + 1, j)])) open.new_end = ++j;
    else open.old_end = ++i;
  }
  if (open) ranges.push(open);
  return ranges;
}

export class ContextController {
  private acked: Acknowledged | null = null;
  private pending: PreparedCall | null = null;
  private readonly committed: BoundaryRecord[] = [];
  private segmentCount = 0;

  /** Boundaries committed so far (each once, whatever the retries). */
  get boundaries(): readonly BoundaryRecord[] {
    return this.committed;
  }

  /** The segment the next append-compatible call would continue (-1 before the first call). */
  get segment(): number {
    return this.acked ? this.acked.segment : -1;
  }

  /**
   * Classifies the request for `callId`. Calling it again for the same call before it is
   * acknowledged (a retry, or a recompacted view) replaces the pending decision without
   * recording anything; a retry of the same view returns the same pending boundary.
   */
  prepare(callId: string, view: MaterializedView, decision: ViewDecision, header = ""): PreparedCall {
    const pending = this.pending;
    if (pending && pending.callId === callId && pending.viewDigest === view.digest && pending.header === header)
      return pending;
    const acked = this.acked;
    let prepared: PreparedCall;
    const keysMatch = acked !== null && isPrefix(acked.keys, view.itemKeys);
    const mediaMatch = acked !== null && isPrefix(acked.mediaIds, view.mediaIds);
    if (acked === null) {
      prepared = {
        callId,
        segment: 0,
        header,
        appendCompatible: false,
        requiredPrefix: null,
        parentCall: null,
        boundary: null,
        viewDigest: view.digest,
      };
    } else if (acked.header === header && keysMatch && mediaMatch) {
      prepared = {
        callId,
        segment: acked.segment,
        header,
        appendCompatible: true,
        requiredPrefix: [...acked.promptIds, ...acked.generationIds],
        parentCall: acked.callId,
        boundary: null,
        viewDigest: view.digest,
      };
    } else {
      const inputSurvives = isPrefix(acked.keys.slice(0, acked.inputItems), view.itemKeys);
      const reason: BoundaryReason = !keysMatch
        ? inputSurvives
          ? "output_not_resent"
          : "history_rewritten"
        : !mediaMatch
          ? "media_rewritten"
          : "header_rewritten";
      const boundary: BoundaryRecord = {
        boundary: this.committed.length,
        segment: this.segmentCount,
        first_call: callId,
        previous_call: acked.callId,
        reason,
        trigger: decision.trigger,
        policy: decision.policy,
        old_view_digest: acked.viewDigest,
        new_view_digest: view.digest,
        changed_ranges: changedRanges(acked.keys, view.itemKeys),
        old_items: acked.keys.length,
        new_items: view.itemKeys.length,
        old_media: acked.mediaIds.length,
        new_media: view.mediaIds.length,
        retained: decision.retained,
        omitted: decision.omitted,
      };
      prepared = {
        callId,
        segment: this.segmentCount,
        header,
        appendCompatible: false,
        requiredPrefix: null,
        parentCall: null,
        boundary,
        viewDigest: view.digest,
      };
    }
    this.pending = prepared;
    return prepared;
  }

  /**
   * Commits a successful call: checks its prompt continues the required prefix exactly, records
   * its boundary (once), and makes it the context the next request is compared with.
   */
  acknowledge(
    prepared: PreparedCall,
    view: MaterializedView,
    outputKeys: readonly string[],
    promptIds: readonly number[],
    generationIds: readonly number[],
  ): void {
    if (this.pending !== prepared)
      throw new Error(`controller: call ${prepared.callId} acknowledged without being the pending call`);
    checkRequiredPrefix(prepared.callId, prepared.requiredPrefix, promptIds);
    if (prepared.boundary) this.committed.push(prepared.boundary);
    if (!prepared.appendCompatible) this.segmentCount++;
    this.acked = {
      callId: prepared.callId,
      segment: prepared.segment,
      header: prepared.header,
      keys: [...view.itemKeys, ...outputKeys],
      inputItems: view.itemKeys.length,
      mediaIds: [...view.mediaIds],
      viewDigest: view.digest,
      promptIds: [...promptIds],
      generationIds: [...generationIds],
    };
    this.pending = null;
  }
}

/** Throws unless `observed` starts with `required` exactly (nothing to check when null). */
export function checkRequiredPrefix(
  callId: string,
  required: readonly number[] | null,
  observed: readonly number[],
): void {
  if (!required) return;
  let i = 0;
  const n = Math.min(required.length, observed.length);
  while (i < n && required[i] === observed[i]) i++;
  if (i === required.length) return;
  const where = i < n ? `first difference at token ${i}` : `observed prompt is shorter`;
  throw new PrefixMismatchError(
    `call ${callId}: observed prompt_token_ids (${observed.length} tokens) does not start with ` +
      `required_prefix_token_ids (${required.length} tokens); ${where}`,
    required.length,
    observed.length,
  );
}
