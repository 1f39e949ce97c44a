// What `callforest explain` says about one planned rollout: every call with a near parent (SPEC's
// prefix_break) and every root that is not its agent's first call, with where it parted and why.
import type { ForestCall, Rollout, TokenIds } from "../types.js";
import {
  classify,
  glueCause,
  tokenAfter,
  type BreakCause,
  type Cause,
  type CauseOptions,
  type GlueCause,
} from "./cause.js";
import { BREAK_QUOTE } from "../core/types.js";
import { closestEarlier, commonPrefix, type Parting } from "./near.js";

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

/** An explained call with the arrays its text window is drawn from. */
export interface ExplainedCall extends Explained {
  nearFull: TokenIds | null;
  nearPromptLength: number;
  prompt: TokenIds;
}

/** One eligible call with its place in the forest. */
interface Eligible {
  forest: ForestCall;
  prompt: TokenIds;
  full: number[];
}

/** The eligible calls of a planned rollout, in ledger order, with their full sequences. */
function eligibleCalls(rollout: Rollout, forest: readonly ForestCall[]): Eligible[] {
  return forest
    .filter((call) => call.eligible)
    .map((call) => {
      const input = rollout.calls[call.index]!;
      const prompt = input.prompt_token_ids;
      return { forest: call, prompt, full: [...Array.from(prompt), ...Array.from(input.generation_token_ids)] };
    });
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
  const calls = eligibleCalls(rollout, forest);
  const index = new Map(calls.map((call, i) => [call.forest.id, i]));
  // Near parents are the plan's own (SPEC's prefix_break); the trie only finds roots' closest calls.
  const closest = withAgents ? [] : closestEarlier(calls);
  const previousOfAgent = new Map<string, number>();
  const roots = treeRoots(calls, index);
  // What the template writes after a stop token in a tree's first prompt, once per tree and token.
  const afterStop = new Map<string, number | null>();
  const after = (root: number, stop: number): number | null => {
    const key = `${root} ${stop}`;
    if (!afterStop.has(key)) afterStop.set(key, tokenAfter(calls[root]!.prompt, stop));
    return afterStop.get(key)!;
  };
  const out: ExplainedCall[] = [];
  calls.forEach((call, i) => {
    const previous = previousOfAgent.get(call.forest.agent);
    previousOfAgent.set(call.forest.agent, i);
    const { nearParent, breakAt } = call.forest;
    let parting: Parting | null =
      nearParent === null || breakAt === null ? null : { near: index.get(nearParent)!, at: breakAt };
    let kind: Explained["kind"] = "prefix_break";
    if (parting === null) {
      // A call that continues its parent: listed only when what it adds after the parent's stop
      // token is wrong (compared with its tree's first prompt, which the template rendered whole).
      const parent = call.forest.parent === null ? undefined : index.get(call.forest.parent);
      if (parent !== undefined) {
        const follows = (stop: number) => after(roots[i]!, stop);
        const cause = glueCause(calls[parent]!.full, call.prompt, follows, options.isSpecial);
        if (cause !== null) out.push(glueCall(rollout, calls[parent]!, call, cause));
        return;
      }
      // A media_mismatch or route_mismatch root resent an earlier call's tokens: the report
      // already says why (route mismatches are explained on their own: routes.ts).
      if (!call.forest.root || previous === undefined || call.forest.mediaMismatch || call.forest.routeMismatch) return;
      kind = "root";
      parting = withAgents ? { near: previous, at: commonPrefix(calls[previous]!.full, call.prompt) } : closest[i]!;
    }
    const nearCall = parting === null ? null : calls[parting.near]!;
    const at = parting?.at ?? 0;
    const result = nearCall
      ? classify({ full: nearCall.full, promptLength: nearCall.prompt.length }, call.prompt, at, options)
      : { cause: "fresh" as const };
    out.push({
      rollout_id: rollout.rollout_id,
      call: call.forest.id,
      agent: call.forest.agent,
      near: nearCall?.forest.id ?? null,
      at,
      kind,
      cause: result.cause,
      ...(result.also === undefined ? {} : { also: result.also }),
      ...(result.unknown === undefined ? {} : { unknown: result.unknown }),
      expected: nearCall ? nearCall.full.slice(at, at + BREAK_QUOTE) : [],
      found: Array.from(call.prompt.slice(at, at + BREAK_QUOTE)),
      nearFull: nearCall?.full ?? null,
      nearPromptLength: nearCall?.prompt.length ?? 0,
      prompt: call.prompt,
    });
  });
  return out;
}

/** For each call, the index of its tree's first call (a parent comes before its children). */
function treeRoots(calls: readonly Eligible[], index: ReadonlyMap<string, number>): number[] {
  const roots: number[] = [];
  calls.forEach((call, i) => {
    const parent = call.forest.parent === null ? undefined : index.get(call.forest.parent);
    roots.push(parent === undefined ? i : roots[parent]!);
  });
  return roots;
}

/** A call that continues `near` (its parent) but adds the wrong token after its stop token. */
function glueCall(rollout: Rollout, near: Eligible, call: Eligible, cause: GlueCause): ExplainedCall {
  const at = near.full.length;
  return {
    rollout_id: rollout.rollout_id,
    call: call.forest.id,
    agent: call.forest.agent,
    near: near.forest.id,
    at,
    kind: "glue",
    cause,
    expected: [],
    found: Array.from(call.prompt.slice(at, at + BREAK_QUOTE)),
    nearFull: near.full,
    nearPromptLength: near.prompt.length,
    prompt: call.prompt,
  };
}

/** Without the arrays: what `--json` writes. */
export function explainedRecord(call: ExplainedCall): Explained {
  const { nearFull: _full, nearPromptLength: _length, prompt: _prompt, ...record } = call;
  return record;
}
