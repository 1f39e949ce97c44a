// The page (web/), built as `npm run build` builds it, in real Chromium: served by
// `callforest view`'s server with the worked example preloaded, and opened straight from disk.
// One browser for the file; the page is built once into a temporary directory.
import { CHROMIUM_LAUNCH, NO_DEADLINE, buildPage } from "../support/chromium.js";
import { execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { decode } from "fast-png";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { init, reportToJson, rowToJson } from "../../src/index.js";
import {
  DEFAULT_PORT,
  isOwnHost,
  startViewServer,
  type ViewServer,
  type ViewServerOptions,
} from "../../src/cli/commands/view.js";
import { generateRollout } from "../../bench/generate.js";
import { readRollouts } from "../../src/ingest/read.js";
import { tokenDirectory } from "../../src/files/tokens-dir.js";
import { OBSERVED_DIR, OBSERVED_ROWS, OBSERVED_TOKENS } from "../support/fixtures.js";
import { MEDIA_CUT_REASON } from "../../src/draw/media.js";
import { FROM_OPTIONS } from "../../src/formats/index.js";
import { usePlan } from "../../src/plan-imported.js";
import { SWAP_FILE } from "../support/media-rollouts.js";
import type { Rollout } from "../../src/types.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const EXAMPLE_FILE = join(ROOT, "examples/login-bug.json");
const example = JSON.parse(readFileSync(EXAMPLE_FILE, "utf8")) as Rollout;

/** What web/main.ts exposes on window for tests and the console. */
interface PageWindow {
  callforest: { backend: string; rowsJsonl(): string; reportJson(): string };
}

let dir: string;
let view: ViewServer;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const requests: string[] = [];
let loads = 0;

/** Waits until the page has opened one more file. */
async function nextLoad(): Promise<void> {
  loads++;
  await page.waitForSelector(`body[data-loads="${loads}"]`);
}

/** A `view` URL without its query or last slash: where the server's paths start (after the per-run secret). */
function baseOf(url: string): string {
  return url.split("?")[0].replace(/\/$/, "");
}

function asJson(rollout: Rollout): string {
  return JSON.stringify(rollout, (_k, v: unknown) =>
    ArrayBuffer.isView(v) ? Array.from(v as unknown as ArrayLike<number>) : v,
  );
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "callforest-page-"));
  buildPage(dir);
  view = await startViewServer({ page: join(dir, "web/index.html"), input: EXAMPLE_FILE, port: 0 });
  browser = await chromium.launch(CHROMIUM_LAUNCH);
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  context.setDefaultTimeout(NO_DEADLINE);
  page = await context.newPage();
  page.on("request", (request) => requests.push(request.url()));
});
afterAll(async () => {
  await browser?.close();
  await view?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The rows table as the DOM shows it: leaf and the path's calls split by their class. */
function rowsInDom(): Promise<{ leaf: string; trained: string[]; context: string[] }[]> {
  return page.$$eval("#rows-table tr[data-row]", (trs) =>
    trs.map((tr) => ({
      leaf: tr.children[1].textContent ?? "",
      trained: Array.from(tr.querySelectorAll(".path .call.trained"), (e) => e.textContent ?? ""),
      context: Array.from(tr.querySelectorAll(".path .call.context"), (e) => e.textContent ?? ""),
    })),
  );
}

describe("the page", () => {
  it("opens the file `callforest view` preloads and shows the worked example's five rows", async () => {
    expect(view.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/[A-Za-z0-9_-]{24}\/\?input=input%2Flogin-bug\.json$/);
    await page.goto(view.url);
    await nextLoad();
    expect(await page.textContent("#backend")).toMatch(/^core: WebAssembly/);
    // the first row's tokens are shown at once; one rollout needs no selector
    expect(await page.textContent("#strip-title")).toMatch(/^row 0 · leaf C4 · /);
    expect(await page.isHidden("#rollouts")).toBe(true);
    expect(await page.evaluate(() => (window as unknown as PageWindow).callforest.backend)).toBe("wasm");
    expect(await rowsInDom()).toEqual([
      { leaf: "C4", trained: ["C2", "C4"], context: [] },
      { leaf: "C6", trained: ["C5", "C6"], context: [] },
      { leaf: "C9", trained: ["C8", "C9"], context: ["C1", "C3", "C7"] },
      { leaf: "C10", trained: ["C1", "C3", "C7", "C10"], context: [] },
      { leaf: "C12", trained: ["C11", "C12"], context: [] },
    ]);
    // the picture: 12 calls, the cut before C11, and the same row paths
    expect(await page.$$eval("#svg-host g.cf-call", (gs) => gs.map((g) => g.getAttribute("data-call")))).toEqual(
      example.calls.map((c) => c.id),
    );
    expect(await page.$$eval("#svg-host .cf-cut-mark", (gs) => gs.map((g) => g.getAttribute("data-after")))).toEqual([
      "C11",
    ]);
    expect(
      await page.$$eval('#svg-host g.cf-row[data-row="2"] rect.cf-context', (rs) =>
        rs.map((r) => r.getAttribute("data-call")),
      ),
    ).toEqual(["C1", "C3", "C7"]);
    // the report
    const counts = await page.$$eval("#report dl.counts > div", (ds) =>
      Object.fromEntries(ds.map((d) => [d.getAttribute("data-key"), d.querySelector("dd")!.textContent])),
    );
    expect(counts).toMatchObject({
      calls: "12",
      roots: "4",
      leaves: "5",
      rows: "5",
      captured_tokens: "21",
      trained_tokens: "21",
    });
  });

  it("shows a selected row's tokens: trained spans highlighted, context dim, with their logprobs", async () => {
    await page.click('#rows-table tr[data-row="2"]');
    expect(await page.textContent("#strip-title")).toMatch(/^row 2 · leaf C9 · 19 tokens, \d+ trained/);
    const strip = await page.$$eval("#strip .tok", (cells) =>
      cells.map((c) => ({
        kind: c.className.replace("tok ", ""),
        id: Number(c.querySelector("b")!.textContent),
        lp: c.querySelector("i")?.textContent ?? null,
      })),
    );
    const cf = await init();
    const plan = cf.plan(example);
    const row = plan.rows[2];
    expect(strip.map((c) => c.id)).toEqual(Array.from(row.tokenIds));
    const byId = new Map(plan.forest.map((c) => [c.id, c]));
    const kindAt = (i: number) => {
      for (const id of row.calls) {
        const c = byId.get(id)!;
        if (i >= c.promptLength && i < c.promptLength + c.generationLength)
          return row.trained.includes(id) ? "trained" : "context";
      }
      return "prompt";
    };
    expect(strip.map((c) => c.kind)).toEqual(strip.map((_, i) => kindAt(i)));
    const trained = byId.get("C8")!.generationLength + byId.get("C9")!.generationLength;
    expect(strip.filter((c) => c.kind === "trained").length).toBe(trained);
    // the title counts the loss mask's bits in SPEC's order (least significant first)
    expect(await page.textContent("#strip-title")).toBe(
      `row 2 · leaf C9 · ${row.numTokens} tokens, ${trained} trained · reward ${row.reward}`,
    );
    expect(strip.map((c) => c.lp)).toEqual(
      Array.from(row.logprobs, (lp, i) => (kindAt(i) === "prompt" ? null : lp.toFixed(2))),
    );
    // trained tokens are drawn differently from context ones
    const colours = await page.$$eval("#strip .tok.trained, #strip .tok.context", (cells) => [
      ...new Set(cells.map((c) => getComputedStyle(c).backgroundColor + c.className)),
    ]);
    expect(new Set(colours.map((c) => c.replace(/tok.*/, ""))).size).toBe(2);
    plan.release();
  });

  it(
    "marks a media cut in the picture and each row's media " + "placeholders in the token strip (screenshot-swap)",
    async () => {
      await page.setInputFiles("#file", SWAP_FILE);
      await nextLoad();
      expect(await rowsInDom()).toEqual([
        { leaf: "C2", trained: ["C1", "C2"], context: [] },
        { leaf: "C4", trained: ["C3", "C4"], context: [] },
      ]);
      // C3 becomes a root because its screenshot changed: a media cut, with the reason in its tooltip
      const cuts = await page.$$eval("#svg-host .cf-cut-mark", (gs) =>
        gs.map((g) => ({
          after: g.getAttribute("data-after"),
          reason: g.getAttribute("data-reason"),
          title: g.querySelector("title")!.textContent,
        })),
      );
      expect(cuts).toEqual([{ after: "C3", reason: "media", title: expect.stringContaining(MEDIA_CUT_REASON) }]);
      expect(
        await page.$$eval("#svg-host g.cf-is-media-mismatch", (gs) => gs.map((g) => g.getAttribute("data-call"))),
      ).toEqual(["C3"]);
      expect(await page.$$eval("#report .diagnostics li", (lis) => lis.map((li) => li.textContent))).toEqual([
        "media_mismatch · C3",
      ]);
      // row 0's placeholders (prompt positions 3–5) are outlined after a tag naming the old screenshot
      const strip = () =>
        page.$$eval("#strip", ([host]) => ({
          tags: Array.from(host.querySelectorAll(".media-tag"), (t) => ({
            text: t.textContent,
            title: (t as HTMLElement).title,
          })),
          media: Array.from(host.querySelectorAll(".tok"), (c, i) => (c.classList.contains("media") ? i : -1)).filter(
            (i) => i >= 0,
          ),
          titles: Array.from(host.querySelectorAll(".tok.media"), (c) => (c as HTMLElement).title),
          outline: getComputedStyle(host.querySelector(".tok.media")!).outlineStyle,
          plain: getComputedStyle(host.querySelector(".tok:not(.media)")!).outlineStyle,
        }));
      let shown = await strip();
      expect(shown.tags).toEqual([{ text: "sha256:aaaa", title: "media sha256:aaaa · 3 placeholder tokens from #3" }]);
      expect(shown.media).toEqual([3, 4, 5]);
      expect(shown.titles[0]).toMatch(/^#3 token 901 · prompt · loss mask 0 · media sha256:aaaa, placeholder 1 of 3$/);
      expect([shown.outline, shown.plain]).toEqual(["dashed", "none"]);
      await page.click('#rows-table tr[data-row="1"]');
      shown = await strip();
      expect(shown.tags.map((t) => t.text)).toEqual(["sha256:bbbb"]);
      expect(shown.media).toEqual([3, 4, 5]);
    },
  );

  it("keeps a media id as text in the strip and the picture (markup in an id stays inert)", async () => {
    const swap = JSON.parse(readFileSync(SWAP_FILE, "utf8")) as Rollout;
    const nasty = `<img src=x onerror="alert(1)">&amp;"'`;
    for (const call of swap.calls.slice(2)) call.media = [{ id: nasty, offset: 3, length: 3 }];
    await page.evaluate(
      (text) =>
        (window as unknown as { callforest: { openText(n: string, t: string): void } }).callforest.openText(
          "nasty.jsonl",
          text,
        ),
      JSON.stringify(swap) + "\n",
    );
    await nextLoad();
    expect(
      await page.$$eval("#svg-host g.cf-is-media-mismatch", (gs) => gs.map((g) => g.getAttribute("data-call"))),
    ).toEqual(["C3"]);
    expect(await page.$$eval('#svg-host g[data-call="C3"] title', (ts) => ts[0].textContent)).toContain(
      `media <img src=x o…amp;"'@3+3`,
    );
    await page.click('#rows-table tr[data-row="1"]');
    expect(
      await page.$$eval("#strip .media-tag", (ts) => ts.map((t) => [t.textContent, (t as HTMLElement).title])),
    ).toEqual([[`<img src=x o…amp;"'`, `media ${nasty} · 3 placeholder tokens from #3`]]);
    expect(await page.$$eval("#strip img, #svg-host img", (es) => es.length)).toBe(0);
  });

  it("plans a generated 300-call rollout exactly as Node does (token ids, masks, logprobs)", async () => {
    const rollout = generateRollout({ calls: 300, seed: 42 });
    const file = join(dir, "generated.json");
    writeFileSync(file, asJson(rollout));
    await page.setInputFiles("#file", file);
    await nextLoad();
    const cf = await init();
    // The page lays out packed trees too (its report has trie_tokens), and names the input's line.
    const plan = cf.plan(JSON.parse(readFileSync(file, "utf8")), { trees: true, line: 1 });
    const expected = plan.rows.map((row) => rowToJson(row, "bits")).join("\n");
    expect(plan.rows.length).toBeGreaterThan(20);
    const inBrowser = await page.evaluate(() => (window as unknown as PageWindow).callforest.rowsJsonl());
    expect(inBrowser.length).toBe(expected.length);
    expect(inBrowser === expected).toBe(true);
    expect(await page.evaluate(() => (window as unknown as PageWindow).callforest.reportJson())).toBe(
      reportToJson(plan.report),
    );
    expect(await page.$$eval("#svg-host g.cf-call", (gs) => gs.length)).toBe(rollout.calls.length);
    plan.release();
  });

  it(
    "opens a gym-observed capture selected together with " + "its token file, as the CLI reads it with --tokens",
    async () => {
      await page.setInputFiles("#file", [OBSERVED_ROWS, OBSERVED_TOKENS]);
      await nextLoad();
      const cf = await init();
      const items = [];
      for await (const item of readRollouts([OBSERVED_ROWS], { tokens: tokenDirectory(OBSERVED_DIR) }))
        items.push(item);
      expect(items[0].result.ok).toBe(true);
      const plan = cf.plan((items[0].result as { rollout: Rollout }).rollout);
      const expected = plan.rows.map((row) => rowToJson(row, "bits")).join("\n");
      expect(plan.rows.length).toBeGreaterThan(1);
      expect(await page.evaluate(() => (window as unknown as PageWindow).callforest.rowsJsonl())).toBe(expected);
      plan.release();
      // The rollout file alone: the rejection names the token file it needs.
      await page.setInputFiles("#file", OBSERVED_ROWS);
      await nextLoad();
      expect(await page.textContent("#report")).toContain(
        'no token entries for rollout "7-2": 7-2.tokens.jsonl was not ' +
          "opened with the rollout file (select or drop them together)",
      );
      // Token files alone: a one-line status, nothing opened.
      await page.setInputFiles("#file", OBSERVED_TOKENS);
      await page.waitForSelector("#status.error");
      expect(await page.textContent("#status")).toBe(
        "open a rollout file too (token files only give a gym-observed capture its tokens)",
      );
    },
  );

  it("reports the first rollout of a capture as the CLI does, recorded_parent_differs included", async () => {
    const dir = join(ROOT, "examples", "gym-capture");
    const rows = join(dir, "rollouts.jsonl");
    await page.setInputFiles("#file", [rows, join(dir, "12-0.tokens.jsonl"), join(dir, "0-0.tokens.jsonl")]);
    await nextLoad();
    const cf = await init();
    let expected = "";
    for await (const item of readRollouts([rows], { tokens: tokenDirectory(dir) })) {
      if (!item.result.ok) throw new Error("the example capture does not import");
      // As `rows --layout packed` reports it: the page lays out packed trees too.
      expected = usePlan(cf, item.result, item.line, (_plan, report) => reportToJson(report), { trees: true });
      break;
    }
    expect(expected).toContain('"code":"recorded_parent_differs"');
    // The page knows the token files by name only.
    expect(await page.evaluate(() => (window as unknown as PageWindow).callforest.reportJson())).toBe(
      expected.replaceAll(`${dir}/`, ""),
    );
  });

  it("shows a rejected rollout's reason and the call at fault", async () => {
    const bad = structuredClone(example);
    bad.rollout_id = "bad";
    bad.calls[4].generation_log_probs = [-0.5];
    const file = join(dir, "mixed.jsonl");
    writeFileSync(file, `${JSON.stringify(example)}\n\n${JSON.stringify(bad)}\n{oops\n`);
    await page.setInputFiles("#file", file);
    await nextLoad();
    expect(await page.textContent("#status")).toBe("mixed.jsonl: 3 rollouts, 2 rejected");
    expect(await page.$$eval("#rollout-select option", (os) => os.map((o) => o.textContent))).toEqual([
      "mixed.jsonl:1 · login-bug · 5 rows",
      "mixed.jsonl:3 · bad · rejected (logprob_length_mismatch)",
      "mixed.jsonl:4 · (no id) · rejected (malformed_json)",
    ]);
    await page.selectOption("#rollout-select", "1");
    expect(await page.textContent("#report .rejected .reason")).toBe("logprob_length_mismatch");
    expect(await page.textContent("#report .rejected .detail")).toBe(
      'call "C5" (calls[4]): 1 generation_log_probs for 2 generated tokens',
    );
    expect(await page.textContent("#report .rejected .fault")).toBe('calls[4] "C5" · agent A');
    expect(await page.isHidden("#rows-section")).toBe(true);
    expect(await page.textContent("#svg-host")).toContain("rejected (logprob_length_mismatch)");
    await page.selectOption("#rollout-select", "0");
    // The picture comes first; the rows table follows on a later frame.
    await page.waitForFunction(() => document.querySelectorAll("#rows-table tr[data-row]").length > 0);
    expect((await rowsInDom()).length).toBe(5);
  });

  it("reads a file named neither .json nor .jsonl by its first line, as the CLI does", async () => {
    const file = join(dir, "rollouts.txt");
    writeFileSync(file, `\n${JSON.stringify([example, { ...example, rollout_id: "second" }], null, 2)}\n`);
    await page.setInputFiles("#file", file);
    await nextLoad();
    expect(await page.textContent("#status")).toBe("rollouts.txt: 2 rollouts");
    expect(await page.$$eval("#rollout-select option", (os) => os.map((o) => o.textContent))).toEqual([
      "rollouts.txt[0] · login-bug · 5 rows",
      "rollouts.txt[1] · second · 5 rows",
    ]);
    expect(await page.isHidden("#rollouts")).toBe(false);
  });

  it(
    "lists more rollouts than one call's arguments can hold " + "(no spreading), and a failed open changes nothing",
    async () => {
      const many = Array.from({ length: 150_000 }, () => "[]").join("\n") + "\n";
      await page.evaluate(
        (text) =>
          (window as unknown as { callforest: { openText(n: string, t: string): void } }).callforest.openText(
            "many.jsonl",
            text,
          ),
        many,
      );
      await nextLoad();
      expect(await page.textContent("#status")).toBe("many.jsonl: 150000 rollouts, 150000 rejected");
      expect(await page.$eval("#rollout-select", (s) => (s as HTMLSelectElement).options.length)).toBe(150_000);
      await page.click("#example");
      await nextLoad();
      // A file that cannot be read leaves the open one as it was, still clickable.
      const failed = await page.evaluate(
        async (capture) => {
          try {
            const tokens = {
              describe: () => "",
              load: () => {
                throw new Error("boom");
              },
            }; // a token source that breaks
            await (
              window as unknown as { callforest: { openText(n: string, t: string, r: unknown): Promise<void> } }
            ).callforest.openText("x.jsonl", capture, { tokens });
            return "";
          } catch (error) {
            return (error as Error).message;
          }
        },
        readFileSync(OBSERVED_ROWS, "utf8"),
      );
      expect(failed).toBe("boom");
      await page.click('#rows-table tr[data-row="1"]');
      expect(await page.textContent("#strip-title")).toMatch(/^row 1 · leaf C6/);
    },
  );

  it("plans a big file in slices, and a file opened meanwhile wins", async () => {
    const many = Array.from({ length: 150_000 }, () => "[]").join("\n") + "\n";
    const status = await page.evaluate(
      async ([big, one]) => {
        const handle = (window as unknown as { callforest: { openText(n: string, t: string): Promise<void> } })
          .callforest;
        const statuses: string[] = [];
        const watch = new MutationObserver(() => statuses.push(document.getElementById("status")!.textContent ?? ""));
        watch.observe(document.getElementById("status")!, { childList: true, characterData: true, subtree: true });
        const first = handle.openText("many.jsonl", big); // yields to the browser while it plans
        await handle.openText("one.jsonl", one);
        await first;
        watch.disconnect();
        return statuses;
      },
      [many, JSON.stringify(example) + "\n"],
    );
    await nextLoad();
    expect(status.some((s) => /^many\.jsonl: planning… \d+ rollouts, \d+%$/.test(s))).toBe(true);
    expect(status.at(-1)).toBe("one.jsonl: 1 rollout");
    expect(await page.textContent("#status")).toBe("one.jsonl: 1 rollout");
    expect((await rowsInDom()).map((r) => r.leaf)).toEqual(["C4", "C6", "C9", "C10", "C12"]);
  });

  it("shows the row of a clicked call whose id the SVG had to alter (a control character, a CR)", async () => {
    const odd = structuredClone(example);
    odd.rollout_id = "odd";
    odd.calls[5].id = "C6\u0001\r"; // C6, the leaf of row 1
    await page.evaluate(
      (text) =>
        (window as unknown as { callforest: { openText(n: string, t: string): void } }).callforest.openText(
          "odd.jsonl",
          text,
        ),
      JSON.stringify(odd) + "\n",
    );
    await nextLoad();
    await page.click('#rows-table tr[data-row="3"]');
    await page.click('#svg-host g.cf-call[data-index="5"] rect');
    expect(await page.textContent("#strip-title")).toMatch(/^row 1 · leaf C6/);
    // a row's path beneath the calls shows that row
    await page.click('#svg-host g.cf-row[data-row="3"] rect.cf-trained >> nth=0');
    expect(await page.textContent("#strip-title")).toMatch(/^row 3 · leaf C10/);
  });

  it("opens a file dropped on the page", async () => {
    const text = JSON.stringify({ ...example, rollout_id: "dropped" });
    const transfer = await page.evaluateHandle((body) => {
      const data = new DataTransfer();
      data.items.add(new File([body], "dropped.jsonl"));
      return data;
    }, text);
    await page.dispatchEvent("main", "drop", { dataTransfer: transfer });
    await nextLoad();
    expect(await page.textContent("#status")).toBe("dropped.jsonl: 1 rollout");
    expect(await page.textContent("#report h2")).toBe("rollout dropped (line 1)");
    expect((await rowsInDom()).map((r) => r.leaf)).toEqual(["C4", "C6", "C9", "C10", "C12"]);
  });

  it("a file without rollouts says so and takes the previous file's views away", async () => {
    await page.evaluate(() =>
      (window as unknown as { callforest: { openText(n: string, t: string): void } }).callforest.openText(
        "empty.jsonl",
        "\n\n",
      ),
    );
    await nextLoad();
    expect(await page.textContent("#status.error")).toBe("empty.jsonl: no rollouts in this file");
    expect(await page.isHidden("#views")).toBe(true);
    expect(await page.$$eval("#svg-host *", (es) => es.length)).toBe(0);
  });

  it("renders a picture that is not blank", async () => {
    await page.setInputFiles("#file", EXAMPLE_FILE);
    await nextLoad();
    const png = decode(await page.screenshot());
    const channels = png.channels;
    const data = png.data as Uint8Array;
    let sum = 0;
    let sumSq = 0;
    const colours = new Set<number>();
    const n = png.width * png.height;
    for (let p = 0; p < n; p++) {
      const i = p * channels;
      const lum = 0.299 * data[i] + 0.587 * data[i + 1] + 0.114 * data[i + 2];
      sum += lum;
      sumSq += lum * lum;
      colours.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
    }
    const variance = sumSq / n - (sum / n) ** 2;
    expect(variance).toBeGreaterThan(100);
    expect(colours.size).toBeGreaterThan(50);
  });

  it("downloads the picture as `callforest draw` writes it", async () => {
    await page.click("#example");
    await nextLoad();
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#download-svg")]);
    expect(download.suggestedFilename()).toBe("login-bug.svg");
    const saved = readFileSync(await download.path(), "utf8");
    expect(saved).toBe(readFileSync(join(ROOT, "test/__snapshots__/login-bug.svg"), "utf8"));
    // an id that is no file name is made one as `draw` makes it
    const odd = JSON.stringify({ ...example, rollout_id: "a/b c" }) + "\n";
    await page.evaluate(
      (text) =>
        (window as unknown as { callforest: { openText(n: string, t: string): void } }).callforest.openText(
          "odd.jsonl",
          text,
        ),
      odd,
    );
    await nextLoad();
    const [renamed] = await Promise.all([page.waitForEvent("download"), page.click("#download-svg")]);
    expect(renamed.suggestedFilename()).toBe("a_b_c.svg");
  });

  it("opens rollouts piped to `callforest view -`: JSONL, or one pretty-printed array", async () => {
    const other = { ...example, rollout_id: "piped" };
    for (const [piped, name, options] of [
      [
        `${asJson(example)}\n${asJson(other)}\n`,
        "stdin.jsonl",
        ["stdin.jsonl:1 · login-bug · 5 rows", "stdin.jsonl:2 · piped · 5 rows"],
      ],
      [
        JSON.stringify([example, other], null, 2),
        "stdin.json",
        ["stdin.json[0] · login-bug · 5 rows", "stdin.json[1] · piped · 5 rows"],
      ],
    ] as const) {
      const child = spawn(process.execPath, [join(ROOT, "bin/callforest.js"), "view", "-", "--port", "0"], {
        stdio: ["pipe", "pipe", "inherit"],
      });
      try {
        child.stdin.end(piped);
        const [url] = (await once(child.stdout, "data")) as [Buffer];
        expect(url.toString()).toMatch(
          new RegExp(`^http://127\\.0\\.0\\.1:\\d+/[A-Za-z0-9_-]{24}/\\?input=input%2F${name.replace(".", "\\.")}\n$`),
        );
        // Its own tab: the built page of the package (dist/web), served by another server.
        const tab = await context.newPage();
        await tab.goto(url.toString().trim());
        await tab.waitForSelector('body[data-loads="1"]');
        expect(await tab.textContent("#status")).toBe(`${name}: 2 rollouts`);
        expect(await tab.$$eval("#rollout-select option", (os) => os.map((o) => o.textContent))).toEqual(options);
        await tab.close();
      } finally {
        child.kill();
      }
    }
  });

  it(
    "view --port N refuses a taken port (exit 2); without " + "--port a taken default port gives way to a free one",
    async () => {
      const blocker = createServer();
      blocker.listen(0, "127.0.0.1");
      await once(blocker, "listening");
      const taken = (blocker.address() as AddressInfo).port;
      const view = (...args: string[]) =>
        spawn(process.execPath, [join(ROOT, "bin/callforest.js"), "view", ...args], {
          stdio: ["ignore", "pipe", "pipe"],
        });
      try {
        const refused = view("--port", String(taken));
        const stderr: Buffer[] = [];
        refused.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
        // It exits, or serves instead (its URL on stdout): whichever comes first, however slowly.
        const served = once(refused.stdout, "data").then(() => "served");
        const exited = once(refused, "exit").then(([code]) => code as number | null);
        const code = await Promise.race([exited, served]);
        if (code === "served") refused.kill();
        expect([code, Buffer.concat(stderr).toString()]).toEqual([
          2,
          `callforest: --port ${taken}: already in use (--port 0 picks a free one)\n`,
        ]);
      } finally {
        blocker.close();
      }
      // The default port taken: by this test, or already by another process (another run of this
      // suite, say), in which case it is taken as well; only then may it be freed meanwhile.
      const defaultPort = createServer();
      defaultPort.listen(DEFAULT_PORT, "127.0.0.1");
      const held = await Promise.race([
        once(defaultPort, "listening").then(() => true),
        once(defaultPort, "error").then(([error]) => {
          expect((error as NodeJS.ErrnoException).code).toBe("EADDRINUSE");
          return false;
        }),
      ]);
      const child = view();
      try {
        const [url] = (await once(child.stdout, "data")) as [Buffer];
        const port = Number(new URL(url.toString().trim()).port);
        expect(port).toBeGreaterThan(0);
        if (held) expect(port).not.toBe(DEFAULT_PORT);
      } finally {
        child.kill();
        defaultPort.close();
      }
    },
  );

  it("refuses to follow ?input= to another origin", async () => {
    const other = await context.newPage();
    const seen: string[] = [];
    other.on("request", (request) => seen.push(request.url()));
    const home = view.url.split("?")[0];
    await other.goto(`${home}?input=${encodeURIComponent("http://example.com/rollout.jsonl")}`);
    await other.waitForSelector("body[data-ready=true]");
    expect(await other.textContent("#status")).toBe(
      "?input= must name a file on this page's own origin, not http://example.com",
    );
    expect(seen).toEqual([`${home}?input=${encodeURIComponent("http://example.com/rollout.jsonl")}`]);
    await other.close();
  });

  it("says when ?input= cannot be loaded, and reads ?input= and files opened later as ?from= says", async () => {
    const other = await context.newPage();
    const home = view.url.split("?")[0];
    await other.goto(`${home}?input=input%2Fmissing.jsonl`);
    await other.waitForSelector("body[data-ready=true]");
    expect(await other.textContent("#status.error")).toBe("cannot load input/missing.jsonl: HTTP 404");
    // the worked example is canonical, not a Gym rollout: read as one, it is rejected
    await other.goto(`${home}?input=input%2Flogin-bug.json&from=gym-rollout`);
    await other.waitForSelector('body[data-loads="1"]');
    expect(await other.textContent("#report .rejected .reason")).toBe("invalid_rollout");
    await other.setInputFiles("#file", EXAMPLE_FILE);
    await other.waitForSelector('body[data-loads="2"]');
    expect(await other.textContent("#report .rejected .reason")).toBe("invalid_rollout");
    await other.close();
  });

  it("refuses a ?from= it does not know, and says so (opening nothing)", async () => {
    const other = await context.newPage();
    const home = view.url.split("?")[0];
    await other.goto(`${home}?input=input%2Flogin-bug.json&from=bogus`);
    await other.waitForSelector("body[data-ready=true]");
    expect(await other.textContent("#status")).toBe(
      `?from=bogus is not one of ${FROM_OPTIONS.join(", ")}: nothing opened (open a file to read it as auto)`,
    );
    expect(FROM_OPTIONS.slice(0, 3)).toEqual(["callforest", "gym-rollout", "gym-observed"]);
    expect(await other.isHidden("#views")).toBe(true);
    await other.close();
  });

  it("sent no request outside its own origin", () => {
    const origin = new URL(view.url).origin;
    expect(requests).toContain(`${baseOf(view.url)}/input/login-bug.json`);
    expect(requests.filter((url) => !url.startsWith(`${origin}/`) && !url.startsWith("data:"))).toEqual([]);
  });

  it("works from the built file alone, opened from disk", async () => {
    const local = await context.newPage();
    const seen: string[] = [];
    local.on("request", (request) => seen.push(request.url()));
    const errors: string[] = [];
    local.on("pageerror", (error) => errors.push(error.message));
    await local.goto(`file://${join(dir, "web/index.html")}`);
    await local.waitForSelector("body[data-ready=true]");
    await local.click("#example");
    await local.waitForSelector('body[data-loads="1"]');
    expect(
      await local.$$eval("#rows-table tr[data-row]", (trs) => trs.map((tr) => tr.children[1].textContent)),
    ).toEqual(["C4", "C6", "C9", "C10", "C12"]);
    expect(await local.textContent("#backend")).toMatch(/^core: WebAssembly/);
    expect(seen.filter((url) => !url.startsWith("data:"))).toEqual([`file://${join(dir, "web/index.html")}`]);
    expect(errors).toEqual([]);
    await local.close();
  });
});

describe("the page opened from disk", () => {
  it("refuses ?input= (and fetches nothing), saying why", async () => {
    const local = await context.newPage();
    const seen: string[] = [];
    local.on("request", (request) => seen.push(request.url()));
    const page = `file://${join(dir, "web/index.html")}`;
    await local.goto(`${page}?input=${encodeURIComponent("/etc/passwd")}`);
    await local.waitForSelector("body[data-ready=true]");
    expect(await local.textContent("#status.error")).toBe(
      "?input= is not followed on a page opened from disk (file:): open the file with the button, or drop it here",
    );
    expect(seen.filter((url) => !url.startsWith("data:"))).toEqual([
      `${page}?input=${encodeURIComponent("/etc/passwd")}`,
    ]);
    await local.close();
  });

  it("refuses to run inside a frame (a <meta> CSP cannot say frame-ancestors)", async () => {
    const framing = join(dir, "framing.html");
    writeFileSync(framing, `<iframe src="web/index.html"></iframe>`);
    const local = await context.newPage();
    await local.goto(`file://${framing}`);
    const inner = local.frames().find((f) => f !== local.mainFrame())!;
    await inner.waitForSelector("body[data-ready=framed]");
    expect(await inner.textContent("#framed")).toBe(
      "callforest refuses to run inside a frame: open it in its own tab.",
    );
    expect(await inner.$("#file")).toBeNull();
    await local.close();
  });
});

describe("callforest view's server", () => {
  /** Runs `use` with a server for the built page (any free port), closing it however `use` ends. */
  async function withServer(
    options: Omit<ViewServerOptions, "page" | "port">,
    use: (server: ViewServer, base: string) => Promise<void>,
  ): Promise<void> {
    const server = await startViewServer({ page: join(dir, "web/index.html"), port: 0, ...options });
    try {
      await use(server, baseOf(server.url));
    } finally {
      await server.close();
    }
  }

  it("serves only the page (with a same-origin CSP) and the input", async () => {
    const base = baseOf(view.url);
    const home = await fetch(`${base}/`);
    expect(home.status).toBe(200);
    expect(home.headers.get("content-security-policy")).toContain("default-src 'none'");
    expect(home.headers.get("content-security-policy")).toContain("connect-src 'self' data:");
    // no <base> or form may point the page elsewhere, and nothing is sniffed into another type
    expect(home.headers.get("content-security-policy")).toContain("base-uri 'none'; form-action 'none'");
    expect(home.headers.get("x-content-type-options")).toBe("nosniff");
    expect(await (await fetch(`${base}/index.html`)).text()).toBe(await home.text());
    expect(await (await fetch(`${base}/input/login-bug.json`)).text()).toBe(readFileSync(EXAMPLE_FILE, "utf8"));
    expect((await fetch(`${base}/input/other.json`)).status).toBe(404);
    expect((await fetch(`${base}/../package.json`)).status).toBe(404);
    expect((await fetch(`${base}/`, { method: "POST" })).status).toBe(405);
  });

  it("answers 403 to a request that names another host (DNS rebinding), whatever the path", async () => {
    const { port, pathname: home } = new URL(view.url);
    const status = (host: string, path: string) =>
      new Promise<number>((resolve, reject) => {
        request({ host: "127.0.0.1", port, path: home.slice(0, -1) + path, headers: { host } }, (response) => {
          response.resume();
          resolve(response.statusCode!);
        })
          .on("error", reject)
          .end();
      });
    expect(await status(`attacker.example:${port}`, "/input/login-bug.json")).toBe(403);
    expect(await status(`attacker.example:${port}`, "/")).toBe(403);
    expect(await status("127.0.0.1", "/")).toBe(403); // the port is part of the origin
    expect(await status(`127.0.0.1:${port}`, "/input/login-bug.json")).toBe(200);
    expect(await status(`localhost:${port}`, "/")).toBe(200);
    expect(await status(`LOCALHOST:${port}`, "/")).toBe(200);
    // On port 80 clients send no port; elsewhere the port must be there.
    expect([
      isOwnHost("127.0.0.1", 80),
      isOwnHost("localhost", 80),
      isOwnHost("localhost:80", 80),
      isOwnHost("localhost", 8080),
      isOwnHost(undefined, 80),
    ]).toEqual([true, true, true, false, false]);
  });

  it("serves nothing without the per-run secret in the path (404), and a new secret each run", async () => {
    const { origin, pathname } = new URL(view.url);
    expect(pathname).toMatch(/^\/[A-Za-z0-9_-]{24}\/$/);
    for (const path of [
      "/",
      "/index.html",
      "/input/login-bug.json",
      `${pathname.slice(0, -2)}/`,
      `${pathname.slice(0, -1)}x/`,
      `/x${pathname}`,
      pathname.slice(0, -1),
    ]) {
      expect([path, (await fetch(`${origin}${path}`)).status]).toEqual([path, 404]);
    }
    expect((await fetch(`${origin}${pathname}input/login-bug.json`)).status).toBe(200);
    await withServer({}, async (server) => expect(new URL(server.url).pathname).not.toBe(pathname));
  });

  it(
    "may not be framed: X-Frame-Options DENY and CSP " + "frame-ancestors 'none' on every response, and Chromium obeys",
    async () => {
      const base = baseOf(view.url);
      for (const path of ["/", "/input/login-bug.json", "/nope"]) {
        const response = await fetch(`${base}${path}`);
        expect([
          path,
          response.headers.get("x-frame-options"),
          response.headers.get("content-security-policy"),
        ]).toEqual([path, "DENY", expect.stringContaining("frame-ancestors 'none'")]);
      }
      // Another local site framing the page gets no page in its frame.
      // The frame's load event fires once its navigation is done, blocked or not: then look.
      const framer = createServer((_, response) =>
        response
          .writeHead(200, { "Content-Type": "text/html" })
          .end(`<iframe src="${view.url}" onload="document.title = 'frame done'"></iframe>`),
      );
      framer.listen(0, "127.0.0.1");
      await once(framer, "listening");
      const tab = await context.newPage();
      try {
        await tab.goto(`http://127.0.0.1:${(framer.address() as AddressInfo).port}/`);
        await tab.waitForFunction(() => document.title === "frame done");
        const inner = tab.frames().find((f) => f !== tab.mainFrame())!;
        expect(await inner.evaluate(() => document.body?.dataset.ready ?? "no page").catch(() => "blocked")).not.toBe(
          "true",
        );
        expect(await inner.$("#file").catch(() => null)).toBeNull();
      } finally {
        await tab.close();
        framer.close();
      }
    },
  );

  it(
    "with --tokens, never serves a symlink that resolves " + "outside the directory (404), but serves one inside",
    async () => {
      const outside = mkdtempSync(join(tmpdir(), "callforest-tokens-"));
      try {
        writeFileSync(join(outside, "secret.txt"), "outside\n");
        mkdirSync(join(outside, "tok"));
        writeFileSync(join(outside, "tok", "real.tokens.jsonl"), "inside\n");
        symlinkSync(join(outside, "secret.txt"), join(outside, "tok", "pw.tokens.jsonl"));
        symlinkSync("/etc/passwd", join(outside, "tok", "etc.tokens.jsonl"));
        symlinkSync("real.tokens.jsonl", join(outside, "tok", "alias.tokens.jsonl"));
        execFileSync("mkfifo", [join(outside, "tok", "fifo.tokens.jsonl")]);
        // DIR itself through a symlink: its real path is what files must stay in
        symlinkSync(join(outside, "tok"), join(outside, "link"));
        await withServer(
          { input: OBSERVED_ROWS, tokensDir: join(outside, "link"), from: "gym-observed" },
          async (_, base) => {
            for (const name of ["pw", "etc", "fifo"]) {
              for (const method of ["GET", "HEAD"])
                expect([name, method, (await fetch(`${base}/tokens/${name}.tokens.jsonl`, { method })).status]).toEqual(
                  [name, method, 404],
                );
            }
            expect(await (await fetch(`${base}/tokens/alias.tokens.jsonl`)).text()).toBe("inside\n");
            expect(await (await fetch(`${base}/tokens/real.tokens.jsonl`)).text()).toBe("inside\n");
          },
        );
      } finally {
        rmSync(outside, { recursive: true, force: true });
      }
    },
  );

  it("with --tokens, never serves a token file from outside the directory, however the name is encoded", async () => {
    const outside = mkdtempSync(join(tmpdir(), "callforest-tokens-"));
    try {
      writeFileSync(join(outside, "secret.tokens.jsonl"), "outside\n");
      mkdirSync(join(outside, "tok"));
      writeFileSync(join(outside, "tok", "inside.tokens.jsonl"), "inside\n");
      await withServer(
        { input: OBSERVED_ROWS, tokensDir: join(outside, "tok"), from: "gym-observed" },
        async (_, base) => {
          expect(await (await fetch(`${base}/tokens/inside.tokens.jsonl`)).text()).toBe("inside\n");
          for (const path of [
            "/tokens/..%2Fsecret.tokens.jsonl",
            "/tokens/..%5Csecret.tokens.jsonl",
            "/tokens/%2E%2E%2Fsecret.tokens.jsonl",
            "/tokens/inside.tokens.jsonl%00",
          ]) {
            expect([path, (await fetch(`${base}${path}`)).status]).toEqual([path, 404]);
          }
        },
      );
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it(
    "with --tokens, serves the directory's token files " + "(and nothing else) and the page plans the capture",
    async () => {
      await withServer(
        { input: OBSERVED_ROWS, tokensDir: OBSERVED_DIR, from: "gym-observed" },
        async (server, base) => {
          expect(server.url).toMatch(/\?input=input%2Frollouts\.jsonl&from=gym-observed&tokens=tokens%2F$/);
          expect(await (await fetch(`${base}/tokens/7-2.tokens.jsonl`)).text()).toBe(
            readFileSync(OBSERVED_TOKENS, "utf8"),
          );
          for (const path of [
            "/tokens/README.md",
            "/tokens/..%2F..%2Fpackage.json",
            "/tokens/%2e%2e%2fx.tokens.jsonl",
            "/tokens/missing.tokens.jsonl",
            "/tokens/%E0%A4%A.tokens.jsonl",
          ]) {
            expect([
              path,
              (await fetch(`${base}${path}`)).status,
              (await fetch(`${base}${path}`, { method: "HEAD" })).status,
            ]).toEqual([path, 404, 404]);
          }
          expect((await fetch(`${base}/tokens/7-2.tokens.jsonl`, { method: "HEAD" })).status).toBe(200);
          const tab = await context.newPage();
          await tab.goto(server.url);
          await tab.waitForSelector('body[data-loads="1"]');
          const cf = await init();
          const items = [];
          for await (const item of readRollouts([OBSERVED_ROWS], { tokens: tokenDirectory(OBSERVED_DIR) }))
            items.push(item);
          const plan = cf.plan((items[0].result as { rollout: Rollout }).rollout);
          expect(await tab.evaluate(() => (window as unknown as PageWindow).callforest.rowsJsonl())).toBe(
            plan.rows.map((row) => rowToJson(row, "bits")).join("\n"),
          );
          plan.release();
          // ?tokens= is followed only to the page's own origin too
          await tab.goto(`${base}/?input=input%2Frollouts.jsonl&tokens=${encodeURIComponent("http://example.com/")}`);
          await tab.waitForSelector("body[data-ready=true]");
          expect(await tab.textContent("#status")).toBe(
            "?tokens= must name a file on this page's own origin, not http://example.com",
          );
          await tab.close();
        },
      );
    },
  );

  it("serves an input whose name needs escaping in a URL (spaces, #, %), and the page opens it", async () => {
    const input = join(dir, "my rollout #1 100%.jsonl");
    writeFileSync(input, JSON.stringify(example) + "\n");
    await withServer({ input }, async (server) => {
      const tab = await context.newPage();
      await tab.goto(server.url);
      await tab.waitForSelector('body[data-loads="1"]');
      expect(await tab.textContent("#status")).toBe("my rollout #1 100%.jsonl: 1 rollout");
      await tab.close();
    });
  });

  it("answers 404 for an input deleted after it started, and keeps serving", async () => {
    const input = join(dir, "gone.jsonl");
    writeFileSync(input, readFileSync(EXAMPLE_FILE, "utf8").replace(/\n/g, "") + "\n");
    await withServer({ input }, async (_, base) => {
      rmSync(input);
      expect((await fetch(`${base}/input/gone.jsonl`)).status).toBe(404);
      expect((await fetch(`${base}/`)).status).toBe(200);
    });
  });

  it("fails in one line when the page is not built or the input is missing", async () => {
    await expect(startViewServer({ page: join(dir, "nope.html") })).rejects.toThrow(
      /^cannot read .*nope\.html: no such file \(build the page first: npm run build\)$/,
    );
    await expect(
      startViewServer({ page: join(dir, "web/index.html"), input: join(dir, "missing.jsonl") }),
    ).rejects.toThrow(/^cannot read .*missing\.jsonl: no such file$/);
    await expect(startViewServer({ page: join(dir, "web/index.html"), input: dir })).rejects.toThrow(
      /^cannot read .*: is a directory$/,
    );
  });
});
