// The plain-JS peer of the small-rollout bench (issue 40): what a competent engineer would write in
// an afternoon to turn a canonical rollout into SPEC's rows, with no WebAssembly, no staging and no
// report. It links each eligible call to the longest earlier eligible call whose full sequence its
// prompt starts with (twins: SPEC's agent, then parent-agent rule), gives each call to the row SPEC's
// ownership walk reaches, and builds one row per leaf: full(leaf), the path's logprobs, and a loss
// mask that trains each sampled token once. It checks nothing (token values, logprob values, ids),
// ignores media and routed experts, and stops at no prefix breaks: a floor under what plan() does,
// never a strawman. test/bench/plain-js.test.ts holds its rows to plan()'s.
import type { Rollout, TokenIds } from "../src/types.js";

export interface PlainRow {
  leaf: string;
  tokenIds: Int32Array;
  logprobs: Float32Array;
  lossMask: Uint8Array;
}

/** Whether full(p) = prompt ++ generation is a prefix of `into` (the later call's prompt). */
function isPrefix(prompt: TokenIds, generation: TokenIds, into: TokenIds): boolean {
  const p = prompt.length;
  const g = generation.length;
  if (p + g > into.length) return false;
  // The last token first: most non-parents part from a call's history before its end.
  if (generation[g - 1] !== into[p + g - 1]) return false;
  for (let i = 0; i < p; i++) if (prompt[i] !== into[i]) return false;
  for (let i = 0; i < g - 1; i++) if (generation[i] !== into[p + i]) return false;
  return true;
}

/** SPEC's rows of a rollout (accepted ones; an ambiguous parent throws). */
export function planPlain(rollout: Rollout): PlainRow[] {
  const calls = rollout.calls.filter((c) => c.kept !== false && c.generation_token_ids.length > 0);
  const n = calls.length;
  const agentOf = calls.map((c) => c.agent ?? "");
  const full = calls.map((c) => c.prompt_token_ids.length + c.generation_token_ids.length);
  const parent = new Int32Array(n).fill(-1);
  const children: number[][] = calls.map(() => []);
  // Earlier eligible calls, longest full sequence first: the first match is the longest.
  const byLength: number[] = [];
  for (let c = 0; c < n; c++) {
    const prompt = calls[c].prompt_token_ids;
    const found: number[] = [];
    for (const p of byLength) {
      if (found.length > 0 && full[p] < full[found[0]]) break;
      if (isPrefix(calls[p].prompt_token_ids, calls[p].generation_token_ids, prompt)) found.push(p);
    }
    if (found.length > 0) {
      const p = found.length === 1 ? found[0] : breakTie(found, agentOf, agentOf[c], rollout);
      parent[c] = p;
      children[p].push(c);
    }
    let at = byLength.length;
    while (at > 0 && full[byLength[at - 1]] < full[c]) at--;
    byLength.splice(at, 0, c);
  }
  // SPEC's ownership walk, bottom-up: children come later in ledger order.
  const owner = new Int32Array(n);
  for (let c = n - 1; c >= 0; c--) {
    const kids = children[c];
    if (kids.length === 0) owner[c] = c;
    else owner[c] = owner[kids.find((k) => agentOf[k] === agentOf[c]) ?? kids[0]];
  }
  const rows: PlainRow[] = [];
  for (let leaf = 0; leaf < n; leaf++) {
    if (children[leaf].length > 0) continue;
    const length = full[leaf];
    const tokenIds = new Int32Array(length);
    const logprobs = new Float32Array(length);
    const lossMask = new Uint8Array((length + 7) >> 3);
    const call = calls[leaf];
    tokenIds.set(call.prompt_token_ids);
    tokenIds.set(call.generation_token_ids, call.prompt_token_ids.length);
    for (let x = leaf; x >= 0; x = parent[x]) {
      const from = calls[x].prompt_token_ids.length;
      logprobs.set(calls[x].generation_log_probs as ArrayLike<number>, from);
      if (owner[x] !== leaf) continue;
      for (let i = from; i < full[x]; i++) lossMask[i >> 3] |= 1 << (i & 7);
    }
    rows.push({ leaf: call.id, tokenIds, logprobs, lossMask });
  }
  return rows;
}

/** SPEC's tie among candidates with identical full sequences: same agent, else the parent agent. */
function breakTie(found: number[], agentOf: string[], agent: string, rollout: Rollout): number {
  const same = found.filter((p) => agentOf[p] === agent);
  if (same.length === 1) return same[0];
  if (same.length === 0) {
    const parentAgent = rollout.agents?.find((a) => a.id === agent)?.parent ?? null;
    const up = parentAgent === null ? [] : found.filter((p) => agentOf[p] === parentAgent);
    if (up.length === 1) return up[0];
  }
  throw new Error(`${rollout.rollout_id}: ambiguous_parent`);
}
