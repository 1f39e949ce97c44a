// What `callforest explain` says about one planned rollout: every call with a near parent (SPEC's
// prefix_break) and every root that is not its agent's first call, with where it parted and why;
// and what the breaks cost (cost.ts). Calls' tokens are read through views (calls.ts); a call's
// full sequence is built only when a cause is looked for against it.
import type { ForestCall, Rollout } from "../types.js";
import {
  classify,
  glueCause,
  tokenAfter,
  type BreakCause,
  type Cause,
  type CauseOptions,
  type CauseResult,
} from "./cause.js";
import { BREAK_QUOTE } from "../core/types.js";
import { commonPrefixWithFull, eligibleCalls, fullOf, fullSlice, type Call } from "./calls.js";
import { build, plannedLinks, type Links, type Sizes } from "./cost.js";
import { closestEarlier, type Parting } from "./near.js";
import { linkable, tokenInTokenOut, turnEnd } from "./tito.js";
import type { Work } from "./token-trie.js";

export interface Explained {
  rollout_id: string;
  call: string;
  agent: string;
  /** The near parent, or for a root the closest earlier call (its agent's previous one); null if none. */
  near: string | null;
  /** Where the call's prompt parts from `near`'s full sequence (their longest common prefix). */
  at: number;
  /**
   * `prefix_break`: SPEC's diagnostic flags it; `root`: a root the diagnostic does not cover;
   * `glue`: a call that continues its parent (`near`, `at` its full length) but adds to it a
   * token that should not be there.
   */
  kind: "prefix_break" | "root" | "glue";
  cause: Cause;
  /** What else the template or harness changed in the near call's generation after `cause`, in order. */
  also?: BreakCause[];
  /** What could not be told without a tokenizer. */
  unknown?: string;
  /** `full(near)[at : at+8]` and `prompt(call)[at : at+8]`. */
  expected: number[];
  found: number[];
}

/** Tokens kept for the text window: before `at`, and after it on each side. */
export const WINDOW_BEFORE = 8;
export const WINDOW_AFTER = 16;

/** An explained call with the tokens its text window shows (null when there is no near call). */
export interface ExplainedCall extends Explained {
  window: { before: number[]; near: number[]; call: number[] } | null;
}

/** A rollout's explained calls, and what it costs as sent and token-in/token-out. */
export interface Analysis {
  explained: ExplainedCall[];
  sent: Sizes;
  tito: Sizes;
  /** Tokens of the near calls' sequences that the relinked calls did not resend (docs/breaks.md). */
  dropped: number;
  /** The token-in/token-out version's links (over the eligible calls, in ledger order). */
  titoLinks: Links;
}

/**
 * The explained calls of a rollout that planned (`forest` from its plan), in ledger order.
 * `withAgents`: the rollout lists agents, so a root's closest call is its agent's previous one.
 */
export function explainRollout(
  rollout: Rollout,
  forest: readonly ForestCall[],
  withAgents: boolean,
  options: CauseOptions = {},
): ExplainedCall[] {
  return analyzeRollout(rollout, forest, withAgents, options).explained;
}

