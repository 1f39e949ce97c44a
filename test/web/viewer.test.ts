// The forest viewer of the page (web/viewer.ts) in real Chromium, on the worked example and on a
// generated rollout of 1,000 calls and ~190 agents: it opens fitted (every lane and column in
// view), zooms, collapses lanes, finds calls, shows the packed layout, decodes tokens, and stays
// quick (time to first paint and to zoom measured and bounded).
import { CHROMIUM_LAUNCH, NO_DEADLINE, buildPage } from "../support/chromium.js";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { init, type Callforest } from "../../src/index.js";
import { startViewServer, type ViewServer } from "../../src/cli/commands/view.js";
import { generateRollout } from "../../bench/generate.js";
import { savingsOf } from "../../src/draw/savings.js";
import type { Rollout } from "../../src/types.js";
import { byteLevelTokenizer } from "../support/byte-level-tokenizer.js";
import { TREE0_LINES } from "../support/worked-example.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const EXAMPLE_FILE = join(ROOT, "examples/login-bug.json");
/** Where screenshots for a person to look at go (not compared: fonts differ between machines). */
const SHOTS = process.env.CALLFOREST_SHOTS;

interface PictureState {
  col: number;
  fitCol: number;
  labels: boolean;
  drawMs: number;
  width: number;
  lanes: { agent: string; y: number; height: number; collapsed: boolean }[];
}
interface Handle {
  picture(): PictureState | null;
  callBox(index: number): { x: number; y: number; width: number; height: number; folded: boolean } | null;
}

let dir: string;
let browser: Browser;
let context: BrowserContext;
let cf: Callforest;
let big: Rollout;
let bigFile: string;

