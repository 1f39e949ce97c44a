// The SVG picture (src/draw) and `callforest draw`, in Node: the worked example's snapshot, byte
// determinism, what the picture marks (lanes, links, roots, leaves, cuts, rows), legibility at 500
// calls, rejected rollouts, and the CLI's file naming. XML validity and rendered text sizes are
// checked in a real browser in draw-render.test.ts.
import { spawnSync } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync, readdirSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { init, type Callforest } from "../../src/index.js";
import { collapsedLabel, faultOf, renderSvg } from "../../src/draw/index.js";
import { renderPlan } from "../../src/cli/show.js";
import { BOX_W, COL, FONT, ROW_LABEL_CHARS } from "../../src/draw/layout.js";
import { clip, clipMiddle, wrap } from "../../src/draw/xml.js";
import { laneColour } from "../../src/draw/colours.js";
import { renderPackedSvg } from "../../src/draw/packed.js";
import { binsSavingsLine, renderBinsSvg } from "../../src/draw/bins.js";
import { layout } from "../../src/draw/layout.js";
import { main } from "../../src/cli/main.js";
import { captureOutput, type Captured } from "../support/capture.js";
import { generateRollout } from "../../bench/generate.js";
import type { Report, Rollout } from "../../src/types.js";
import { tempDirs } from "../support/temp-dirs.js";
import { TREE0_LINES } from "../support/worked-example.js";

const EXAMPLE_FILE = new URL("../../examples/login-bug.json", import.meta.url);
const example = JSON.parse(readFileSync(EXAMPLE_FILE, "utf8")) as Rollout;

let cf: Callforest;
beforeAll(async () => {
  cf = await init();
});

function draw(rollout: unknown, api = cf): string {
  const plan = api.plan(rollout);
  try {
    return renderSvg(plan);
  } finally {
    plan.release();
  }
}

/** The `<g ... data-call="ID" data-index="N">` group of one call. */
function callGroup(svg: string, id: string): string {
  const match = new RegExp(`<g class="([^"]*)" data-call="${id}" data-index="\\d+">`).exec(svg);
  if (match === null) throw new Error(`no group for ${id}`);
  return match[1];
}

function rowGroup(svg: string, row: number): string {
  const start = svg.indexOf(`<g class="cf-row" data-row="${row}">`);
  return svg.slice(start, svg.indexOf("</g>", start));
}

function rowBoxes(svg: string, row: number, kind: "trained" | "context"): string[] {
  return [...rowGroup(svg, row).matchAll(new RegExp(`class="cf-${kind}" data-call="([^"]+)"`, "g"))].map((m) => m[1]);
}