/** explainRollout, and the cost; `work` counts the tokens touched. */
export function analyzeRollout(
  rollout: Rollout,
  forest: readonly ForestCall[],
  withAgents: boolean,
  options: CauseOptions = {},
  work: Work = { tokens: 0 },
): Analysis {
  const calls = eligibleCalls(rollout, forest);
  const index = new Map(calls.map((call, i) => [call.forest.id, i]));
  const planned = plannedLinks(calls);
  const sent = build(calls, planned, work);
  // Near parents are the plan's own (SPEC's prefix_break); the trie only finds roots' closest
  // calls, when a root needs one.
  let closest: (Parting | null)[] | null = null;
  const previousOfAgent = new Map<string, number>();
  const relinked = new Map<number, { near: number; cut: number }>();
  const explained: ExplainedCall[] = [];
  let dropped = 0;
  // The near call's full sequence, built once for the calls that part from it in a row.
  let cached: { near: number; full: Int32Array } | null = null;
  const nearFull = (near: number) => {
    if (cached?.near !== near) cached = { near, full: fullOf(calls[near]!, work) };
    return { full: cached.full, promptLength: calls[near]!.prompt.length };
  };
  const roots = treeRoots(calls);
  // What the template writes after a stop token in a tree's first prompt, once per tree and token.
  const afterStop = new Map<string, number | null>();
  const after = (root: number, stop: number): number | null => {
    const key = `${root} ${stop}`;
    if (!afterStop.has(key)) {
      afterStop.set(key, tokenAfter(calls[root]!.prompt, stop));
      work.tokens += calls[root]!.prompt.length;
    }
    return afterStop.get(key)!;
  };
  calls.forEach((call, i) => {
    const previous = previousOfAgent.get(call.forest.agent);
    previousOfAgent.set(call.forest.agent, i);
    const { nearParent, breakAt } = call.forest;
    let parting: Parting | null =
      nearParent === null || breakAt === null ? null : { near: index.get(nearParent)!, at: breakAt };
    let kind: Explained["kind"] = "prefix_break";
    if (parting === null && call.parent >= 0) {
      // A call that continues its parent: listed only when what it adds after the parent's stop
      // token is wrong (compared with its tree's first prompt, which the template rendered whole).
      const parent = calls[call.parent]!;
      const stop = parent.fullLength > 0 ? fullSlice(parent, parent.fullLength - 1, parent.fullLength)[0] : undefined;
      const next = call.prompt[parent.fullLength];
      const cause = glueCause(stop, next, (token) => after(roots[i]!, token), options.isSpecial);
      if (cause !== null)
        explained.push(explainedCall(rollout.rollout_id, call, "glue", parent, parent.fullLength, { cause }));
      return;
    }
    if (parting === null) {
      // A media_mismatch or route_mismatch root resent an earlier call's tokens: the report
      // already says why (route mismatches are explained on their own: routes.ts).
      if (!call.forest.root || previous === undefined || call.forest.mediaMismatch || call.forest.routeMismatch) return;
      kind = "root";
      parting = withAgents
        ? { near: previous, at: commonPrefixWithFull(calls[previous]!, call.prompt, work) }
        : (closest ??= closestEarlier(sent, work))[i]!;
    }
    const nearCall = parting === null ? null : calls[parting.near]!;
    // classify and turnEnd scan at most the prompt and the near call's generation.
    work.tokens += call.prompt.length + (nearCall?.generation.length ?? 0);
    const result = parting === null ? null : classify(nearFull(parting.near), call.prompt, parting.at, options);
    explained.push(explainedCall(rollout.rollout_id, call, kind, nearCall, parting?.at ?? 0, result));
    if (parting === null || !linkable(result!.cause)) return;
    const near = nearFull(parting.near);
    const cut = turnEnd(near, call.prompt, parting.at);
    relinked.set(i, { near: parting.near, cut });
    dropped += Math.max(0, near.full.length - cut);
  });
  const titoLinks = tokenInTokenOut(planned, relinked);
  const tito = build(calls, titoLinks, work);
  return { explained, sent: sent.sizes, tito: tito.sizes, dropped, titoLinks };
}

/** For each call, the index of its tree's first call (a parent comes before its children). */
function treeRoots(calls: readonly Call[]): number[] {
  const roots: number[] = [];
  calls.forEach((call, i) => {
    roots.push(call.parent < 0 ? i : roots[call.parent]!);
  });
  return roots;
}

function explainedCall(
  rolloutId: string,
  call: Call,
  kind: Explained["kind"],
  nearCall: Call | null,
  at: number,
  result: CauseResult | null,
): ExplainedCall {
  const { cause, also, unknown } = result ?? { cause: "fresh" as const };
  const promptSlice = (from: number, to: number) => Array.from(call.prompt.slice(Math.max(0, from), to));
  return {
    rollout_id: rolloutId,
    call: call.forest.id,
    agent: call.forest.agent,
    near: nearCall?.forest.id ?? null,
    at,
    kind,
    cause,
    ...(also === undefined ? {} : { also }),
    ...(unknown === undefined ? {} : { unknown }),
    expected: nearCall ? fullSlice(nearCall, at, at + BREAK_QUOTE) : [],
    found: promptSlice(at, at + BREAK_QUOTE),
    window:
      nearCall === null
        ? null
        : {
            before: promptSlice(at - WINDOW_BEFORE, at),
            near: fullSlice(nearCall, at, at + WINDOW_AFTER),
            call: promptSlice(at, at + WINDOW_AFTER),
          },
  };
}

/** Without the window: what `--json` writes. */
export function explainedRecord(call: ExplainedCall): Explained {
  const { window: _window, ...record } = call;
  return record;
}
