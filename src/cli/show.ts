// A plan as text for a terminal: the forest (trees with agents, parent links, roots, leaves,
// media mismatches and near parents marked, each call's media listed) and the rows table, as in SPEC's worked example.
// Every name from the data goes through oneLine: an id holding a newline or an escape sequence
// must not forge a line or drive the terminal.
import { agentLabel } from "../draw/layout.js";
import { mediaList, mediaNamer } from "../draw/media.js";
import { countOf, oneLine } from "../messages.js";
import type { AgentInfo, BinSegment, ForestCall, Plan } from "../types.js";

function callLine(call: ForestCall, agents: ReadonlyMap<string, AgentInfo>, mediaName: (id: string) => string): string {
  const marks: string[] = [];
  if (call.root) marks.push("root");
  if (call.mediaMismatch) marks.push("media mismatch");
  if (call.nearParent !== null) marks.push(`near ${oneLine(call.nearParent)} (parts at ${call.breakAt})`);
  if (call.leaf) marks.push(`leaf → row ${call.ownerRow}`);
  else marks.push(`trained in row ${call.ownerRow}`);
  const tokens = `${call.promptLength}+${call.generationLength} tokens`;
  const media = call.media.length > 0 ? `  ${oneLine(mediaList(call.media, mediaName))}` : "";
  return (
    `${oneLine(call.id)} [${oneLine(agentLabel(call.agent, agents.get(call.agent)))}] ` +
    `${tokens}  ${marks.join(", ")}${media}`
  );
}

function table(header: string[], body: string[][]): string[] {
  // A loop, not Math.max(...spread): a rollout may have more rows than a call takes arguments.
  const widths = header.map((h, i) => body.reduce((widest, r) => Math.max(widest, r[i].length), h.length));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]))
      .join("  ")
      .trimEnd();
  return [line(header), ...body.map(line)];
}

/**
 * The packed layout (SPEC "Packed trees", as its worked example tabulates tree 0): each tree's (or,
 * with a capacity, each bin's) segments, and what packing saves.
 */
function packedTables(plan: Plan): string[] {
  const out: string[] = [];
  const binned = plan.bins.length > 0;
  const records = binned ? plan.bins : plan.trees;
  for (const record of records) {
    const name = `${binned ? "bin" : "tree"} ${record.index} (roots ${oneLine(record.roots.join(" "))})`;
    out.push("", `${name}: ${countOf(record.numTokens, "token")}`);
    const body = record.segments.map((s, i) => {
      const cells = [String(i), oneLine(s.call), String(s.parent), String(s.start), String(s.length), String(s.end)];
      if (binned) {
        const { tree, trained } = s as BinSegment;
        cells.push(`${tree}`, trained ? "yes" : "context");
      }
      return cells;
    });
    const header = ["segment", "call", "parent", "start", "length", "end", ...(binned ? ["tree", "trained"] : [])];
    for (const line of table(header, body)) out.push(`  ${line}`);
  }
  const packed = records.reduce((n, r) => n + r.numTokens, 0);
  out.push(
    "",
    `packed: ${packed} tokens in ${countOf(records.length, binned ? "bin" : "tree")}, ` +
      `for ${plan.report.row_tokens} in rows`,
  );
  return out;
}

export function renderPlan(plan: Plan): string {
  const { report } = plan;
  const out: string[] = [];
  if (report.status === "rejected") {
    out.push(oneLine(`rollout ${report.rollout_id ?? "(no id)"}: rejected (${report.reason}): ${report.detail}`));
    return out.join("\n") + "\n";
  }
  out.push(
    `rollout ${oneLine(report.rollout_id ?? "")}: ${countOf(report.calls, "call")}, ${report.eligible} eligible, ` +
      `${countOf(report.roots, "tree")}, ${countOf(report.leaves, "leaf", "leaves")}, ${countOf(report.rows, "row")}`,
  );
  if (plan.agents.length > 0) {
    const list = plan.agents.map((a) => `${a.id}${a.mode ? ` (${a.mode})` : ""}${a.parent ? ` ← ${a.parent}` : ""}`);
    out.push(oneLine(`agents: ${list.join(", ")}`));
  }
  out.push("", "forest");
  const agents = new Map(plan.agents.map((a) => [a.id, a]));
  const byId = new Map(plan.forest.map((c) => [c.id, c]));
  const mediaName = mediaNamer(plan.forest);
  // Depth first with an explicit stack: a chain of thousands of calls must not overflow the call stack.
  const walk = (root: ForestCall) => {
    const stack: [ForestCall, string, boolean, boolean][] = [[root, "", true, true]];
    while (stack.length > 0) {
      const [call, prefix, last, top] = stack.pop()!;
      const branch = top ? "" : last ? "└─ " : "├─ ";
      out.push(`  ${prefix}${branch}${callLine(call, agents, mediaName)}`);
      const childPrefix = top ? prefix : prefix + (last ? "   " : "│  ");
      for (let i = call.children.length - 1; i >= 0; i--) {
        stack.push([byId.get(call.children[i])!, childPrefix, i === call.children.length - 1, false]);
      }
    }
  };
  for (const call of plan.forest) if (call.root) walk(call);
  const unlinked = plan.forest.filter((c) => !c.eligible);
  if (unlinked.length > 0) {
    const why = (c: ForestCall) => (c.kept ? "empty generation" : "not kept");
    out.push(`  not linked: ${unlinked.map((c) => `${oneLine(c.id)} (${why(c)})`).join(", ")}`);
  }
  const mismatched = plan.forest.filter((c) => c.mediaMismatch);
  if (mismatched.length > 0) {
    // Said once, not on every marked call: what the mark means and what it did.
    const list = oneLine(mismatched.map((c) => c.id).join(", "));
    out.push(
      `  media mismatch (${list}): the call's tokens extend an earlier call whose media differ, ` +
        `so it is a root or continues a shorter call`,
    );
  }
  const broken = plan.forest.filter((c) => c.nearParent !== null);
  if (broken.length > 0) {
    const list = oneLine(broken.map((c) => c.id).join(", "));
    out.push(
      `  prefix break (${list}): the call resent its near parent's prompt but not all of its generation, ` +
        "so it is a root or continues a shorter call; `callforest explain` says why",
    );
  }
  out.push("", "rows");
  const body = plan.rows.map((row) => [
    String(row.index),
    oneLine(row.leaf),
    oneLine(row.agent),
    oneLine(row.calls.join(" ")),
    oneLine(row.trained.join(" ")) || "–",
    oneLine(row.context.join(" ")) || "–",
    String(row.numTokens),
  ]);
  for (const line of table(["row", "leaf", "agent", "path (root first)", "trains", "context only", "tokens"], body)) {
    out.push(`  ${line}`);
  }
  out.push(
    "",
    `tokens: ${report.captured_tokens} generated, ${report.trained_tokens} trained, ` +
      `${report.row_tokens} in rows, ${report.unique_tokens} unique`,
  );
  if (plan.trees.length > 0 || plan.bins.length > 0) out.push(...packedTables(plan));
  return out.join("\n") + "\n";
}
