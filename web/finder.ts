// The find box: a call id, an agent id or a row ("row 12", or "#12"). An exact match wins; else
// the calls whose id contains the text, Enter stepping through them. Suggestions come from a
// datalist of every call, agent and row.
import type { ForestCall } from "../src/browser.js";

export type Found =
  | { kind: "call"; index: number }
  | { kind: "agent"; agent: string; first: number }
  | { kind: "row"; row: number };

export interface FindResult {
  found: Found | null;
  /** How many things matched, and which of them this is (1-based). */
  matches: number;
  nth: number;
}

export class Finder {
  private forest: readonly ForestCall[] = [];
  private rows = 0;
  private byId = new Map<string, number>();
  private firstOfAgent = new Map<string, number>();
  private last = { query: "", nth: 0 };

  constructor(private readonly list: HTMLDataListElement) {}

  /** What can be found: a plan's calls, agents and rows (none for a rejected rollout). */
  reset(forest: readonly ForestCall[], rows: number): void {
    this.forest = forest;
    this.rows = rows;
    this.byId = new Map(forest.map((c) => [c.id, c.index]));
    this.firstOfAgent = new Map();
    for (const call of forest) if (!this.firstOfAgent.has(call.agent)) this.firstOfAgent.set(call.agent, call.index);
    this.last = { query: "", nth: 0 };
    const fragment = document.createDocumentFragment();
    const option = (value: string, label: string) => {
      const o = document.createElement("option");
      o.value = value;
      o.label = label;
      fragment.append(o);
    };
    for (const call of forest) option(call.id, `call · ${call.agent === "" ? "(no agent)" : call.agent}`);
    for (const agent of this.firstOfAgent.keys()) if (agent !== "" && !this.byId.has(agent)) option(agent, "agent");
    for (let r = 0; r < rows; r++) option(`row ${r}`, "row");
    this.list.replaceChildren(fragment);
  }

  /** Finds `query`; asked again with the same text, the next match. */
  find(query: string): FindResult {
    const q = query.trim();
    if (q === "") return { found: null, matches: 0, nth: 0 };
    const exact = this.byId.get(q);
    if (exact !== undefined) return { found: { kind: "call", index: exact }, matches: 1, nth: 1 };
    const first = this.firstOfAgent.get(q);
    if (first !== undefined) return { found: { kind: "agent", agent: q, first }, matches: 1, nth: 1 };
    const row = /^(?:row\s*|#)(\d+)$/i.exec(q);
    if (row !== null && Number(row[1]) < this.rows)
      return { found: { kind: "row", row: Number(row[1]) }, matches: 1, nth: 1 };
    const lower = q.toLowerCase();
    const hits: number[] = [];
    for (const call of this.forest)
      if (call.id.toLowerCase().includes(lower) || call.agent.toLowerCase() === lower) hits.push(call.index);
    if (hits.length === 0) return { found: null, matches: 0, nth: 0 };
    const nth = this.last.query === q ? (this.last.nth % hits.length) + 1 : 1;
    this.last = { query: q, nth };
    return { found: { kind: "call", index: hits[nth - 1] }, matches: hits.length, nth };
  }
}
