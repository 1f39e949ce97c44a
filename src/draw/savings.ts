// What the packed layout saves over rows (SPEC "Packed trees"): tokens computed, and attention
// cost as the keys each computed token attends to. A row of n tokens costs n(n+1)/2 keys (causal);
// in a packed record token q sees k iff k ≤ q < end(segment(k)), which is exactly its row prefix,
// so it sees position_id(q) + 1 keys. The bench (bench/packed.ts) counts the same way.
import type { PackedTree, Report, Row } from "../types.js";

export interface Savings {
  /** Tokens in rows (every shared prefix repeated) and in packed trees (each token once). */
  rowTokens: number;
  packedTokens: number;
  /** Attention cost: keys attended, summed over every computed token. */
  rowKeys: number;
  packedKeys: number;
}

export interface SavingsInput {
  report: Pick<Report, "row_tokens">;
  rows: readonly Pick<Row, "numTokens">[];
  trees: readonly Pick<PackedTree, "positionIds" | "numTokens">[];
}

export function savingsOf(plan: SavingsInput): Savings {
  let rowKeys = 0;
  for (const row of plan.rows) rowKeys += (row.numTokens * (row.numTokens + 1)) / 2;
  let packedTokens = 0;
  let packedKeys = 0;
  for (const tree of plan.trees) {
    packedTokens += tree.numTokens;
    const positions = tree.positionIds;
    for (let i = 0; i < positions.length; i++) packedKeys += positions[i] + 1;
  }
  return { rowTokens: plan.report.row_tokens, packedTokens, rowKeys, packedKeys };
}

/** `a` as a multiple of `b`, two decimals ("1.58×"); "–" when `b` is 0. */
export function times(a: number, b: number): string {
  return b === 0 ? "–" : `${(a / b).toFixed(2)}×`;
}

/** A count with thousands separators (1,234,567), the same in every locale. */
export function count(n: number): string {
  return Math.round(n)
    .toString()
    .replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** One line: tokens and attention, rows against packed. */
export function savingsLine(s: Savings): string {
  return (
    `tokens: rows ${count(s.rowTokens)} → packed ${count(s.packedTokens)} ` +
    `(${times(s.rowTokens, s.packedTokens)} fewer) · ` +
    `attention (keys per token, causal): rows ${count(s.rowKeys)} → packed ${count(s.packedKeys)} ` +
    `(${times(s.rowKeys, s.packedKeys)} less)`
  );
}