describe("the worked example's picture", () => {
  it("matches the committed snapshot", async () => {
    await expect(draw(example)).toMatchFileSnapshot("../__snapshots__/login-bug.svg");
  });

  it("is the same bytes every time and on both backends", async () => {
    const ts = await init({ backend: "ts" });
    const first = draw(example);
    expect(draw(structuredClone(example))).toBe(first);
    expect(draw(example, ts)).toBe(first);
  });

  it("refers to nothing outside itself: no scripts, links, fonts or images", () => {
    const svg = draw(example) + draw(generateRollout({ calls: 200, seed: 5 }));
    expect(svg).not.toMatch(/<script|<image|<foreignObject|<a[ >]|href=|@import|@font-face|url\((?!#cf-arrow\))/);
    expect(svg.match(/https?:\/\/[^"\s]*/g)).toEqual(["http://www.w3.org/2000/svg", "http://www.w3.org/2000/svg"]);
  });

  it("has one lane per agent labelled with id and mode, in the listed order", () => {
    const svg = draw(example);
    const labels = [...svg.matchAll(/<text x="16" y="\d+" class="cf-lane-label">([^<]+)<\/text>/g)].map((m) => m[1]);
    expect(labels.slice(0, 4)).toEqual(["L · leader", "B · background", "A · fresh", "F · fork"]);
  });

  it("draws the calls in ledger order, roots and leaves marked", () => {
    const svg = draw(example);
    const order = [...svg.matchAll(/<g class="cf-call[^"]*" data-call="([^"]+)" data-index="\d+">/g)].map((m) => m[1]);
    expect(order).toEqual(example.calls.map((c) => c.id));
    const xs = [...svg.matchAll(/data-call="C\d+" data-index="\d+"><title>[^<]*<\/title>\n<rect x="(\d+)"/g)].map((m) =>
      Number(m[1]),
    );
    expect(xs).toEqual(xs.map((_, i) => xs[0] + i * COL));
    const roots = example.calls.map((c) => c.id).filter((id) => callGroup(svg, id).includes("cf-is-root"));
    const leaves = example.calls.map((c) => c.id).filter((id) => callGroup(svg, id).includes("cf-is-leaf"));
    expect(roots).toEqual(["C1", "C2", "C5", "C11"]);
    expect(leaves).toEqual(["C4", "C6", "C9", "C10", "C12"]);
  });

  it("links each call to its parent, the fork's first call into the leader's lane", () => {
    const svg = draw(example);
    const box = (id: string) => {
      const m = new RegExp(
        `data-call="${id}" data-index="\\d+"><title>[^<]*</title>\n<rect x="(\\d+)" y="(\\d+)"`,
      ).exec(svg)!;
      return { x: Number(m[1]), y: Number(m[2]) };
    };
    // A link runs from the child's box to the parent's box; read its two ends from the path data.
    const links = [...svg.matchAll(/<path d="([^"]+)" class="cf-link" marker-end/g)].slice(1).map((m) => {
      const numbers = m[1].match(/-?\d+/g)!.map(Number);
      const [x0, y0] = numbers;
      const end = m[1].includes(" H") ? [numbers[numbers.length - 1], y0] : numbers.slice(-2);
      return { from: [x0, y0], to: end };
    });
    const within = ([x, y]: number[], id: string) => {
      const b = box(id);
      return x >= b.x && x <= b.x + BOX_W && y >= b.y && y <= b.y + 32;
    };
    const linked = example.calls
      .map((c) => c.id)
      .map((id) => {
        const link = links.find((l) => within(l.from, id));
        if (link === undefined) return [id, null];
        const parent = example.calls.map((c) => c.id).find((p) => p !== id && within(link.to, p));
        return [id, parent ?? "?"];
      });
    expect(Object.fromEntries(linked)).toEqual({
      C1: null,
      C2: null,
      C3: "C1",
      C4: "C2",
      C5: null,
      C6: "C5",
      C7: "C3",
      C8: "C7",
      C9: "C8",
      C10: "C7",
      C11: null,
      C12: "C11",
    });
    expect(links.length).toBe(8);
    // the fork's first call leaves lane F and ends in lane L, at C7
    expect(box("C8").y).toBeGreaterThan(box("C7").y + 3 * 60);
  });

  it("marks the compaction cut between the summary C10 and the new root C11, and nowhere else", () => {
    const svg = draw(example);
    expect([...svg.matchAll(/class="cf-cut-mark" data-after="([^"]+)"/g)].map((m) => m[1])).toEqual(["C11"]);
    expect(svg).toContain("C10 was the last call of the old context, C11 starts a new tree");
    // A try nobody kept (or an empty generation) before an agent's first real call cuts nothing.
    const call = (id: string, prompt: number[], generated: number[], kept?: boolean) => ({
      id,
      agent: "main",
      prompt_token_ids: prompt,
      generation_token_ids: generated,
      generation_log_probs: generated.map(() => -1),
      ...(kept === undefined ? {} : { kept }),
    });
    const retried = {
      rollout_id: "retried",
      reward: 0,
      calls: [
        call("A1", [1, 2], [3], false),
        call("A2", [1, 2], []),
        call("A3", [1, 2], [4]),
        call("A4", [1, 2, 4, 5], [6]),
      ],
    };
    expect(draw(retried)).not.toContain('class="cf-cut-mark"');
  });

  it("draws each row's path with trained calls filled and context calls hollow (SPEC's table)", () => {
    const svg = draw(example);
    const expected: [string[], string[]][] = [
      [["C2", "C4"], []],
      [["C5", "C6"], []],
      [
        ["C8", "C9"],
        ["C1", "C3", "C7"],
      ],
      [["C1", "C3", "C7", "C10"], []],
      [["C11", "C12"], []],
    ];
    expected.forEach(([trained, context], row) => {
      expect(rowBoxes(svg, row, "trained")).toEqual(trained);
      expect(rowBoxes(svg, row, "context")).toEqual(context);
    });
  });
});

describe("large and unusual rollouts", () => {
  it("stays legible at 500 calls: same font size, the picture grows wider instead", () => {
    const big = generateRollout({ calls: 500, seed: 7 });
    const svg = draw(big);
    const small = draw(example);
    const fontSizes = (s: string) => [...s.matchAll(/font-size="([^"]+)"/g)].map((m) => m[1]);
    expect(fontSizes(svg)).toEqual([String(FONT)]);
    expect(fontSizes(small)).toEqual([String(FONT)]);
    expect(svg).not.toMatch(/transform|scale\(|font-size:/);
    const [, width, height, vw, vh] = /<svg [^>]*width="(\d+)" height="(\d+)" viewBox="0 0 (\d+) (\d+)"/.exec(svg)!;
    expect([vw, vh]).toEqual([width, height]); // drawn 1:1, never scaled down to fit
    expect(Number(width)).toBeGreaterThanOrEqual(big.calls.length * COL);
    // every call is drawn with its id readable in its box (generator ids fit without clipping)
    const ids = [
      ...svg.matchAll(
        /data-call="([^"]+)" data-index="\d+"><title>[^<]*<\/title>\n<rect [^>]*\/>\n<text [^>]*>([^<]+)<\/text>/g,
      ),
    ];
    expect(ids.length).toBe(big.calls.length);
    for (const [, id, label] of ids) expect(label).toBe(id);
  });

  it("repeats lane labels only near the lane's calls: at most two per call, not lanes × columns", () => {
    // 1,500 agents of one call each (a fan of subagents): the picture stays linear in size.
    const agents = Array.from({ length: 1500 }, (_, i) => ({ id: `agent-${i}`, parent: null }));
    const calls = agents.map((a, i) => ({
      id: `w${i}`,
      agent: a.id,
      prompt_token_ids: [i],
      generation_token_ids: [7],
      generation_log_probs: [-1],
    }));
    const fan = draw({ rollout_id: "fan", reward: 0, agents, calls });
    const repeats = (svg: string) => [...svg.matchAll(/class="cf-lane-repeat"[^>]*>([^<]*)</g)].map((m) => m[1]);
    expect(repeats(fan).length).toBeLessThanOrEqual(2 * calls.length);
    expect(fan.length).toBeLessThan(3000 * calls.length);
    // One agent calling throughout: its label still comes back every 20 columns.
    const chain = Array.from({ length: 100 }, (_, i) => ({
      id: `c${i}`,
      agent: "solo",
      prompt_token_ids: Array.from({ length: i + 1 }, (_, k) => k),
      generation_token_ids: [i + 1],
      generation_log_probs: [-1],
    }));
    expect(repeats(draw({ rollout_id: "chain", reward: 0, calls: chain }))).toEqual(["solo", "solo", "solo", "solo"]);
  });

  it("marks calls that are not linked (unkept retries, empty generations) without a row", () => {
    const rollout = structuredClone(example) as Rollout & { calls: { kept?: boolean }[] };
    rollout.calls.splice(1, 0, { ...structuredClone(rollout.calls[0]), id: "retry", kept: false });
    rollout.calls.push({
      id: "empty",
      agent: "L",
      prompt_token_ids: [1],
      generation_token_ids: [],
      generation_log_probs: [],
    });
    const svg = draw(rollout);
    expect(callGroup(svg, "retry")).toBe("cf-call cf-is-unlinked");
    expect(callGroup(svg, "empty")).toBe("cf-call cf-is-unlinked");
    expect(svg).toMatch(/data-call="retry" data-index="\d+">[\s\S]*?not kept<\/text>/);
    expect(svg).toMatch(/data-call="empty" data-index="\d+">[\s\S]*?empty<\/text>/);
    // The tooltips tell the two apart: an empty generation was kept.
    expect(svg).toMatch(/data-call="retry" data-index="\d+"><title>[^<]* · not kept<\/title>/);
    expect(svg).toMatch(/data-call="empty" data-index="\d+"><title>[^<]* · empty generation<\/title>/);
  });

  it("gives every lane its own colour, however many agents (no fork lane in the leader's blue)", () => {
    const agents = Array.from({ length: 300 }, (_, i) => ({ id: `a${i}`, parent: null }));
    const calls = agents.map((a, i) => ({
      id: `c${i}`,
      agent: a.id,
      prompt_token_ids: [i],
      generation_token_ids: [7],
      generation_log_probs: [-1],
    }));
    const svg = draw({ rollout_id: "many", reward: 0, agents, calls });
    const colours = [...svg.matchAll(/\b(?:fill|stroke)="([^"]*)"/g)].map((m) => m[1]);
    expect(colours.filter((c) => !/^(#[0-9a-f]{3}|#[0-9a-f]{6}|none)$/.test(c))).toEqual([]);
    const bars = [...svg.matchAll(/<rect x="8" y="\d+" width="4" height="\d+" fill="(#[0-9a-f]{6})"\/>/g)].map(
      (m) => m[1],
    );
    expect(bars.length).toBe(300);
    expect(new Set(bars).size).toBe(300);
    expect(new Set(Array.from({ length: 5000 }, (_, i) => laneColour(i))).size).toBe(5000);
    expect(laneColour(0)).toBe("#4e79a7"); // the first ten stay Tableau 10 (the snapshot's colours)
  });

  it("labels a collapsed lane with whole counts: the words give way, then the name", () => {
    const lane = { name: "leader", agents: 153, calls: 1000 };
    expect(collapsedLabel(lane, 40)).toBe("leader +152 agents · 1000 calls");
    expect(collapsedLabel(lane, 24)).toBe("leader +152 · 1000 calls");
    expect(collapsedLabel(lane, 22)).toBe("leader +152 · 1000");
    expect(collapsedLabel(lane, 16)).toBe("l…er +152 · 1000");
    expect(collapsedLabel(lane, 12)).toBe("+152 · 1000");
    expect(collapsedLabel(lane, 6)).toBe("");
    expect(collapsedLabel({ name: "L", agents: 1, calls: 1 }, 12)).toBe("L · 1 call");
  });

  it("cuts long ids in the middle, so ids that share a prefix stay apart", () => {
    expect(clipMiddle("mc-leader-3", 9)).toBe("mc-l…er-3");
    expect(clipMiddle("mc-leader-3", 11)).toBe("mc-leader-3");
    // never inside a number: the cut moves to the number's edge, or the label is left out
    expect(clipMiddle("c999", 3)).toBe("");
    expect(clipMiddle("call-1234", 6)).toBe("c…1234");
    expect(clipMiddle("r12-step-3456", 8)).toBe("r12…3456");
    expect(clip("row 123", 6)).toBe("row …");
    for (let max = 1; max < 14; max++) {
      for (const id of ["c999", "call-1234", "r12-step-3456", "agent-007-b"]) {
        const shown = clipMiddle(id, max);
        expect(Array.from(shown).length).toBeLessThanOrEqual(max);
        for (const number of shown.match(/\d+/g) ?? []) expect(id.match(/\d+/g)).toContain(number);
      }
    }
    const ids = ["mc-leader-1", "mc-leader-2", "mc-leader-3"];
    const rollout = {
      rollout_id: "ids",
      reward: 0,
      calls: ids.map((id, i) => ({
        id,
        agent: "L",
        prompt_token_ids: Array.from({ length: i + 1 }, (_, k) => k),
        generation_token_ids: [i + 1],
        generation_log_probs: [-1],
      })),
    };
    const labels = [
      ...draw(rollout).matchAll(
        /data-call="mc-leader-\d" data-index="\d+"><title>[^<]*<\/title>\n<rect [^>]*\/>\n<text [^>]*>([^<]+)<\/text>/g,
      ),
    ].map((m) => m[1]);
    expect(labels).toEqual(["mc-l…er-1", "mc-l…er-2", "mc-l…er-3"]);
  });

  it("clips the label after a row's leaf to the room the layout keeps for it", () => {
    const rollout = structuredClone(example);
    rollout.agents![0].mode = "a leader with a very long mode name";
    const labels = [...draw(rollout).matchAll(/<text [^>]*class="cf-dim">(C\d+ · [^<]*)<\/text>\n<\/g>/g)].map(
      (m) => m[1],
    );
    expect(labels).toHaveLength(5);
    for (const label of labels) expect(Array.from(label).length).toBeLessThanOrEqual(ROW_LABEL_CHARS);
    expect(labels).toContain("C10 · L · a leader …");
  });

  it("counts in words in the header: one call, one tree, one leaf, one row", () => {
    const svg = draw({
      rollout_id: "one",
      reward: 1,
      calls: [
        { id: "c0", agent: "L", prompt_token_ids: [1, 2], generation_token_ids: [3], generation_log_probs: [-0.5] },
      ],
    });
    expect(svg).toContain("1 call · 1 eligible · 1 tree · 1 leaf · 1 row · tokens:");
    expect(draw(example)).toContain(`${example.calls.length} calls · `);
  });
  it("escapes ids and labels, and replaces characters XML forbids", () => {
    const rollout = structuredClone(example);
    rollout.calls[0].id = `<b>&"x"\u0001`;
    rollout.calls[1].id = "tab\tv\u000Bf\u000Cus\u001Fnon\uFFFE"; // a tab is fine in XML; the rest is not
    rollout.agents![0].mode = "lead<er>";
    const svg = draw(rollout);
    expect(svg).toContain("&lt;b&gt;&amp;&quot;x&quot;\uFFFD");
    expect(svg).toContain("L · lead&lt;er&gt;");
    expect(svg).not.toContain("\u0001");
    expect(svg).toContain("tab\tv\uFFFDf\uFFFDus\uFFFDnon\uFFFD");
    expect(svg).not.toContain("<b>");
  });

  it("draws a rejected rollout as its reason and the call at fault", () => {
    const rollout = structuredClone(example);
    rollout.calls[4].generation_log_probs = [-0.5];
    const plan = cf.plan(rollout);
    const svg = renderSvg(plan);
    plan.release();
    expect(svg).toContain("rejected (logprob_length_mismatch):");
    expect(svg).toContain(`call at fault: calls[4] &quot;C5&quot;`);
    expect(svg).not.toContain("cf-call");
    expect(svg).not.toContain("eligible"); // a rejected rollout has no counts to show
  });

  it("clips text only past its room, and wraps a long detail without losing a character", () => {
    expect(clip("C12345678", 9)).toBe("C12345678");
    expect(clip("C123456789", 9)).toBe("C…"); // never mid-number
    expect(clip("C12 abcdefg", 9)).toBe("C12 abcd…");
    const detail =
      'call "C5" (calls[4]): ' + Array.from({ length: 40 }, (_, i) => `word${i}`).join(" ") + " " + "x".repeat(150);
    const lines = wrap(detail, 120);
    expect(lines.length).toBeGreaterThan(2);
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(120);
    expect(lines.join(" ").replace(/ /g, "")).toBe(detail.replace(/ /g, ""));
  });
});

describe("large rollouts", () => {
  it("draws 10,000 calls and shows a 3,000-call chain (no argument spreading, no recursion)", () => {
    const flat = {
      rollout_id: "flat",
      reward: 0,
      calls: Array.from({ length: 10_000 }, (_, i) => ({
        id: `c${i}`,
        prompt_token_ids: [i + 1],
        generation_token_ids: [1],
        generation_log_probs: [-1],
      })),
    };
    const svg = draw(flat);
    expect(svg.match(/<g class="[^"]*" data-call="/g)).toHaveLength(10_000);
    const chain = {
      rollout_id: "chain",
      reward: 0,
      calls: Array.from({ length: 3000 }, (_, i) => ({
        id: `c${i}`,
        prompt_token_ids: new Array(2 * i).fill(1),
        generation_token_ids: [1],
        generation_log_probs: [-1],
      })),
    };
    const plan = cf.plan(chain);
    expect(plan.report.roots).toBe(1);
    const text = renderPlan(plan);
    plan.release();
    expect(text).toContain("c2999");
    expect(text.split("\n").filter((line) => line.includes("└─ c2999"))).toHaveLength(1);
  });
});

describe("fitted, collapsed and windowed pictures", () => {
  const big = generateRollout({ calls: 1000, seed: 7 });

  it("--fit WIDTH: exactly that wide, every call drawn (as a mark), the same bytes each time", () => {
    const plan = cf.plan(big);
    try {
      const svg = renderSvg(plan, { fit: 1400 });
      expect(/<svg [^>]*width="(\d+)"/.exec(svg)![1]).toBe("1400");
      expect(svg.match(/<g class="cf-call[^"]*" data-call=/g)).toHaveLength(1000);
      const xs = [...svg.matchAll(/<rect x="(\d+)" y="\d+" width="(\d+)" height="\d+" class="cf-box cf-mark"/g)].map(
        (m) => Number(m[1]) + Number(m[2]),
      );
      expect(Math.max(...xs)).toBeLessThanOrEqual(1400);
      expect(svg).not.toMatch(/ (?:x|y|width|height)="-?\d+\.\d/); // integer positions, however narrow the columns
      expect(renderSvg(plan, { fit: 1400 })).toBe(svg);
      // a small rollout is never zoomed in: fit is the detail picture, only as wide as asked
      const example1 = cf.plan(example);
      expect(renderSvg(example1, { fit: 1400 }).replace(/width="1400"|viewBox="0 0 1400 /g, "")).toContain(
        'class="cf-box" fill="#4e79a7"',
      );
      example1.release();
    } finally {
      plan.release();
    }
  });

  it("fitHeight: lanes and rows get lower to fit; rows that still do not are left out, and it says so", () => {
    const plan = cf.plan(big);
    try {
      const size = (svg: string) => /<svg [^>]*width="(\d+)" height="(\d+)"/.exec(svg)!.slice(1).map(Number);
      const rowsDrawn = (svg: string) => svg.match(/<g class="cf-row" data-row=/g)?.length ?? 0;
      const all = renderSvg(plan, { fit: 1600, fitHeight: 1600 });
      const [width, height] = size(all);
      expect([width, height <= 1600]).toEqual([1600, true]);
      expect(all.match(/<g class="cf-call[^"]*" data-call=/g)).toHaveLength(1000);
      expect(rowsDrawn(all)).toBe(plan.rows.length);
      expect(all).not.toContain("do not fit");
      const some = renderSvg(plan, { fit: 1600, fitHeight: 1200 });
      expect(size(some)[1]).toBeLessThanOrEqual(1200);
      const shown = rowsDrawn(some);
      expect(shown).toBeGreaterThan(0);
      expect(shown).toBeLessThan(plan.rows.length);
      expect(some).toContain(`the first ${shown} of ${plan.rows.length} rows: the rest do not fit this height`);
      expect(some.match(/<g class="cf-call[^"]*" data-call=/g)).toHaveLength(1000); // lanes are never left out
    } finally {
      plan.release();
    }
  });

  it("fitHeight counts the legend's near-parent line: a picture with a prefix break is no taller", () => {
    // A call that resends its parent's prompt but not its generation: a near parent, whose
    // legend item takes a line of its own at this width.
    const calls = big.calls.map((call) => ({ ...call, prompt_token_ids: Array.from(call.prompt_token_ids) }));
    const child = calls.findIndex((call, i) =>
      calls.slice(0, i).some((parent) => {
        const at = parent.prompt_token_ids.length;
        return (
          parent.generation_token_ids.length > 0 &&
          call.prompt_token_ids.length > at + parent.generation_token_ids.length &&
          parent.prompt_token_ids.every((t, k) => call.prompt_token_ids[k] === t) &&
          Array.from(parent.generation_token_ids).every((t, k) => call.prompt_token_ids[at + k] === t)
        );
      }),
    );
    const parent = calls
      .slice(0, child)
      .find(
        (p) =>
          p.generation_token_ids.length > 0 &&
          p.prompt_token_ids.every((t, k) => calls[child].prompt_token_ids[k] === t) &&
          calls[child].prompt_token_ids[p.prompt_token_ids.length] === p.generation_token_ids[0],
      )!;
    calls[child].prompt_token_ids[parent.prompt_token_ids.length] = 999_999;
    const plan = cf.plan({ ...big, calls });
    try {
      expect(plan.forest.some((call) => call.nearParent !== null)).toBe(true);
      const size = (svg: string) => Number(/<svg [^>]*height="(\d+)"/.exec(svg)![1]);
      for (const fitHeight of [1200, 1600]) {
        const svg = renderSvg(plan, { fit: 1200, fitHeight });
        expect(svg).toContain("near parent");
        expect([fitHeight, size(svg) <= fitHeight]).toEqual([fitHeight, true]);
      }
    } finally {
      plan.release();
    }
  });

  it("draw --fit 1600 on a 1,000-call rollout: as wide as asked and no taller", async () => {
    const dir = tmp();
    const input = join(dir, "big.json");
    writeFileSync(
      input,
      JSON.stringify(big, (_, v) => (ArrayBuffer.isView(v) ? Array.from(v as Int32Array) : v)),
    );
    const fitted = await run(input, "--fit", "1600", "-o", join(dir, "fit.svg"));
    expect(fitted.code).toBe(0);
    const svg = readFileSync(join(dir, "fit.svg"), "utf8");
    const [width, height] = /<svg [^>]*width="(\d+)" height="(\d+)"/.exec(svg)!.slice(1).map(Number);
    expect(width).toBe(1600);
    expect(height).toBeLessThanOrEqual(1600);
  });

  it("draws a collapsed lane's calls (and its subagents') as ticks, and a window only what is in it", () => {
    const plan = cf.plan(big);
    try {
      const leader = plan.agents[0].id;
      const l = layout(plan, { collapsed: new Set([leader]) });
      expect(l.lanes.map((lane) => lane.agent)).toEqual([leader]);
      const svg = renderSvg(plan, { layout: l });
      expect(svg).not.toContain('class="cf-call');
      expect(svg.match(/class="cf-tick"/g)).toHaveLength(1000);
      const window = { x: 2000, y: 0, width: 1000, height: 800 };
      const part = renderSvg(plan, { window });
      const drawn = [...part.matchAll(/data-index="(\d+)"><title>[^<]*<\/title>\n<rect x="(\d+)"/g)].map((m) =>
        Number(m[2]),
      );
      expect(drawn.length).toBeGreaterThan(0);
      expect(drawn.length).toBeLessThan(100);
      for (const x of drawn) expect(x).toBeGreaterThanOrEqual(window.x - 88);
      expect(/<svg [^>]*width="(\d+)"/.exec(part)![1]).toBe(/<svg [^>]*width="(\d+)"/.exec(renderSvg(plan))![1]);
    } finally {
      plan.release();
    }
  });

  it("draw --fit and --layout packed write those pictures; a bad --fit or --layout is a usage error", async () => {
    const dir = tmp();
    const fitted = await run(EXAMPLE_FILE.pathname, "--fit", "800", "-o", join(dir, "fit.svg"));
    expect(fitted.code).toBe(0);
    expect(/<svg [^>]*width="(\d+)"/.exec(readFileSync(join(dir, "fit.svg"), "utf8"))![1]).toBe("800");
    const packed = await run(EXAMPLE_FILE.pathname, "--layout", "packed", "-o", join(dir, "packed.svg"));
    expect(packed.code).toBe(0);
    const svg = readFileSync(join(dir, "packed.svg"), "utf8");
    const plan = cf.plan(example, { trees: true });
    expect(svg).toBe(
      renderPackedSvg({
        report: plan.report,
        forest: plan.forest,
        agents: plan.agents,
        rows: plan.rows,
        trees: plan.trees,
      }),
    );
    plan.release();
    expect(
      [
        ...svg.matchAll(
          new RegExp(
            '<g class="cf-segment" data-tree="0" data-segment="\\d+" data-call="(C\\d+)" data-parent="(-?\\d+)" ' +
              'data-start="(\\d+)" data-length="(\\d+)" data-end="(\\d+)"',
            "g",
          ),
        ),
      ].map((m) => m.slice(1).join(" ")),
    ).toEqual(TREE0_LINES);
    for (const [args, message] of [
      [["--fit", "100"], "--fit must be an integer >= 320, got '100'"],
      [["--layout", "bins"], "unknown --layout 'bins': expected rows or packed"],
    ] as const) {
      const bad = await run(EXAMPLE_FILE.pathname, ...args, "-o", join(dir, "x.svg"));
      expect([bad.code, bad.stderr]).toEqual([2, `callforest: ${message}\n`]);
    }
  });
});

describe("bins (packed records of a capacity, SPEC's Bins)", () => {
  /** `bin segment call trained` of every segment the SVG draws. */
  function binSegments(svg: string): string[] {
    return [
      ...svg.matchAll(
        /<g class="cf-segment" data-bin="(\d+)" data-segment="(\d+)" data-call="([^"]+)"[^>]* data-trained="(\w+)"/g,
      ),
    ].map((m) => m.slice(1).join(" "));
  }

  it("draws each bin's pieces, context outlined, and what the bins cost against rows and the trie", () => {
    const plan = cf.plan(example, { capacity: 20 });
    try {
      const svg = renderBinsSvg({ ...plan, forest: plan.forest, capacity: 20 });
      expect(svg).toContain("rollout login-bug · bins of at most 20 tokens: 4 bins, 18 segments (5 as context)</text>");
      expect(svg).toContain("tokens: rows 63 → bins 63 (1.00× fewer) · trie 46 (the bins repeat 17 as context)");
      expect(binsSavingsLine(plan.report)).toBe(
        "tokens: rows 63 → bins 63 (1.00× fewer) · trie 46 (the bins repeat 17 as context)",
      );
      expect(binSegments(svg)).toEqual(
        plan.bins.flatMap((bin) => bin.segments.map((s, i) => `${bin.index} ${i} ${s.call} ${s.trained}`)),
      );
      // bin 1 repeats C1 (two segments) C3 C7 as context for C10, bin 2 the system prompt for C11:
      // outlines, not filled blocks
      const context = [
        ...svg.matchAll(/data-call="(C\d+)"[^>]*data-trained="false"><title>[^<]*<\/title>(.*?)<\/g>/gs),
      ];
      expect(context.map((m) => m[1])).toEqual(["C1", "C1", "C3", "C7", "C1"]);
      for (const m of context) expect(m[2]).toMatch(/<rect [^>]*fill="#fff"[^>]*class="cf-context-seg"\/>/);
      expect(svg).toContain("bin 1 · 19 of 20 tokens (95%) · 1 piece, root C1 · trains 1 segment, 4 more as context");
      expect(svg).toContain(
        "bin 2 · 17 of 20 tokens (85%) · 2 pieces, roots C1 C2 C11 · trains 4 segments, 1 more as context",
      );
    } finally {
      plan.release();
    }
  });

  it(
    "draw --capacity N writes renderBinsSvg's picture " + "(implying --layout packed); a rejection draws its reason",
    async () => {
      const dir = tmp();
      const drawn = await run(EXAMPLE_FILE.pathname, "--capacity", "24", "-o", join(dir, "bins.svg"));
      expect(drawn.code).toBe(0);
      const svg = readFileSync(join(dir, "bins.svg"), "utf8");
      const plan = cf.plan(example, { capacity: 24 });
      expect(svg).toBe(renderBinsSvg({ ...plan, forest: plan.forest, capacity: 24 }));
      plan.release();
      expect(binSegments(svg).filter((s) => s.startsWith("0 "))).toEqual([
        "0 0 C1 true",
        "0 1 C1 true",
        "0 2 C3 true",
        "0 3 C7 true",
        "0 4 C8 true",
        "0 5 C9 true",
        "0 6 C10 true",
      ]);
      const packed = await run(
        EXAMPLE_FILE.pathname,
        "--layout",
        "packed",
        "--capacity",
        "24",
        "-o",
        join(dir, "p.svg"),
      );
      expect([packed.code, readFileSync(join(dir, "p.svg"), "utf8")]).toEqual([0, svg]);
      // C9's row holds 19 tokens: at 16 the rollout is rejected, and drawn as every rejection is
      const tight = await run(EXAMPLE_FILE.pathname, "--capacity", "16", "-o", join(dir, "tight.svg"));
      expect(tight.code).toBe(0);
      const rejected = readFileSync(join(dir, "tight.svg"), "utf8");
      expect(rejected).toContain("rejected (row_exceeds_capacity):");
      expect(rejected).toContain("leaf call &quot;C9&quot; (calls[8]) holds 19 tokens, more than the capacity of 16");
      for (const [args, message] of [
        [["--capacity", "0"], "--capacity must be a positive integer, got '0'"],
        [
          ["--layout", "rows", "--capacity", "8"],
          "--capacity lays out bins of packed records: it needs --layout packed, not rows",
        ],
      ] as const) {
        const bad = await run(EXAMPLE_FILE.pathname, ...args, "-o", join(dir, "x.svg"));
        expect([bad.code, bad.stderr]).toEqual([2, `callforest: ${message}\n`]);
      }
    },
  );
});

describe("faultOf", () => {
  const rejected = (detail: string): Report => ({
    rollout_id: "r",
    status: "rejected",
    reason: "invalid_token",
    detail,
    calls: 0,
    eligible: 0,
    roots: 0,
    leaves: 0,
    rows: 0,
    captured_tokens: 0,
    trained_tokens: 0,
    row_tokens: 0,
    unique_tokens: 0,
    diagnostics: [],
  });
  it("reads the call the planner names first", () => {
    expect(faultOf(rejected(`call "C\\"7" (calls[6]): prompt_token_ids[2] is -1`))).toEqual({ index: 6, id: 'C"7' });
    expect(faultOf(rejected(`calls[3]: id must be a non-empty string, got 5`))).toEqual({ index: 3, id: null });
    expect(faultOf(rejected(`reward must be a finite number, got "x"`))).toBeNull();
    // An importer's detail may mention other lists' `calls[N]`: they are not the rollout's calls.
    expect(
      faultOf(rejected(`gym-observed: ng_agent_observations.records[0].model_calls[2]: needs model_call_id`)),
    ).toBeNull();
    expect(faultOf(rejected(`gym-observed: ng_model_call_capture.calls[0].model_call_id is 5`))).toBeNull();
  });
  it("finds the call of a real ambiguous_parent rejection", () => {
    const twin = { agent: "A", prompt_token_ids: [1], generation_token_ids: [2], generation_log_probs: [-1] };
    const plan = cf.plan({
      rollout_id: "twins",
      reward: 0,
      agents: [
        { id: "L", parent: null },
        { id: "A", parent: "L" },
        { id: "B", parent: "L" },
        { id: "C", parent: "L" },
      ],
      calls: [
        { id: "a", ...twin },
        { id: "b", ...twin, agent: "B" },
        { id: "c", agent: "C", prompt_token_ids: [1, 2, 3], generation_token_ids: [4], generation_log_probs: [-1] },
      ],
    });
    expect(plan.report.reason).toBe("ambiguous_parent");
    expect(faultOf(plan.report)).toEqual({ index: 2, id: "c" });
    plan.release();
  });
});

// ---- the CLI ---------------------------------------------------------------------------------

function run(...argv: string[]): Promise<Captured> {
  return captureOutput(() => main(["draw", ...argv]));
}

const tmp = tempDirs("draw");

/** The rejection lines `rows` prints on stderr for `input` (its summary line left out). */
async function rowsRejections(input: string): Promise<string> {
  const rows = await captureOutput(() => main(["rows", input, "-o", "/dev/null", "--jobs", "1"]));
  return rows.stderr
    .split("\n")
    .filter((line) => line.includes(": rejected ("))
    .map((line) => line + "\n")
    .join("");
}

describe("callforest draw", () => {
  it("writes one rollout's SVG to -o, the same bytes as renderSvg", async () => {
    const dir = tmp();
    const file = join(dir, "forest.svg");
    const r = await run(EXAMPLE_FILE.pathname, "-o", file);
    expect([r.code, r.stderr, r.stdout]).toEqual([0, "", `${file}\n`]);
    expect(readFileSync(file, "utf8")).toBe(draw(example));
  });

  it("says on stderr why a rollout was rejected, in the line rows and show print (issue 39)", async () => {
    const dir = tmp();
    const input = join(dir, "bad.jsonl");
    const bad = { ...example, rollout_id: "bad" } as Rollout;
    bad.calls = bad.calls.map((call, i) => (i === 0 ? { ...call, prompt_token_ids: [-1] } : call));
    writeFileSync(input, JSON.stringify(bad) + "\n");
    const r = await run(input, "-o", join(dir, "bad.svg"));
    const line = await rowsRejections(input);
    expect(line).toMatch(/^.*bad\.jsonl:1: rejected \(invalid_token\): .+\n$/);
    expect([r.code, r.stderr, r.stdout]).toEqual([0, line, `${join(dir, "bad.svg")}\n`]);
    const show = await captureOutput(() => main(["show", input]));
    expect(show.stdout).toBe(line); // show prints it as its output
    expect(readFileSync(join(dir, "bad.svg"), "utf8")).toContain("rejected (invalid_token):");
  });

  it("without -o, says on stderr that it wrote forest.svg in the working directory (issue 39)", () => {
    const dir = tmp();
    const bin = new URL("../../bin/callforest.js", import.meta.url).pathname;
    const r = spawnSync(process.execPath, [bin, "draw", EXAMPLE_FILE.pathname], { cwd: dir, encoding: "utf8" });
    expect([r.status, r.stdout, r.stderr]).toEqual([
      0,
      "forest.svg\n",
      `callforest: no -o given: wrote forest.svg in the working directory (${realpathSync(dir)})\n`,
    ]);
    expect(readdirSync(dir)).toEqual(["forest.svg"]);
  });

  it("writes -o - (or -o /dev/stdout) to stdout, the SVG alone", async () => {
    for (const output of ["-", "/dev/stdout"]) {
      const r = await run(EXAMPLE_FILE.pathname, "-o", output);
      expect([output, r.code, r.stdout]).toEqual([output, 0, draw(example)]);
    }
  });

  it("names several rollouts <stem>.<id>.svg, adding the position for repeated or missing ids", async () => {
    const dir = tmp();
    const input = join(dir, "many.jsonl");
    const second = { ...example, rollout_id: "a/b c" };
    writeFileSync(
      input,
      [example, second, example, "{not json"].map((v) => (typeof v === "string" ? v : JSON.stringify(v))).join("\n") +
        "\n",
    );
    const r = await run(input, "-o", join(dir, "pic.svg"));
    expect([r.code, r.stderr]).toEqual([0, await rowsRejections(input)]);
    expect(r.stderr).toMatch(/^.*many\.jsonl:4: rejected \(malformed_json\): .*\n$/);
    const names = ["pic.login-bug.svg", "pic.a_b_c.svg", "pic.login-bug.3.svg", "pic.rollout.4.svg"];
    expect(r.stdout).toBe(names.map((n) => join(dir, n) + "\n").join(""));
    expect(readdirSync(dir).sort()).toEqual([...names, "many.jsonl"].sort());
    expect(readFileSync(join(dir, "pic.a_b_c.svg"), "utf8")).toBe(draw(second));
    expect(readFileSync(join(dir, "pic.rollout.4.svg"), "utf8")).toContain("rejected (malformed_json):");
  });

  it(
    "never writes two rollouts to one file: a name already taken " +
      "gets one more suffix; .SVG is the extension in any case",
    async () => {
      const dir = tmp();
      const input = join(dir, "clash.jsonl");
      // the third's <stem>.<id>.svg and <stem>.<id>.<position>.svg are both the names of earlier ones
      writeFileSync(
        input,
        ["r.2.3", "r.2", "r.2"].map((id) => JSON.stringify({ ...example, rollout_id: id })).join("\n") + "\n",
      );
      const r = await run(input, "-o", join(dir, "F.SVG"));
      expect([r.code, r.stderr]).toEqual([0, ""]);
      const names = ["F.r.2.3.svg", "F.r.2.svg", "F.r.2.3_.svg"];
      expect(r.stdout).toBe(names.map((n) => join(dir, n) + "\n").join(""));
      expect(readFileSync(join(dir, "F.r.2.3.svg"), "utf8")).toContain("rollout r.2.3");
    },
  );

  it("--rollout finds a rollout the importer rejects by its id, and draws the rejection", async () => {
    // a gym-observed capture without --tokens: rejected, but its rollout_id is known
    const dir = tmp();
    const r = await run(
      new URL("../../examples/gym-observed/rollouts.jsonl", import.meta.url).pathname,
      "--rollout",
      "7-2",
      "-o",
      join(dir, "x.svg"),
    );
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^.*rollouts\.jsonl:\d+: rejected \([^)]*\): .*\n$/);
    expect(readFileSync(join(dir, "x.svg"), "utf8")).toContain("rollout 7-2");
  });

  it(
    "counts a rollout_id that is missing, empty or not a " + "string as missing (the rollout is drawn as rejected)",
    async () => {
      const dir = tmp();
      const input = join(dir, "ids.jsonl");
      const { rollout_id: _, ...noId } = example;
      const rollouts = [noId, { ...example, rollout_id: "" }, { ...example, rollout_id: 5 }, example];
      writeFileSync(input, rollouts.map((v) => JSON.stringify(v)).join("\n") + "\n");
      const r = await run(input, "-o", join(dir, "f.svg"));
      expect([r.code, r.stderr]).toEqual([0, await rowsRejections(input)]);
      expect(r.stderr.split("\n")).toHaveLength(4); // three lines, and the end of the last
      const names = ["f.rollout.1.svg", "f.rollout.2.svg", "f.rollout.3.svg", "f.login-bug.svg"];
      expect(r.stdout).toBe(names.map((n) => join(dir, n) + "\n").join(""));
      expect(readFileSync(join(dir, "f.rollout.3.svg"), "utf8")).toContain("rejected (invalid_rollout):");
    },
  );

  /** two.jsonl in `dir`: the worked example, then a copy with rollout_id "other". */
  const writeTwoRollouts = (dir: string) => {
    const input = join(dir, "two.jsonl");
    writeFileSync(input, JSON.stringify(example) + "\n" + JSON.stringify({ ...example, rollout_id: "other" }) + "\n");
    return input;
  };

  it("--rollout picks one rollout and writes it to -o as is", async () => {
    const dir = tmp();
    const input = writeTwoRollouts(dir);
    const r = await run(input, "-o", join(dir, "one.svg"), "--rollout", "other");
    expect([r.code, r.stderr]).toEqual([0, ""]);
    expect(readdirSync(dir).sort()).toEqual(["one.svg", "two.jsonl"]);
    expect(readFileSync(join(dir, "one.svg"), "utf8")).toContain("rollout other");
  });

  it("fails in one line, writing nothing, for an unknown --rollout, -o - with several, or a missing file", async () => {
    const dir = tmp();
    const input = writeTwoRollouts(dir);
    let r = await run(input, "-o", join(dir, "x.svg"), "--rollout", "nope");
    expect([r.code, r.stderr]).toEqual([2, `callforest: no rollout with rollout_id "nope" in ${input}\n`]);
    r = await run(input, "-o", "-");
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /^callforest: -o - writes one SVG, but .* holds several rollouts: pick one with --rollout ID\n$/,
    );
    r = await run(join(dir, "missing.json"));
    expect([r.code, r.stderr]).toEqual([2, `callforest: cannot read ${join(dir, "missing.json")}: no such file\n`]);
    expect(existsSync(join(dir, "x.svg"))).toBe(false);
  });

  it("refuses several rollouts to -o /dev/fd/N, as to stdout (one descriptor holds one SVG)", async () => {
    const dir = tmp();
    const input = writeTwoRollouts(dir);
    const fd = openSync(join(dir, "log"), "a");
    try {
      const r = await run(input, "-o", `/dev/fd/${fd}`);
      expect([r.code, r.stderr]).toEqual([
        2,
        `callforest: -o /dev/fd/${fd} writes one SVG, but ${input} holds several rollouts: ` +
          "pick one with --rollout ID\n",
      ]);
    } finally {
      closeSync(fd);
    }
    expect(readFileSync(join(dir, "log"), "utf8")).toBe("");
  });

  it("refuses to write over its input under a name made from a rollout id", async () => {
    const dir = tmp();
    const input = join(dir, "forest.r1.svg"); // what `<stem>.<id>.svg` makes for -o forest.svg and rollout r1
    const rollout = JSON.parse(readFileSync(EXAMPLE_FILE, "utf8"));
    const content =
      [JSON.stringify({ ...rollout, rollout_id: "r0" }), JSON.stringify({ ...rollout, rollout_id: "r1" })].join("\n") +
      "\n";
    writeFileSync(input, content);
    const r = await run(input, "-o", join(dir, "forest.svg"));
    expect([r.code, r.stderr]).toEqual([
      2,
      `callforest: the SVG ${input}: is also the input ${input}; write the output somewhere else\n`,
    ]);
    expect(readFileSync(input, "utf8")).toBe(content);
  });

  it("refuses to write over its input (-o the input itself)", async () => {
    const input = join(tmp(), "s.json");
    writeFileSync(input, readFileSync(EXAMPLE_FILE));
    const r = await run(input, "-o", input);
    expect([r.code, r.stdout, r.stderr]).toEqual([
      2,
      "",
      `callforest: -o ${input}: is also the input ${input}; write the output somewhere else\n`,
    ]);
    expect(readFileSync(input, "utf8")).toBe(readFileSync(EXAMPLE_FILE, "utf8"));
  });
});

describe("prefix breaks in the picture", () => {
  const broken = JSON.parse(
    readFileSync(new URL("../../examples/reasoning-dropped.json", import.meta.url), "utf8"),
  ) as Rollout;

  it("draws each near parent as a dashed arrow from the call, named in its title and the legend", () => {
    const svg = draw(broken);
    const near = [...svg.matchAll(/<path d="[^"]+" class="cf-near" data-call="([^"]+)" data-near="([^"]+)"/g)];
    expect(near.map((m) => [m[1], m[2]])).toEqual([
      ["C2", "C1"],
      ["C3", "C2"],
    ]);
    expect(svg).toContain("C2 resent C1's prompt and parts from its generation at token 4 (prefix break)");
    expect(svg).toContain("near parent (prefix break)");
    expect(svg).toContain(".cf-near{");
    expect(svg).toContain("prefix break: near C2, parts at 9");
    // zoomed out to marks, the arrows stay
    const plan = cf.plan(broken);
    const fitted = renderSvg(plan, { fit: 400 });
    plan.release();
    expect(fitted.match(/class="cf-near" data-call/g)).toHaveLength(2);
  });

  it("draws none, and no legend item or style for them, without breaks", () => {
    const svg = draw(example);
    expect(svg).not.toContain("cf-near");
    expect(svg).not.toContain("near parent");
  });
});
