// The summary `explain` prints after an input's calls: breaks by cause and what they cost, in the
// tokens a trainer computes: packed (the token trie) and rows (docs/breaks.md, "What a break costs").
import type { Cause } from "./cause.js";
import type { Analysis } from "./analyze.js";

export interface ExplainSummary {
  kind: "summary";
  input: string;
  rollouts: number;
  /** Rollouts the planner rejected (not explained). */
  rejected: number;
  /** Explained calls, and how many of them SPEC's prefix_break flags. */
  explained: number;
  prefix_breaks: number;
  causes: Partial<Record<Cause, number>>;
  /** Trees, as sent and as a token-in/token-out harness would have sent them. */
  trees: number;
  tito_trees: number;
  /** The token trie's tokens (what a trainer with tree attention computes), both ways. */
  trie_tokens: number;
  tito_trie_tokens: number;
  /** trie_tokens − tito_trie_tokens. */
  trie_cost: number;
  /** The rows' tokens (what a trainer on rows computes), both ways. */
  row_tokens: number;
  tito_row_tokens: number;
  /** row_tokens − tito_row_tokens. */
  row_cost: number;
  /** Tokens of the near calls' sequences the relinked calls did not resend: token-in/token-out resends them. */
  dropped_tokens: number;
}

export function emptySummary(input: string): ExplainSummary {
  return {
    kind: "summary",
    input,
    rollouts: 0,
    rejected: 0,
    explained: 0,
    prefix_breaks: 0,
    causes: {},
    trees: 0,
    tito_trees: 0,
    trie_tokens: 0,
    tito_trie_tokens: 0,
    trie_cost: 0,
    row_tokens: 0,
    tito_row_tokens: 0,
    row_cost: 0,
    dropped_tokens: 0,
  };
}

/** Adds one planned rollout's explained calls and what it costs both ways. */
export function addRollout(summary: ExplainSummary, analysis: Analysis): void {
  summary.rollouts++;
  summary.explained += analysis.explained.length;
  for (const call of analysis.explained) {
    if (call.kind === "prefix_break") summary.prefix_breaks++;
    summary.causes[call.cause] = (summary.causes[call.cause] ?? 0) + 1;
  }
  const { sent, tito } = analysis;
  summary.trees += sent.trees;
  summary.tito_trees += tito.trees;
  summary.trie_tokens += sent.trie_tokens;
  summary.tito_trie_tokens += tito.trie_tokens;
  summary.trie_cost = summary.trie_tokens - summary.tito_trie_tokens;
  summary.row_tokens += sent.row_tokens;
  summary.tito_row_tokens += tito.row_tokens;
  summary.row_cost = summary.row_tokens - summary.tito_row_tokens;
  summary.dropped_tokens += analysis.dropped;
}

/** The summary as one line of text. */
export function summaryLine(summary: ExplainSummary): string {
  const causes = Object.entries(summary.causes)
    .map(([cause, count]) => `${cause} ${count}`)
    .join(", ");
  const rejected = summary.rejected > 0 ? `, ${summary.rejected} rejected` : "";
  // A negative cost has one reason (docs/breaks.md): the longer sequences of token-in/token-out.
  const negative = (cost: number) =>
    cost < 0 ? `; negative: token-in/token-out resends ${summary.dropped_tokens} tokens the calls dropped` : "";
  return (
    `${summary.input}: ${summary.rollouts} rollout${summary.rollouts === 1 ? "" : "s"}${rejected}, ` +
    `${summary.explained} call${summary.explained === 1 ? "" : "s"} explained ` +
    `(${summary.prefix_breaks} prefix_break)${causes ? `: ${causes}` : ""}; ` +
    `cost ${summary.trie_cost} trie tokens (${summary.trie_tokens} as sent, ` +
    `${summary.tito_trie_tokens} token-in/token-out${negative(summary.trie_cost)}), ` +
    `${summary.row_cost} row tokens (${summary.row_tokens} as sent, ` +
    `${summary.tito_row_tokens} token-in/token-out${negative(summary.row_cost)}); ` +
    `${summary.trees} tree${summary.trees === 1 ? "" : "s"} as sent, ${summary.tito_trees} token-in/token-out`
  );
}
