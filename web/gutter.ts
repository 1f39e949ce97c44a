// The lane labels as HTML beside the picture, sticky at its left edge, so a scrolled or zoomed
// view always names its lanes; each carries the button that collapses (▾) or expands (▸) the lane
// with its subagents.
import { clipMiddle, collapsedLabel, type Layout } from "../src/draw/index.js";

/** Characters of a label in the gutter (the layout's gutter width, less the button). */
function labelChars(l: Layout): number {
  return Math.max(6, Math.floor((l.gutter - 10) / 7));
}

export function renderGutter(host: HTMLElement, l: Layout): void {
  host.style.width = `${l.left - 4}px`;
  const chars = labelChars(l);
  const fragment = document.createDocumentFragment();
  for (const lane of l.lanes) {
    const tag = document.createElement("div");
    tag.className = lane.collapsed ? "lane-tag collapsed" : "lane-tag";
    tag.style.top = `${lane.y}px`;
    tag.style.height = `${lane.height}px`;
    tag.style.borderLeftColor = lane.colour;
    tag.style.paddingLeft = `${Math.min(lane.depth, 6) * 6 + 4}px`;
    tag.dataset.lane = lane.agent;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "lane-toggle";
    button.dataset.agent = lane.agent;
    button.textContent = lane.collapsed ? "▸" : "▾";
    button.setAttribute("aria-expanded", String(!lane.collapsed));
    const what = lane.subagents > 0 ? ` and its ${lane.subagents} subagent${lane.subagents === 1 ? "" : "s"}` : "";
    button.title = `${lane.collapsed ? "expand" : "collapse"} ${lane.name}'s lane${what}`;
    const label = document.createElement("span");
    label.textContent = lane.collapsed ? collapsedLabel(lane, chars) : clipMiddle(lane.label, chars);
    label.title = lane.label;
    tag.append(button, label);
    fragment.append(tag);
  }
  host.replaceChildren(fragment);
}
