// The report panel (a rejected rollout's reason and the call at fault) and the rows table.
import type { Fault } from "../src/draw/index.js";
import type { Plan, Report } from "../src/browser.js";

function cell(tag: "td" | "th" | "dt" | "dd" | "li", text: string, className?: string): HTMLElement {
  const el = document.createElement(tag);
  el.textContent = text;
  if (className) el.className = className;
  return el;
}

const COUNTS: (keyof Report)[] = [
  "calls",
  "eligible",
  "roots",
  "leaves",
  "rows",
  "captured_tokens",
  "trained_tokens",
  "row_tokens",
  "unique_tokens",
];

export function renderReport(host: HTMLElement, report: Report, fault: Fault | null, faultCall: unknown): void {
  host.replaceChildren();
  const title = document.createElement("h2");
  const line = report.line !== undefined ? ` (line ${report.line})` : "";
  title.textContent = `rollout ${report.rollout_id ?? "(no id)"}${line}`;
  host.append(title);
  if (report.status === "rejected") {
    const box = document.createElement("div");
    box.className = "rejected";
    box.append(cell("dt", "rejected"), cell("dd", report.reason ?? "", "reason"));
    box.append(cell("dt", "detail"), cell("dd", report.detail ?? "", "detail"));
    if (fault !== null) {
      const call = faultCall as { id?: unknown; agent?: unknown } | undefined;
      const id = fault.id ?? (typeof call?.id === "string" ? call.id : null);
      const agent = typeof call?.agent === "string" ? ` · agent ${call.agent === "" ? "(none)" : call.agent}` : "";
      box.append(
        cell("dt", "call at fault"),
        cell("dd", `calls[${fault.index}]${id !== null ? ` ${JSON.stringify(id)}` : ""}${agent}`, "fault"),
      );
      if (id !== null) (box.lastChild as HTMLElement).dataset.call = id;
    }
    host.append(box);
    return;
  }
  const list = document.createElement("dl");
  list.className = "counts";
  for (const key of COUNTS) {
    const pair = document.createElement("div");
    pair.append(cell("dt", key), cell("dd", String(report[key])));
    pair.dataset.key = key;
    list.append(pair);
  }
  host.append(list);
  if (report.diagnostics.length > 0) {
    const notes = document.createElement("ul");
    notes.className = "diagnostics";
    for (const d of report.diagnostics) {
      const call = d.call !== null ? ` · ${d.call}` : "";
      notes.append(cell("li", `${d.code}${call}${d.detail ? ` · ${d.detail}` : ""}`));
    }
    host.append(notes);
  }
}

/** One line per row; the path's calls tagged trained or context. Clicking a line selects it. */
export function renderRowsTable(host: HTMLElement, plan: Plan | null, onSelect: (row: number) => void): void {
  host.replaceChildren();
  if (plan === null) return;
  const head = document.createElement("tr");
  for (const h of ["row", "leaf", "agent", "path (root first)", "trains", "context only", "tokens"])
    head.append(cell("th", h));
  const thead = document.createElement("thead");
  thead.append(head);
  const body = document.createElement("tbody");
  for (const row of plan.rows) {
    const tr = document.createElement("tr");
    tr.dataset.row = String(row.index);
    tr.tabIndex = 0;
    const trained = new Set(row.trained);
    const path = document.createElement("td");
    path.className = "path";
    for (const id of row.calls) {
      const tag = document.createElement("span");
      tag.className = `call ${trained.has(id) ? "trained" : "context"}`;
      tag.dataset.call = id;
      tag.textContent = id;
      path.append(tag, " ");
    }
    tr.append(
      cell("td", String(row.index)),
      cell("td", row.leaf),
      cell("td", row.agent),
      path,
      cell("td", row.trained.join(" ") || "–", "trains"),
      cell("td", row.context.join(" ") || "–", "context-only"),
      cell("td", String(row.numTokens)),
    );
    tr.addEventListener("click", () => onSelect(row.index));
    tr.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") onSelect(row.index);
    });
    body.append(tr);
  }
  host.append(thead, body);
}
