// For a root, the closest earlier call: the one whose full sequence shares the longest prefix
// with its prompt (ties the latest). The rollout's trie as planned (cost.ts) gives, for each call,
// the deepest node its prompt reached; the calls whose sequences pass that node are those whose
// end lies in its subtree, so the latest of them is a range maximum over an interval numbering of
// the trie, swept in ledger order: O(nodes + calls · log nodes), never a walk of a resent prefix.
// Near parents themselves (SPEC "Prefix breaks") come from the plan.
import type { Built } from "./cost.js";
import { MaxTree, type Work } from "./token-trie.js";

/** A call's closest earlier call (index into the eligible calls) and where they part. */
export interface Parting {
  near: number;
  at: number;
}

/** For each call of `built` (ledger order), its closest earlier call, or null for the first. */
export function closestEarlier(built: Built, work: Work = { tokens: 0 }): (Parting | null)[] {
  const { first, size } = built.trie.intervals();
  const latest = new MaxTree(built.trie.size);
  const out: (Parting | null)[] = [];
  for (let c = 0; c < built.end.length; c++) {
    const node = built.reach[c]!;
    const near = latest.max(first[node]!, first[node]! + size[node]!);
    out.push(near < 0 ? null : { near, at: built.reachDepth[c]! });
    latest.set(first[built.end[c]!]!, c);
    work.tokens += 2;
  }
  return out;
}
