// A row's tokens as a strip: each token with its id and logprob; generated tokens of trained
// calls highlighted (loss mask 1), generated tokens of context calls dim, prompt tokens plain.
// A call's span starts with a small tag naming the call.
import { formatFloat32, maskBit, type ForestCall, type Row } from "../src/browser.js";

/** Tokens drawn before a "show all" button; the DOM stays quick for long rows. */
export const STRIP_LIMIT = 20_000;

export function renderStrip(host: HTMLElement, row: Row, forest: readonly ForestCall[], limit = STRIP_LIMIT): void {
  host.replaceChildren();
  const byId = new Map(forest.map((c) => [c.id, c]));
  // Which call generated each position (spans of the path's calls), -1 for prompt tokens.
  const owner = new Int32Array(row.numTokens).fill(-1);
  row.calls.forEach((id, k) => {
    const call = byId.get(id)!;
    owner.fill(k, call.promptLength, call.promptLength + call.generationLength);
  });
  const trained = new Set(row.trained);
  const shown = Math.min(row.numTokens, limit);
  const fragment = document.createDocumentFragment();
  let previous = -1;
  for (let i = 0; i < shown; i++) {
    const k = owner[i];
    if (k !== previous && k >= 0) {
      const tag = document.createElement("span");
      tag.className = `call-tag ${trained.has(row.calls[k]) ? "trained" : "context"}`;
      tag.textContent = row.calls[k];
      fragment.append(tag);
    }
    previous = k;
    const cell = document.createElement("span");
    const bit = maskBit(row.lossMask, i);
    const kind = k < 0 ? "prompt" : bit === 1 ? "trained" : "context";
    cell.className = `tok ${kind}`;
    cell.dataset.mask = String(bit);
    const id = document.createElement("b");
    id.textContent = String(row.tokenIds[i]);
    cell.append(id);
    if (k >= 0) {
      const lp = row.logprobs[i];
      const prob = document.createElement("i");
      prob.textContent = lp.toFixed(2);
      cell.append(prob);
      // Confidence as bar height: exp(logprob) in [0, 1].
      cell.style.setProperty("--p", Math.exp(lp).toFixed(3));
      cell.title = `#${i} token ${row.tokenIds[i]} · ${row.calls[k]} · logprob ${formatFloat32(lp)} · loss mask ${bit}`;
    } else {
      cell.title = `#${i} token ${row.tokenIds[i]} · prompt · loss mask 0`;
    }
    fragment.append(cell);
  }
  host.append(fragment);
  if (shown < row.numTokens) {
    const more = document.createElement("button");
    more.type = "button";
    more.textContent = `show all ${row.numTokens} tokens (${row.numTokens - shown} more)`;
    more.addEventListener("click", () => renderStrip(host, row, forest, Infinity));
    host.append(more);
  }
}
