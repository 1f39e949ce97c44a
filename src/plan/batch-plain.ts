// planBatch()'s path for a rollout on a core that stages many calls at once (the WebAssembly
// core): its calls go in with one copy of its tokens and one of its logprobs, are linked in one
// call, and its rows come back as the core's arrays with a report — none of the call table the
// RolloutAssembler keeps for plan.forest, media, routes and versions, which a batch never reads
// and which cost a small rollout more than its linking. Whatever this path does not take as it
// is (an agent not listed, an id used twice, a call the core refuses, no call to train) comes back
// null, and plan()'s own path plans the rollout: so every report and row, rejections word for
// word, is plan()'s (test/plan/plan-batch.test.ts holds the two together).
import { stagedFindings } from "./assembler.js";
import { countLinkedTokens, countRows, type TokenCounts } from "./make-plan.js";
import { emptyReport } from "./report.js";
import { writeStagedCall } from "./staged-calls.js";
import { isRecord } from "./validate.js";
import { STAGED_RESULT_INTS, type CoreRow, type ForestCore, type SizeHints } from "../core/types.js";
import type { BuilderHeader, Diagnostic, PrefixBreak, Report, RolloutBatch } from "../types.js";

/** A planned rollout's report and rows (the core's arrays: valid until the core is released). */
export interface PlainPlan {
  report: Report;
  rows: readonly CoreRow[];
}

/** A batch rollout's header, as far as planPlainCalls reads it. */
export interface PlainHeader {
  rolloutId: string;
  /** The listed agents' ids in order, or null when the rollout lists none. */
  agents: string[] | null;
  /** Each listed agent's parent, as an index into `agents` (-1: none). */
  parents: Int32Array;
}

/** More listed agents than this go to plan()'s path (a list this path searches, not a Map). */
const MOST_AGENTS = 64;
const NO_PARENTS = new Int32Array(0);

/**
 * The header when it is well formed by checkHeader's rules, else null (plan()'s path then words
 * the rejection). The agents are checked and indexed with a scan of a short list: for a small
 * rollout, a Map and an object an agent cost more than the check.
 */
export function plainHeader(header: BuilderHeader): PlainHeader | null {
  const { rollout_id: rolloutId, reward, group_id: group, agents } = header;
  if (typeof rolloutId !== "string" || rolloutId === "") return null;
  if (typeof reward !== "number" || !Number.isFinite(reward)) return null;
  if (group !== undefined && group !== null && typeof group !== "string") return null;
  if (agents === undefined) return { rolloutId, agents: null, parents: NO_PARENTS };
  if (!Array.isArray(agents) || agents.length > MOST_AGENTS) return null;
  const ids: string[] = [];
  for (const agent of agents as unknown[]) {
    if (!isRecord(agent)) return null;
    const { id, parent, mode } = agent;
    if (typeof id !== "string" || ids.includes(id)) return null;
    if (parent !== null && parent !== undefined && typeof parent !== "string") return null;
    if (mode !== undefined && typeof mode !== "string") return null;
    ids.push(id);
  }
  const parents = new Int32Array(ids.length);
  for (let i = 0; i < ids.length; i++) {
    const parent = (agents[i] as { parent?: string | null }).parent;
    parents[i] = parent === null || parent === undefined ? -1 : ids.indexOf(parent);
    if (parents[i] < 0 && parent !== null && parent !== undefined) return null; // not a listed agent
  }
  return { rolloutId, agents: ids, parents };
}

/**
 * Calls [first, end) of the batch, one rollout, planned on `core` (begun here; the caller
 * releases it), or null for plan()'s path to plan it. `header` is the rollout's, checked.
 */
export function planPlainCalls(
  core: ForestCore,
  batch: RolloutBatch,
  logprobStarts: Int32Array,
  header: PlainHeader,
  hints: SizeHints,
  first: number,
  end: number,
): PlainPlan | null {
  const { tokenStarts, promptLengths, callIds, callAgents, kept } = batch;
  const count = end - first;
  // Without a list, agent names get indices on first sight (as RolloutAssembler's agentFor).
  const names = header.agents ?? [];
  core.begin(header.parents, hints);
  const staged = core.stageCalls!(
    count,
    tokenStarts[end] - tokenStarts[first],
    logprobStarts[end] - logprobStarts[first],
  );
  for (let c = first; c < end; c++) {
    const name = callAgents?.[c] ?? "";
    let agent = names.indexOf(name);
    if (agent < 0) {
      if (header.agents !== null || names.length === MOST_AGENTS) return null;
      agent = names.push(name) - 1;
    }
    const generation = tokenStarts[c + 1] - tokenStarts[c] - promptLengths[c];
    writeStagedCall(staged.table, c - first, promptLengths[c], generation, agent, kept?.[c] !== 0);
  }
  staged.tokens.set(batch.tokens.subarray(tokenStarts[first], tokenStarts[end]));
  staged.logprobs.set(batch.logprobs.subarray(logprobStarts[first], logprobStarts[end]));
  const { failed, results } = core.commitStaged!(count);
  if (failed >= 0) return null;

  if (hasDuplicate(callIds, first, end)) return null;
  // What RolloutAssembler.record keeps of each call, as far as the report reads it.
  const counts: TokenCounts = { eligible: [], promptLengths: [], generationLengths: [] };
  const diagnostics: Diagnostic[] = [];
  for (let c = first; c < end; c++) {
    const id = callIds[c];
    const k = c - first;
    const prompt = promptLengths[c];
    const generation = tokenStarts[c + 1] - tokenStarts[c] - prompt;
    counts.promptLengths.push(prompt);
    counts.generationLengths.push(generation);
    if (kept?.[c] === 0) continue;
    if (generation === 0) {
      diagnostics.push({ code: "empty_generation", call: id });
      continue;
    }
    counts.eligible.push(k);
    const broken = stagedFindings(results, STAGED_RESULT_INTS * k).broken;
    if (broken !== null) {
      const { near, at, expected, found } = broken;
      const nearId = callIds[first + counts.eligible[near]];
      diagnostics.push({ code: "prefix_break", call: id, near: nearId, at, expected, found } as PrefixBreak);
    }
  }
  if (counts.eligible.length === 0) return null; // no_trainable_calls: plan()'s words

  const forest = core.finish();
  const report = emptyReport(header.rolloutId, count);
  report.diagnostics = diagnostics;
  report.eligible = counts.eligible.length;
  countLinkedTokens(counts, forest, report);
  countRows(counts, forest, report);
  report.leaves = forest.rows.length;
  report.rows = forest.rows.length;
  return { report, rows: forest.rows };
}

/** Whether two of ids[first, end) are equal: pairwise for a small rollout (cheaper than a Set). */
function hasDuplicate(ids: readonly string[], first: number, end: number): boolean {
  if (end - first > 32) return new Set(ids.slice(first, end)).size < end - first;
  for (let c = first + 1; c < end; c++) {
    const id = ids[c];
    for (let d = first; d < c; d++) if (ids[d] === id) return true;
  }
  return false;
}
