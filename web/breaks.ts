// The rollout's prefix breaks (SPEC's prefix_break): a list, and for the selected one the two token
// strips side by side at `at` — the near parent's full sequence and the call's prompt — decoded
// with the page's tokenizer, and the cause (src/explain/cause.ts, as `callforest explain` names it).
import type { Diagnostic, Plan } from "../src/browser.js";
import { classify, type CauseResult } from "../src/explain/cause.js";
import { visible, type TokenDecoder } from "../src/tokenizer/decoder.js";

/** Tokens shown before `at` (shared by both sides) and after it (where they differ). */
const BEFORE = 12;
const AFTER = 24;

export interface BreakView {
  call: string;
  near: string;
  at: number;
  /** full(near) and prompt(call), read off the rows that hold them. */
  expected: Int32Array;
  found: Int32Array;
  promptLength: number;
}

/** The prefix_break diagnostics of a plan's report, in ledger order. */
export function breaksOf(plan: Plan): Diagnostic[] {
  return plan.report.diagnostics.filter((d) => d.code === "prefix_break");
}

/** A row holds a call's full sequence as its prefix: the call's owner row does. */
function fullOf(plan: Plan, id: string): Int32Array | null {
  const call = plan.forest.find((c) => c.id === id);
  const row = call === undefined || call.ownerRow < 0 ? undefined : plan.rows[call.ownerRow];
  return row === undefined ? null : row.tokenIds.subarray(0, call!.promptLength + call!.generationLength);
}

/** The two sequences of a break (null when a call is not in the plan's rows: never for SPEC's). */
export function breakView(plan: Plan, d: Diagnostic): BreakView | null {
  const near = plan.forest.find((c) => c.id === d.near);
  const call = plan.forest.find((c) => c.id === d.call);
  const nearFull = d.near === undefined ? null : fullOf(plan, d.near);
  const callFull = d.call === null ? null : fullOf(plan, d.call);
  if (near === undefined || call === undefined || nearFull === null || callFull === null || d.at === undefined)
    return null;
  return {
    call: call.id,
    near: near.id,
    at: d.at,
    expected: nearFull,
    found: callFull.subarray(0, call.promptLength),
    promptLength: near.promptLength,
  };
}

/** The break's cause, with what the page's tokenizer gives (nothing: positions and ids only). */
export function causeOf(view: BreakView, decoder: TokenDecoder | null): CauseResult {
  const options =
    decoder === null
      ? {}
      : {
          decode: (ids: readonly number[]) => decoder.decode(ids),
          isSpecial: (id: number) => decoder.piece(id).special,
        };
  return classify({ full: view.expected, promptLength: view.promptLength }, view.found, view.at, options);
}

/** The list of breaks; `select(i)` is called with a break's index when it is picked. */
export function renderBreaksList(
  host: HTMLElement,
  breaks: readonly Diagnostic[],
  selected: number,
  select: (index: number) => void,
): void {
  host.replaceChildren();
  breaks.forEach((d, i) => {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = `${d.call} near ${d.near} at ${d.at}`;
    button.title = `${d.call} resent ${d.near}'s prompt and parts from its generation at token ${d.at}`;
    button.dataset.call = d.call ?? "";
    button.dataset.index = String(i);
    if (i === selected) item.classList.add("selected");
    button.addEventListener("click", () => select(i));
    item.append(button);
    host.append(item);
  });
}

/** One side's strip: tokens [from, to) of `tokens`, those from `at` on marked as parted. */
function strip(tokens: Int32Array, from: number, at: number, decoder: TokenDecoder | null): HTMLElement {
  const host = document.createElement("div");
  host.className = "break-strip";
  const to = Math.min(tokens.length, at + AFTER);
  for (let i = from; i < to; i++) {
    const cell = document.createElement("span");
    cell.className = i < at ? "tok prompt" : "tok parted";
    if (i === at) cell.classList.add("break-at");
    const id = tokens[i];
    const label = document.createElement("b");
    if (decoder === null) label.textContent = String(id);
    else {
      const piece = decoder.piece(id);
      label.textContent = visible(piece.text);
      cell.dataset.text = piece.text;
      if (piece.special) cell.classList.add("special");
      if (!piece.known) cell.classList.add("unknown");
    }
    cell.dataset.index = String(i);
    cell.dataset.id = String(id);
    cell.title = `#${i} token ${id}`;
    cell.append(label);
    host.append(cell);
  }
  if (to < tokens.length) {
    const more = document.createElement("span");
    more.className = "break-more";
    more.textContent = `… ${tokens.length - to} more`;
    host.append(more);
  }
  return host;
}

/** The selected break: what each side holds from `at`, side by side, and the cause. */
export function renderBreak(host: HTMLElement, view: BreakView, decoder: TokenDecoder | null): void {
  host.replaceChildren();
  const from = Math.max(0, view.at - BEFORE);
  const { cause, also, unknown } = causeOf(view, decoder);
  const head = document.createElement("p");
  head.className = "break-cause";
  const name = document.createElement("b");
  name.textContent = cause;
  name.dataset.cause = cause;
  head.append(
    `${view.call} resent ${view.near}'s prompt (${view.promptLength} tokens) and parts from its generation at token ${view.at}. Cause: `,
    name,
  );
  // A compound break: what else the template changed in that generation, in order.
  if (also !== undefined) head.append(`, then ${also.join(", ")}`);
  if (unknown !== undefined) head.append(` (${unknown})`);
  const sides = document.createElement("div");
  sides.className = "break-sides";
  for (const [title, tokens, side] of [
    [`${view.near}: its sequence (expected)`, view.expected, "expected"],
    [`${view.call}: its prompt (found)`, view.found, "found"],
  ] as const) {
    const column = document.createElement("div");
    column.className = "break-side";
    column.dataset.side = side;
    const label = document.createElement("h4");
    label.textContent = `${title}, from token ${from}`;
    column.append(label, strip(tokens, from, view.at, decoder));
    if (decoder !== null) {
      const text = document.createElement("pre");
      text.className = "break-text";
      text.textContent = visible(decoder.decode(Array.from(tokens.subarray(view.at, view.at + AFTER))));
      column.append(text);
    }
    sides.append(column);
  }
  host.append(head, sides);
}
