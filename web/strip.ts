// A row's tokens as a strip: each token with its id and logprob; generated tokens of trained
// calls highlighted (loss mask 1), generated tokens of context calls dim, prompt tokens plain.
// A call's span starts with a small tag naming the call. A media item's placeholder tokens (the
// row's media occurrences) are outlined, after a tag with the item's short id (whole in its title).
// With a tokenizer, each token shows its text (special tokens as such), and a run of placeholder
// tokens (a media item's, or one special token repeated) is one image chip.
import { formatFloat32, maskBit, type ForestCall, type Row } from "../src/browser.js";
import { mediaNamer } from "../src/draw/index.js";
import { visible, type TokenDecoder } from "../src/tokenizer/decoder.js";

/** A special token repeated at least this many times is a placeholder run (an image's pads). */
const RUN_MIN = 4;

/**
 * Where placeholder runs start and how long they are (decoded mode): media occurrences, and
 * repeated special tokens.
 */
function placeholderRuns(
  row: Row,
  decoder: TokenDecoder,
  limit: number,
): Map<number, { length: number; media: number }> {
  const runs = new Map<number, { length: number; media: number }>();
  row.media.forEach((item, m) => runs.set(item.offset, { length: item.length, media: m }));
  const covered = new Uint8Array(row.numTokens);
  for (const item of row.media) covered.fill(1, item.offset, item.offset + item.length);
  for (let i = 0; i < Math.min(row.numTokens, limit); ) {
    let j = i + 1;
    if (!covered[i] && decoder.piece(row.tokenIds[i]).special)
      while (j < row.numTokens && row.tokenIds[j] === row.tokenIds[i] && !covered[j]) j++;
    if (j - i >= RUN_MIN) runs.set(i, { length: j - i, media: -1 });
    i = j;
  }
  return runs;
}

/** Tokens drawn before a "show all" button; the DOM stays quick for long rows. */
export const STRIP_LIMIT = 20_000;

export function renderStrip(
  host: HTMLElement,
  row: Row,
  forest: readonly ForestCall[],
  limit = STRIP_LIMIT,
  decoder: TokenDecoder | null = null,
): void {
  host.replaceChildren();
  const byId = new Map(forest.map((c) => [c.id, c]));
  // Which call generated each position (spans of the path's calls), -1 for prompt tokens.
  const owner = new Int32Array(row.numTokens).fill(-1);
  row.calls.forEach((id, k) => {
    const call = byId.get(id)!;
    owner.fill(k, call.promptLength, call.promptLength + call.generationLength);
  });
  // Which media occurrence each position is a placeholder of, -1 for none.
  const placeholder = new Int32Array(row.numTokens).fill(-1);
  row.media.forEach((item, m) => placeholder.fill(m, item.offset, item.offset + item.length));
  const mediaName = mediaNamer(forest);
  const trained = new Set(row.trained);
  const shown = Math.min(row.numTokens, limit);
  const fragment = document.createDocumentFragment();
  const runs = decoder === null ? null : placeholderRuns(row, decoder, shown);
  let previous = -1;
  for (let i = 0; i < shown; i++) {
    const k = owner[i];
    const run = runs?.get(i);
    if (run !== undefined) {
      // One chip for the whole run: an image is a few hundred identical pads, not text.
      const chip = document.createElement("span");
      chip.className = "image-chip";
      const item = run.media >= 0 ? row.media[run.media] : null;
      const pad = decoder!.piece(row.tokenIds[i]).text;
      chip.textContent = item !== null ? `▣ ${mediaName(item.id)} · ${run.length} tokens` : `▣ ${pad} ×${run.length}`;
      chip.title =
        `#${i}–#${i + run.length - 1}: ${item !== null ? `media ${item.id}, ` : ""}` +
        `${run.length} placeholder tokens (${pad}${run.length > 1 ? " …" : ""})`;
      chip.dataset.start = String(i);
      chip.dataset.length = String(run.length);
      if (item !== null) chip.dataset.media = String(run.media);
      fragment.append(chip);
      previous = owner[i + run.length - 1];
      i += run.length - 1;
      continue;
    }
    if (k !== previous && k >= 0) {
      const tag = document.createElement("span");
      tag.className = `call-tag ${trained.has(row.calls[k]) ? "trained" : "context"}`;
      tag.textContent = row.calls[k];
      fragment.append(tag);
    }
    previous = k;
    const m = placeholder[i];
    const item = m >= 0 ? row.media[m] : null;
    if (item !== null && i === item.offset) {
      const tag = document.createElement("span");
      tag.className = "media-tag";
      tag.dataset.media = String(m);
      tag.textContent = mediaName(item.id);
      tag.title = `media ${item.id} · ${item.length} placeholder tokens from #${item.offset}`;
      fragment.append(tag);
    }
    const cell = document.createElement("span");
    const bit = maskBit(row.lossMask, i);
    const kind = k < 0 ? "prompt" : bit === 1 ? "trained" : "context";
    cell.className = item === null ? `tok ${kind}` : `tok ${kind} media`;
    if (item !== null) cell.dataset.media = String(m);
    cell.dataset.mask = String(bit);
    const id = document.createElement("b");
    if (decoder === null) id.textContent = String(row.tokenIds[i]);
    else {
      const piece = decoder.piece(row.tokenIds[i]);
      id.textContent = visible(piece.text);
      cell.dataset.text = piece.text;
      if (piece.special) cell.classList.add("special");
      if (!piece.known) cell.classList.add("unknown");
    }
    cell.append(id);
    if (k >= 0) {
      const lp = row.logprobs[i];
      const prob = document.createElement("i");
      prob.textContent = lp.toFixed(2);
      cell.append(prob);
      // Confidence as bar height: exp(logprob) in [0, 1].
      cell.style.setProperty("--p", Math.exp(lp).toFixed(3));
      cell.title =
        `#${i} token ${row.tokenIds[i]} · ${row.calls[k]} · logprob ${formatFloat32(lp)} · ` + `loss mask ${bit}`;
    } else {
      cell.title = `#${i} token ${row.tokenIds[i]} · prompt · loss mask 0`;
    }
    if (item !== null) cell.title += ` · media ${item.id}, placeholder ${i - item.offset + 1} of ${item.length}`;
    fragment.append(cell);
  }
  host.append(fragment);
  if (shown < row.numTokens) {
    const more = document.createElement("button");
    more.type = "button";
    more.textContent = `show all ${row.numTokens} tokens (${row.numTokens - shown} more)`;
    more.addEventListener("click", () => renderStrip(host, row, forest, Infinity, decoder));
    host.append(more);
  }
}
