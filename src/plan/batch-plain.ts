// planBatch()'s path for a rollout on a core that stages many calls at once (the WebAssembly
// core): its calls go in with one copy of its tokens and one of its logprobs, are linked in one
// call, and its rows come back as the core's arrays with a report — none of the call table the
// RolloutAssembler keeps for plan.forest, media, routes and versions, which a batch never reads
// and which cost a small rollout more than its linking. Whatever this path does not take as it
// is (an agent not listed, an id used twice, a call the core refuses, no call to train) comes back
// null, and plan()'s own path plans the rollout: so every report and row, rejections word for
// word, is plan()'s (test/plan/plan-batch.test.ts holds the two together).
import { agentParents, stagedFindings } from "./assembler.js";
import { countLinkedTokens, countRows, type TokenCounts } from "./make-plan.js";
import { emptyReport } from "./report.js";
import { writeStagedCall } from "./staged-calls.js";
import type { RolloutHeader } from "./validate.js";
import { STAGED_RESULT_INTS, type CoreRow, type ForestCore, type SizeHints } from "../core/types.js";
import type { Diagnostic, PrefixBreak, Report, RolloutBatch } from "../types.js";

/** A planned rollout's report and rows (the core's arrays: valid until the core is released). */
export interface PlainPlan {
  report: Report;
  rows: readonly CoreRow[];
}

/**
 * Calls [first, end) of the batch, one rollout, planned on `core` (begun here; the caller
 * releases it), or null for plan()'s path to plan it. `header` is the rollout's, checked.
 */
export function planPlainCalls(
  core: ForestCore,
  batch: RolloutBatch,
  logprobStarts: Int32Array,
  header: RolloutHeader,
  hints: SizeHints,
  first: number,
  end: number,
): PlainPlan | null {
  const { tokenStarts, promptLengths, callIds, callAgents, kept } = batch;
  const count = end - first;
  // Without a list, agent names get indices on first sight (as RolloutAssembler's agentFor).
  const agentIndex = header.agentIndex ?? new Map<string, number>();
  core.begin(agentParents(header), hints);
  const staged = core.stageCalls!(
    count,
    tokenStarts[end] - tokenStarts[first],
    logprobStarts[end] - logprobStarts[first],
  );
  for (let c = first; c < end; c++) {
    const name = callAgents?.[c] ?? "";
    let agent = agentIndex.get(name);
    if (agent === undefined) {
      if (header.agents !== null) return null;
      agent = agentIndex.size;
      agentIndex.set(name, agent);
    }
    const generation = tokenStarts[c + 1] - tokenStarts[c] - promptLengths[c];
    writeStagedCall(staged.table, c - first, promptLengths[c], generation, agent, kept?.[c] !== 0);
  }
  staged.tokens.set(batch.tokens.subarray(tokenStarts[first], tokenStarts[end]));
  staged.logprobs.set(batch.logprobs.subarray(logprobStarts[first], logprobStarts[end]));
  const { failed, results } = core.commitStaged!(count);
  if (failed >= 0) return null;

  // What RolloutAssembler.record keeps of each call, as far as the report reads it.
  const seen = new Set<string>();
  const counts: TokenCounts = { eligible: [], promptLengths: [], generationLengths: [] };
  const diagnostics: Diagnostic[] = [];
  for (let c = first; c < end; c++) {
    const id = callIds[c];
    if (seen.has(id)) return null;
    seen.add(id);
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
