// The selected call, in words: where it is in the forest, its lengths, its logprobs, its media,
// the diagnostics about it and, with a tokenizer, what it added to its prompt and what it
// generated as text.
import type { ForestCall, Plan } from "../src/browser.js";
import { mediaNamer } from "../src/draw/index.js";
import type { TokenDecoder } from "../src/tokenizer/decoder.js";

function pair(list: HTMLElement, term: string, value: string, key: string): void {
  const dt = document.createElement("dt");
  dt.textContent = term;
  const dd = document.createElement("dd");
  dd.textContent = value;
  dd.dataset.key = key;
  list.append(dt, dd);
}

/** A row that holds the call (its owner row): its tokens start with the call's full sequence. */
function rowOf(plan: Plan, call: ForestCall) {
  return call.ownerRow >= 0 ? plan.rows[call.ownerRow] : undefined;
}

export function renderDetails(host: HTMLElement, plan: Plan, index: number, decoder: TokenDecoder | null): void {
  host.replaceChildren();
  const call = plan.forest[index];
  if (call === undefined) return;
  const byId = new Map(plan.forest.map((c) => [c.id, c]));
  const title = document.createElement("h3");
  title.textContent = `call ${call.id}`;
  const list = document.createElement("dl");
  list.className = "details";
  pair(list, "agent", call.agent === "" ? "(no agent)" : call.agent, "agent");
  pair(list, "position", `calls[${call.index}]`, "index");
  pair(list, "tokens", `${call.promptLength} prompt + ${call.generationLength} generated`, "lengths");
  const status = !call.kept
    ? "not kept (a retry)"
    : !call.eligible
      ? "empty generation: no row"
      : call.root
        ? "root"
        : `continues ${call.parent}`;
  pair(list, "link", status, "link");
  if (call.eligible) {
    pair(list, "children", call.children.join(" ") || "–", "children");
    pair(list, "trained in", `row ${call.ownerRow}${call.leaf ? " (its leaf)" : ""}`, "owner");
    const rows = plan.rows.filter((r) => r.calls.includes(call.id)).map((r) => r.index);
    pair(list, "in rows", rows.join(" "), "rows");
  }
  const row = rowOf(plan, call);
  if (row !== undefined && call.generationLength > 0) {
    let min = Infinity;
    let max = -Infinity;
    let sum = 0;
    for (let i = call.promptLength; i < call.promptLength + call.generationLength; i++) {
      const lp = row.logprobs[i];
      min = Math.min(min, lp);
      max = Math.max(max, lp);
      sum += lp;
    }
    const mean = sum / call.generationLength;
    pair(
      list,
      "logprobs",
      `sum ${sum.toFixed(3)} · mean ${mean.toFixed(3)} (p ${Math.exp(mean).toFixed(3)}) · ` +
        `min ${min.toFixed(3)} · max ${max.toFixed(3)}`,
      "logprobs",
    );
  }
  if (call.media.length > 0) {
    const name = mediaNamer(plan.forest);
    pair(list, "media", call.media.map((m) => `${name(m.id)} at ${m.offset}+${m.length}`).join(", "), "media");
  }
  if (call.mediaMismatch)
    pair(list, "media cut", "its media differ from the earlier call whose tokens it extends", "media-cut");
  const notes = plan.report.diagnostics.filter((d) => d.call === call.id);
  if (notes.length > 0)
    pair(
      list,
      "diagnostics",
      notes.map((d) => `${d.code}${d.detail ? `: ${d.detail}` : ""}`).join("; "),
      "diagnostics",
    );
  host.append(title, list);
  if (decoder !== null && row !== undefined) {
    const parent = call.parent === null ? undefined : byId.get(call.parent);
    const from = parent === undefined ? 0 : parent.promptLength + parent.generationLength;
    const added = row.tokenIds.subarray(from, call.promptLength);
    const generated = row.tokenIds.subarray(call.promptLength, call.promptLength + call.generationLength);
    for (const [label, ids, key] of [
      [parent === undefined ? "prompt" : `prompt added to ${parent.id}`, added, "prompt-text"],
      ["generated", generated, "generated-text"],
    ] as const) {
      const head = document.createElement("h4");
      head.textContent = `${label} (${ids.length} tokens, ${decoder.name})`;
      const pre = document.createElement("pre");
      pre.className = "decoded";
      pre.dataset.key = key;
      pre.textContent = decoder.decode(ids);
      host.append(head, pre);
    }
  }
}