function asJson(rollout: Rollout): string {
  return JSON.stringify(rollout, (_k, v: unknown) =>
    ArrayBuffer.isView(v) ? Array.from(v as unknown as ArrayLike<number>) : v,
  );
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "callforest-viewer-"));
  buildPage(dir);
  browser = await chromium.launch(CHROMIUM_LAUNCH);
  context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  context.setDefaultTimeout(NO_DEADLINE);
  cf = await init();
  big = generateRollout({ calls: 1000, seed: 7 });
  bigFile = join(dir, "big.json");
  writeFileSync(bigFile, asJson(big));
});
afterAll(async () => {
  await browser?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function openPage(file: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`file://${join(dir, "web/index.html")}`);
  await page.waitForSelector("body[data-ready=true]");
  await page.setInputFiles("#file", file);
  await page.waitForSelector('body[data-loads="1"]');
  return page;
}

const picture = (page: Page) =>
  page.evaluate(() => (window as unknown as { callforest: Handle }).callforest.picture()!);
const callBox = (page: Page, index: number) =>
  page.evaluate((i) => (window as unknown as { callforest: Handle }).callforest.callBox(i)!, index);
/** What of the picture the scroll box shows, in picture px. */
const visible = (page: Page) =>
  page.$eval("#svg-host", (h) => ({
    x: h.scrollLeft,
    y: h.scrollTop,
    width: h.clientWidth,
    height: h.clientHeight,
    scrollWidth: h.scrollWidth,
  }));

describe("a rollout of 1,000 calls and ~190 agents", () => {
  it("opens fitted: every column in the box's width, every lane drawn and labelled, calls as marks", async () => {
    const page = await openPage(bigFile);
    const agents = new Set(big.calls.map((c) => c.agent)).size;
    expect(agents).toBeGreaterThan(100);
    const state = await picture(page);
    const view = await visible(page);
    expect(state.labels).toBe(false);
    expect(state.col).toBe(state.fitCol);
    expect(view.scrollWidth).toBeLessThanOrEqual(view.width); // no horizontal scrolling at fit
    expect(state.lanes.length).toBe(agents);
    // every lane's label is in the gutter, every call's box lies within the width
    expect(await page.$$eval("#svg-host .lane-tag", (tags) => tags.length)).toBe(agents);
    for (const index of [0, 499, 999]) {
      const box = await callBox(page, index);
      expect(box.x + box.width).toBeLessThanOrEqual(view.width);
    }
    if (SHOTS) await page.screenshot({ path: join(SHOTS, "big-fit.png") });
    await page.close();
  });

  it("paints a 1,000-call rollout served by view, and zooms in and to 1:1 (times: npm run bench)", async () => {
    const view: ViewServer = await startViewServer({ page: join(dir, "web/index.html"), input: bigFile, port: 0 });
    const page = await context.newPage();
    try {
      await page.goto(view.url);
      await page.waitForSelector('body[data-loads="1"]');
      // The page marks when its picture was painted (the first frame after it was drawn), and when
      // the file's bytes arrived.
      await page.waitForFunction(() => performance.getEntriesByName("callforest:painted").length > 0);
      const [firstPaint, fetched] = await page.evaluate(() =>
        ["callforest:painted", "callforest:fetched"].map((name) => performance.getEntriesByName(name)[0].startTime),
      );
      expect(firstPaint).toBeGreaterThan(fetched);
      const fitted = await picture(page);
      expect(fitted.labels).toBe(false); // fitted: calls as marks
      await page.click("#zoom-in");
      await page.waitForFunction(
        (col) => (window as unknown as { callforest: Handle }).callforest.picture()!.col > col,
        fitted.col,
      );
      await page.click("#zoom-detail");
      await page.waitForFunction(() => (window as unknown as { callforest: Handle }).callforest.picture()!.labels);
    } finally {
      await page.close();
      await view.close();
    }
  });
});

describe("zoom, lanes, find and selection", () => {
  it("zooms: the buttons change the scale around the middle, 1:1 shows boxes with ids, Fit goes back", async () => {
    const page = await openPage(bigFile);
    const fitted = await picture(page);
    await page.click("#zoom-in");
    const zoomed = await picture(page);
    expect(zoomed.col).toBeCloseTo(fitted.col * 1.6, 5);
    expect(zoomed.width).toBeGreaterThan(fitted.width);
    await page.click("#zoom-detail");
    const detail = await picture(page);
    expect([detail.col, detail.labels]).toEqual([88, true]);
    // only what is on screen (and a screen around it) is drawn: far fewer boxes than calls
    const drawn = await page.$$eval("#svg-host g.cf-call", (gs) => gs.length);
    expect(drawn).toBeGreaterThan(0);
    expect(drawn).toBeLessThan(big.calls.length / 2);
    // boxes at 1:1 carry their ids; the keys zoom too (the picture has the focus)
    expect(await page.$$eval("#svg-host g.cf-call text", (ts) => ts.length)).toBeGreaterThan(0);
    await page.focus("#svg-host");
    await page.keyboard.press("-");
    expect((await picture(page)).col).toBeCloseTo(88 / 1.6, 5);
    await page.keyboard.press("0");
    expect((await picture(page)).col).toBe(fitted.col);
    // scrolling at 1:1 draws the calls that come into view
    await page.click("#zoom-detail");
    await page.$eval("#svg-host", (h) => (h.scrollLeft = h.scrollWidth - h.clientWidth));
    await page.waitForFunction(() =>
      Array.from(document.querySelectorAll("#svg-host g.cf-call")).some(
        (g) => Number(g.getAttribute("data-index")) > 950,
      ),
    );
    await page.close();
  });

  it(
    "collapses a lane with its subagents: their calls are " + "no longer drawn as calls, and expand brings them back",
    async () => {
      const page = await openPage(bigFile);
      const plan = cf.plan(big);
      const leader = plan.agents[0].id;
      const leaderCalls = plan.forest.filter((c) => c.agent === leader).map((c) => String(c.index));
      // (lanes far below the box are not drawn yet: only what is on screen and a screen around it)
      const before = await page.$$eval("#svg-host g.cf-call", (gs) => gs.length);
      expect(before).toBeGreaterThan(big.calls.length / 2);
      await page.click(`#svg-host .lane-toggle[data-agent="${leader}"]`);
      const state = await picture(page);
      // the leader's lane holds every agent (they all descend from it) and is collapsed
      expect(state.lanes.map((l) => [l.agent, l.collapsed])).toEqual([[leader, true]]);
      expect(await page.$$eval("#svg-host g.cf-call", (gs) => gs.length)).toBe(0);
      expect(await page.$$eval("#svg-host .cf-tick", (ts) => ts.length)).toBe(big.calls.length);
      expect(await page.textContent("#svg-host .lane-tag")).toMatch(
        new RegExp(`^▸${leader} \\+\\d+ · ${big.calls.length} calls$`),
      );
      await page.click(`#svg-host .lane-toggle[data-agent="${leader}"]`);
      expect(await page.$$eval("#svg-host g.cf-call", (gs) => gs.length)).toBe(before);
      // "Collapse subagents" folds each top-level agent's subagents; a subagent's own toggle folds only its lane
      const sub = plan.agents.find((a) => a.parent === leader)!.id;
      const subCalls = plan.forest.filter((c) => c.agent === sub).map((c) => String(c.index));
      await page.click(`#svg-host .lane-toggle[data-agent="${sub}"]`);
      const drawnIndexes = await page.$$eval("#svg-host g.cf-call", (gs) =>
        gs.map((g) => g.getAttribute("data-index")),
      );
      expect(drawnIndexes.filter((i) => subCalls.includes(i!))).toEqual([]);
      expect(drawnIndexes.filter((i) => leaderCalls.includes(i!))).toEqual(leaderCalls);
      await page.click("#collapse-all");
      expect((await picture(page)).lanes.length).toBe(1);
      await page.click("#expand-all");
      expect((await picture(page)).lanes.length).toBe(new Set(big.calls.map((c) => c.agent)).size);
      plan.release();
      await page.close();
    },
  );

  it("finds a call by id, selects it (path, children, owner row, details) and scrolls to it", async () => {
    const page = await openPage(bigFile);
    const plan = cf.plan(big);
    // a call deep in a tree, with a parent and children, far to the right
    const target = [...plan.forest]
      .reverse()
      .find((c) => c.eligible && c.parent !== null && c.children.length > 0 && c.index > 600)!;
    await page.click("#zoom-detail");
    await page.$eval("#svg-host", (h) => (h.scrollLeft = 0));
    await page.fill("#find", target.id);
    await page.press("#find", "Enter");
    const box = await callBox(page, target.index);
    const view = await visible(page);
    expect(box.x).toBeGreaterThanOrEqual(view.x);
    expect(box.x + box.width).toBeLessThanOrEqual(view.x + view.width);
    expect(
      await page.$eval(`#svg-host g.cf-call[data-index="${target.index}"]`, (g) => g.getAttribute("class")),
    ).toContain("cf-sel");
    const parent = plan.forest.find((c) => c.id === target.parent)!;
    const marked = (cls: string) =>
      page.$$eval(`#svg-host g.${cls}`, (gs) => gs.map((g) => g.getAttribute("data-call")));
    // its path to the root and its children are marked wherever they are drawn
    if ((await page.$(`#svg-host g.cf-call[data-index="${parent.index}"]`)) !== null)
      expect(await marked("cf-on-path")).toContain(parent.id);
    const drawnChildren = (await marked("cf-call")).filter((id) => target.children.includes(id!));
    expect((await marked("cf-child")).sort()).toEqual(drawnChildren.sort());
    expect(await page.$$eval("#rows-table tr.selected", (trs) => trs.map((tr) => tr.getAttribute("data-row")))).toEqual(
      [String(target.ownerRow)],
    );
    // the details say what the plan says
    const details = await page.$$eval("#details dd", (dds) =>
      Object.fromEntries(dds.map((dd) => [(dd as HTMLElement).dataset.key, dd.textContent])),
    );
    expect(details).toMatchObject({
      lengths: `${target.promptLength} prompt + ${target.generationLength} generated`,
      link: `continues ${target.parent}`,
      children: target.children.join(" "),
      owner: expect.stringMatching(new RegExp(`^row ${target.ownerRow}`)),
    });
    const row = plan.rows[target.ownerRow];
    const lps = Array.from(row.logprobs.subarray(target.promptLength, target.promptLength + target.generationLength));
    expect(details.logprobs).toContain(`sum ${lps.reduce((a, b) => a + b, 0).toFixed(3)}`);
    expect(await page.textContent("#strip-title")).toMatch(new RegExp(`^row ${target.ownerRow} · `));
    // an agent, a row, and a text that is part of many ids (Enter steps through them)
    await page.fill("#find", `row ${plan.rows.length - 1}`);
    await page.press("#find", "Enter");
    expect(await page.textContent("#strip-title")).toMatch(new RegExp(`^row ${plan.rows.length - 1} · `));
    await page.fill("#find", "all-1"); // part of call-1, call-10, …, no id of its own
    await page.press("#find", "Enter");
    expect(await page.textContent("#find-status")).toMatch(/^1 of \d+ \(Enter: next\)$/);
    await page.press("#find", "Enter");
    expect(await page.textContent("#find-status")).toMatch(/^2 of \d+/);
    await page.fill("#find", "no such thing");
    await page.press("#find", "Enter");
    expect(await page.textContent("#find-status")).toBe("no match");
    plan.release();
    await page.close();
  });

  it("find on the fitted picture zooms to boxes with ids, centres the match, its details beside it", async () => {
    const page = await openPage(bigFile);
    const plan = cf.plan(big);
    expect((await picture(page)).labels).toBe(false); // fitted: calls are marks
    const target = plan.forest.find((c) => c.eligible && c.index > 700 && c.agent !== plan.agents[0].id)!;
    await page.fill("#find", target.id);
    await page.press("#find", "Enter");
    const state = await picture(page);
    expect([state.labels, state.col]).toEqual([true, 88]); // the detail scale
    const box = await callBox(page, target.index);
    const view = await visible(page);
    expect(box.x).toBeGreaterThanOrEqual(view.x);
    expect(box.x + box.width).toBeLessThanOrEqual(view.x + view.width);
    expect(box.y).toBeGreaterThanOrEqual(view.y);
    expect(box.y + box.height).toBeLessThanOrEqual(view.y + view.height);
    // its id is drawn whole in its box
    expect(await page.$eval(`#svg-host g.cf-call[data-index="${target.index}"] text`, (t) => t.textContent)).toBe(
      target.id,
    );
    // the details sit to the right of the picture, both on screen
    const [host, details, height] = await page.evaluate(() => [
      document.getElementById("svg-host")!.getBoundingClientRect().toJSON(),
      document.getElementById("details")!.getBoundingClientRect().toJSON(),
      window.innerHeight,
    ]);
    expect(details.left).toBeGreaterThanOrEqual(host.right);
    expect(details.top).toBeLessThan(host.bottom);
    expect([host.top >= 0, details.top >= 0, details.top < height]).toEqual([true, true, true]);
    expect(await page.textContent("#details h3")).toContain(target.id);
    plan.release();
    await page.close();
  });

  it("never cuts a label mid-number: collapsed lanes keep their counts, boxes their whole ids", async () => {
    const page = await openPage(bigFile);
    const plan = cf.plan(big);
    await page.click("#collapse-all");
    const tags = await page.$$eval("#svg-host .lane-tag", (ts) => ts.map((t) => t.textContent!));
    const numbers = new Set(
      plan.agents.flatMap((a) => a.id.match(/\d+/g) ?? []).concat(Array.from({ length: 1001 }, (_, i) => String(i))),
    );
    for (const tag of tags) {
      expect(tag).toMatch(/ · \d+( calls?)?$/);
      for (const number of tag.match(/\d+/g) ?? []) expect(numbers.has(number), tag).toBe(true);
    }
    // at a zoom where boxes are narrow, an id either fits whole or is left out
    await page.click("#expand-all");
    await page.click("#zoom-detail");
    await page.click("#zoom-out");
    const drawn = await page.$$eval("#svg-host g.cf-call", (gs) =>
      gs.map((g) => [g.getAttribute("data-call")!, g.querySelector("text")?.textContent ?? ""]),
    );
    expect(drawn.filter(([, text]) => text !== "").length).toBeGreaterThan(0);
    for (const [id, text] of drawn) {
      if (text === id || text === "") continue;
      const [head, tail] = text.split("…");
      expect(id.startsWith(head) && id.endsWith(tail), `${id} drawn as ${text}`).toBe(true);
      const runs = id.match(/\d+/g) ?? [];
      for (const number of text.match(/\d+/g) ?? []) expect(runs, `${id} drawn as ${text}`).toContain(number);
    }
    plan.release();
    await page.close();
  });

  it("selects a call folded in a collapsed lane by expanding it", async () => {
    const page = await openPage(bigFile);
    const plan = cf.plan(big);
    const leader = plan.agents[0].id;
    const deep = plan.forest.find((c) => c.agent !== leader && c.eligible)!;
    await page.click(`#svg-host .lane-toggle[data-agent="${leader}"]`);
    await page.fill("#find", deep.id);
    await page.press("#find", "Enter");
    expect((await callBox(page, deep.index)).folded).toBe(false);
    expect(
      await page.$eval(`#svg-host g.cf-call[data-index="${deep.index}"]`, (g) => g.getAttribute("class")),
    ).toContain("cf-sel");
    plan.release();
    await page.close();
  });
});

describe("the packed view", () => {
  it("shows the worked example's tree 0 segment by segment (SPEC's table) and what packing saves", async () => {
    const page = await openPage(EXAMPLE_FILE);
    await page.check("#packed-toggle");
    expect(await page.isHidden("#svg-host")).toBe(true);
    const segments = await page.$$eval('#packed-host g.cf-segment[data-tree="0"]', (gs) =>
      gs.map((g) =>
        ["call", "parent", "start", "length", "end", "rows"].map((k) => g.getAttribute(`data-${k}`)).join(" "),
      ),
    );
    // SPEC's table, then how many rows hold each segment (the system prompt: C9's, C10's, C12's).
    const rows = [3, 2, 2, 2, 1, 1, 1, 1, 1];
    expect(segments).toEqual(TREE0_LINES.map((line, i) => `${line} ${rows[i]}`));
    const example = JSON.parse(readFileSync(EXAMPLE_FILE, "utf8")) as Rollout;
    const plan = cf.plan(example, { trees: true });
    const s = savingsOf(plan);
    // attention: a packed token sees exactly the keys k ≤ q < end(segment(k)); count them the slow way
    let brute = 0;
    for (const tree of plan.trees) {
      const segOf = new Int32Array(tree.numTokens);
      tree.segments.forEach((seg, i) => segOf.fill(i, seg.start, seg.start + seg.length));
      for (let q = 0; q < tree.numTokens; q++)
        for (let k = 0; k <= q; k++) if (q < tree.segments[segOf[k]].end) brute++;
    }
    expect(s.packedKeys).toBe(brute);
    expect([s.rowTokens, s.packedTokens]).toEqual([plan.report.row_tokens, plan.report.trie_tokens]);
    const line = await page.textContent("#packed-host svg");
    expect(line).toContain(
      `tokens: rows ${s.rowTokens} → packed ${s.packedTokens} (${(s.rowTokens / s.packedTokens).toFixed(2)}× fewer)`,
    );
    expect(await page.textContent("#savings")).toContain(
      `attention (keys per token, causal): rows ${s.rowKeys} → packed ${s.packedKeys}`,
    );
    expect(await page.textContent('#packed-host g.cf-tree[data-tree="0"]')).toContain(
      "tree 0 · roots C1 C11 · 30 tokens once (its 3 rows hold 47, 1.57×)",
    );
    await page.uncheck("#packed-toggle");
    expect(await page.isHidden("#svg-host")).toBe(false);
    plan.release();
    await page.close();
  });
});

describe("decoded text", () => {
  /** The agent-demo's episode (`callforest agent-demo`'s defaults, fewer turns): its tokens are o200k_harmony's. */
  async function agentDemoRollout(): Promise<Rollout> {
    const { createModelClient, recencyPolicy, runAgent, turnChunked } = await import("../../src/compaction/index.js");
    const { createGridWorld, startModelServer } = await import("../../src/compaction/testbed/index.js");
    const server = await startModelServer({ seed: 0 });
    try {
      const model = createModelClient({
        baseUrl: server.url,
        model: server.model,
        imagePlaceholderToken: server.imagePlaceholderToken,
      });
      const policy = recencyPolicy({
        images: { keepLastGroups: 2, protectInitialContext: true },
        reasoning: { keepLastBlocks: 2, keepFirstBlock: false },
      });
      const result = await runAgent({
        model,
        environment: createGridWorld({ seed: 0 }),
        compaction: { policy, schedule: turnChunked(3) },
        maxTurns: 6,
        rolloutId: "agent-demo-0",
      });
      return result.rollout;
    } finally {
      await server.close();
    }
  }

  it(
    "view --tokenizer o200k_harmony: the details and the strip show the " +
      "agent-demo's text as gpt-tokenizer decodes it, images as one chip",
    async () => {
      const { decode } = await import("gpt-tokenizer/encoding/o200k_harmony");
      const rollout = await agentDemoRollout();
      const file = join(dir, "agent-demo.json");
      writeFileSync(file, asJson(rollout));
      const view = await startViewServer({
        page: join(dir, "web/index.html"),
        input: file,
        port: 0,
        tokenizer: "o200k_harmony",
      });
      const page = await context.newPage();
      try {
        expect(view.url).toMatch(/&?tokenizer=o200k_harmony$/);
        await page.goto(view.url);
        await page.waitForSelector("body[data-tokenizer=o200k_harmony]");
        const plan = cf.plan(JSON.parse(readFileSync(file, "utf8")));
        for (const call of plan.forest.filter((c) => c.eligible)) {
          await page.fill("#find", call.id);
          await page.press("#find", "Enter");
          const row = plan.rows[call.ownerRow];
          const generated = Array.from(
            row.tokenIds.subarray(call.promptLength, call.promptLength + call.generationLength),
          );
          expect(await page.textContent('#details pre[data-key="generated-text"]')).toBe(decode(generated));
          const parent = plan.forest.find((c) => c.id === call.parent);
          const from = parent === undefined ? 0 : parent.promptLength + parent.generationLength;
          expect(await page.textContent('#details pre[data-key="prompt-text"]')).toBe(
            decode(Array.from(row.tokenIds.subarray(from, call.promptLength))),
          );
        }
        // The strip of the last row: every token's text (special tokens marked), each image one chip.
        const row = plan.rows[plan.rows.length - 1];
        await page.click(`#rows-table tr[data-row="${row.index}"]`);
        const strip = await page.$$eval("#strip > .tok, #strip > .image-chip", (cells) =>
          cells.map((c) =>
            c.classList.contains("image-chip")
              ? { chip: Number((c as HTMLElement).dataset.length), start: Number((c as HTMLElement).dataset.start) }
              : { text: (c as HTMLElement).dataset.text!, special: c.classList.contains("special") },
          ),
        );
        const chips = strip.filter((c) => "chip" in c) as { chip: number; start: number }[];
        expect(chips.map((c) => [c.start, c.chip])).toEqual(row.media.map((m) => [m.offset, m.length]));
        const ids = Array.from(row.tokenIds);
        const outside = ids.filter((_, i) => !row.media.some((m) => i >= m.offset && i < m.offset + m.length));
        const texts = strip.filter((c) => "text" in c) as { text: string; special: boolean }[];
        expect(texts.length).toBe(outside.length);
        // each token alone, where its bytes are whole characters, is what the tokenizer decodes it to
        texts.forEach((cell, i) => {
          const own = decode([outside[i]]);
          if (!own.includes("\uFFFD") && !cell.text.startsWith("‹")) expect([i, cell.text]).toEqual([i, own]);
        });
        expect(texts.filter((c) => c.special).map((c) => c.text)).toContain("<|start|>");
        expect(rollout.calls.some((c) => (c.media ?? []).length > 0)).toBe(true);
        plan.release();
      } finally {
        await page.close();
        await view.close();
      }
    },
  );

  it("a Hugging Face tokenizer.json opened in the page (from disk) decodes as tokenizers.js does", async () => {
    const { Tokenizer } = await import("@huggingface/tokenizers");
    const json = byteLevelTokenizer();
    const tokenizerFile = join(dir, "tokenizer.json");
    writeFileSync(tokenizerFile, JSON.stringify(json));
    const library = new Tokenizer(json, {});
    const said = "Héllo wörld 🙂 hello";
    const generated = [...library.encode(said, { add_special_tokens: false }).ids, 300];
    const rollout = {
      rollout_id: "hf",
      reward: 1,
      calls: [
        {
          id: "c1",
          prompt_token_ids: [301, 72, 105],
          generation_token_ids: generated,
          generation_log_probs: generated.map(() => -0.5),
        },
      ],
    };
    const file = join(dir, "hf.json");
    writeFileSync(file, JSON.stringify(rollout));
    const page = await openPage(file);
    await page.setInputFiles("#tokenizer-file", tokenizerFile);
    await page.waitForSelector("body[data-tokenizer='tokenizer.json']");
    await page.fill("#find", "c1");
    await page.press("#find", "Enter");
    expect(await page.textContent('#details pre[data-key="generated-text"]')).toBe(
      library.decode(generated, { skip_special_tokens: false, clean_up_tokenization_spaces: false }),
    );
    expect(await page.textContent('#details pre[data-key="generated-text"]')).toBe(`${said}<|end|>`);
    const cells = await page.$$eval("#strip > .tok", (cs) =>
      cs.map((c) => ({ text: (c as HTMLElement).dataset.text, special: c.classList.contains("special") })),
    );
    expect(cells[0]).toEqual({ text: "<|start|>", special: true });
    expect(cells.at(-1)).toEqual({ text: "<|end|>", special: true });
    expect(cells.slice(1, 3).map((c) => c.text)).toEqual(["H", "i"]);
    await page.close();
  });
});
