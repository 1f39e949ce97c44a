// The summary `explain` prints after an input's calls: breaks by cause and what they cost.
import type { Cause } from "./cause.js";
import type { Explained } from "./analyze.js";

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
  /** Trees and row tokens as sent, and as a token-in/token-out harness would have sent them. */
  trees: number;
  tito_trees: number;
  row_tokens: number;
  tito_row_tokens: number;
  /** row_tokens − tito_row_tokens. */
  cost: number;
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
    row_tokens: 0,
    tito_row_tokens: 0,
    cost: 0,
  };
}

/** Adds one planned rollout's explained calls and row tokens (as sent, and token-in/token-out). */
export function addRollout(
  summary: ExplainSummary,
  explained: readonly Explained[],
  sent: { roots: number; row_tokens: number },
  tito: { roots: number; row_tokens: number },
): void {
  summary.rollouts++;
  summary.explained += explained.length;
  for (const call of explained) {
    if (call.kind === "prefix_break") summary.prefix_breaks++;
    summary.causes[call.cause] = (summary.causes[call.cause] ?? 0) + 1;
  }
  summary.trees += sent.roots;
  summary.tito_trees += tito.roots;
  summary.row_tokens += sent.row_tokens;
  summary.tito_row_tokens += tito.row_tokens;
  summary.cost = summary.row_tokens - summary.tito_row_tokens;
}

/** The summary as one line of text. */
export function summaryLine(summary: ExplainSummary): string {
  const causes = Object.entries(summary.causes)
    .map(([cause, count]) => `${cause} ${count}`)
    .join(", ");
  const rejected = summary.rejected > 0 ? `, ${summary.rejected} rejected` : "";
  return (
    `${summary.input}: ${summary.rollouts} rollout${summary.rollouts === 1 ? "" : "s"}${rejected}, ` +
    `${summary.explained} call${summary.explained === 1 ? "" : "s"} explained ` +
    `(${summary.prefix_breaks} prefix_break)${causes ? `: ${causes}` : ""}; ` +
    `cost ${summary.cost} row tokens (${summary.row_tokens} as sent in ${summary.trees} ` +
    `tree${summary.trees === 1 ? "" : "s"}, ` +
    `${summary.tito_row_tokens} token-in/token-out in ${summary.tito_trees})`
  );
}
