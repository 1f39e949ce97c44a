// The page's "Download Parquet" and the packed view's bins, in real Chromium: the page built as
// `npm run build` builds it, opened straight from disk (where it can fetch nothing) and from
// `callforest view`. Each download must be the bytes `callforest rows -o x.parquet` writes for the
// same rollout (rows, --layout packed, --capacity N), and DuckDB reads them back.
import { CHROMIUM_LAUNCH, NO_DEADLINE, buildPage } from "../support/chromium.js";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { init, type Callforest } from "../../src/index.js";
import { rolloutToJson } from "../../src/ingest/read.js";
import { startViewServer, type ViewServer } from "../../src/cli/commands/view.js";
import { generateRollout } from "../../bench/generate.js";
import { cli } from "../ingest/cli.js";
import { parquetRecords } from "../columnar/support.js";
import { LOGIN_BUG } from "../support/fixtures.js";
import { TREE0_LINES } from "../support/worked-example.js";
import type { Rollout } from "../../src/types.js";

let dir: string;
let browser: Browser;
let context: BrowserContext;
let cf: Callforest;
const example = JSON.parse(readFileSync(LOGIN_BUG, "utf8")) as Rollout;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "callforest-page-parquet-"));
  buildPage(dir);
  browser = await chromium.launch(CHROMIUM_LAUNCH);
  context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  context.setDefaultTimeout(NO_DEADLINE);
  cf = await init();
});
afterAll(async () => {
  await browser?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const PAGE = () => `file://${join(dir, "web/index.html")}`;

interface Opened {
  page: Page;
  /** Every URL the page asked for. */
  requests: string[];
  errors: string[];
}

/** The page opened from disk (or at `url`), with `file` opened in it. */
async function open(file: string, url = PAGE()): Promise<Opened> {
  const page = await context.newPage();
  const requests: string[] = [];
  const errors: string[] = [];
  page.on("request", (request) => requests.push(request.url()));
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(url);
  await page.waitForSelector("body[data-ready=true]");
  const loads = Number((await page.getAttribute("body", "data-loads")) ?? "0");
  await page.setInputFiles("#file", file);
  await page.waitForSelector(`body[data-loads="${loads + 1}"]`);
  return { page, requests, errors };
}

/** The packed view with `capacity` ("" for none) as a user sets it: typed, then Enter. */
async function setCapacity(page: Page, capacity: string): Promise<void> {
  await page.fill("#capacity", capacity);
  await page.press("#capacity", "Enter");
}

/** Clicks "Download Parquet": the file's suggested name and bytes, and the status line after. */
async function downloadParquet(page: Page): Promise<{ name: string; bytes: Buffer; status: string }> {
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#download-parquet")]);
  const bytes = readFileSync((await download.path())!);
  await page.waitForFunction(() => !(document.getElementById("download-parquet") as HTMLButtonElement).disabled);
  return { name: download.suggestedFilename(), bytes, status: (await page.textContent("#status")) ?? "" };
}

/** What `callforest rows INPUT -o x.parquet ...args` writes. */
async function cliParquet(input: string, ...args: string[]): Promise<Buffer> {
  const out = join(mkdtempSync(join(dir, "cli-")), "x.parquet");
  const run = await cli("rows", input, "-o", out, ...args);
  expect(run.code).toBe(0);
  return readFileSync(out);
}

/** Writes bytes a download gave, for DuckDB to read. */
function saved(name: string, bytes: Buffer): string {
  const path = join(mkdtempSync(join(dir, "dl-")), name);
  writeFileSync(path, bytes);
  return path;
}

const isPageUrl = (url: string) => url.startsWith("data:") || url === PAGE();

describe("Download Parquet, from a page opened from disk", () => {
  it("writes the rows, the packed trees and the bins shown, byte for byte as `callforest rows` does", async () => {
    const { page, requests, errors } = await open(LOGIN_BUG);
    const handle = () =>
      page.evaluate(() =>
        (window as unknown as { callforest: { parquetWriterLoaded(): boolean } }).callforest.parquetWriterLoaded(),
      );
    // Nothing of the writer is unpacked until it is asked for.
    expect(await handle()).toBe(false);
    expect(await page.$$eval("script[type='application/octet-stream']", (es) => es.map((e) => e.id))).toEqual([
      "cf-parquet-writer",
      "cf-parquet-wasm",
    ]);

    const rows = await downloadParquet(page);
    expect(rows.name).toBe("login-bug.parquet");
    expect(rows.status).toMatch(/^login-bug\.parquet: 5 rows, [\d.]+ KB$/);
    expect(await handle()).toBe(true);
    expect(rows.bytes.equals(await cliParquet(LOGIN_BUG))).toBe(true);
    const rowsBack = (await parquetRecords(saved(rows.name, rows.bytes))).records;
    expect(rowsBack.map((r) => [r.leaf, r.num_tokens, (r.token_ids as number[]).length])).toEqual([
      ["C4", 8, 8],
      ["C6", 8, 8],
      ["C9", 19, 19],
      ["C10", 19, 19],
      ["C12", 9, 9],
    ]);
    expect(rowsBack[2].calls).toEqual(["C1", "C3", "C7", "C8", "C9"]);

    await page.check("#packed-toggle");
    const trees = await downloadParquet(page);
    expect([trees.name, trees.status.replace(/[\d.]+ KB$/, "")]).toEqual([
      "login-bug.packed.parquet",
      "login-bug.packed.parquet: 3 packed trees, ",
    ]);
    expect(trees.bytes.equals(await cliParquet(LOGIN_BUG, "--layout", "packed"))).toBe(true);
    const treesBack = (await parquetRecords(saved(trees.name, trees.bytes))).records;
    expect(treesBack.map((t) => [t.tree, t.roots, t.num_tokens])).toEqual([
      [0, ["C1", "C11"], 30],
      [1, ["C2"], 8],
      [2, ["C5"], 8],
    ]);
    // SPEC's table for tree 0
    expect(
      (treesBack[0].segments as { call: string; parent: number; start: number; length: number; end: number }[]).map(
        (s) => `${s.call} ${s.parent} ${s.start} ${s.length} ${s.end}`,
      ),
    ).toEqual(TREE0_LINES);

    await setCapacity(page, "20");
    const bins = await downloadParquet(page);
    expect([bins.name, bins.status.replace(/[\d.]+ KB$/, "")]).toEqual([
      "login-bug.bins-20.parquet",
      "login-bug.bins-20.parquet: 4 bins, ",
    ]);
    expect(bins.bytes.equals(await cliParquet(LOGIN_BUG, "--capacity", "20"))).toBe(true);
    const binsBack = (await parquetRecords(saved(bins.name, bins.bytes))).records;
    const plan = cf.plan(example, { capacity: 20 });
    try {
      expect(binsBack.map((b) => [b.bin, b.num_tokens, b.roots])).toEqual(
        plan.bins.map((b) => [b.index, b.numTokens, b.roots]),
      );
      // bin 1 holds C1 (two segments: the system prompt, the rest) C3 C7 again as context for C10,
      // which it trains
      expect((binsBack[1].segments as { call: string; trained: boolean }[]).map((s) => [s.call, s.trained])).toEqual([
        ["C1", false],
        ["C1", false],
        ["C3", false],
        ["C7", false],
        ["C10", true],
      ]);
    } finally {
      plan.release();
    }

    // Only the page and its own data: URLs: nothing was fetched for the writer.
    expect(requests.filter((url) => !isPageUrl(url))).toEqual([]);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("keeps the rollout it is writing when another one is shown meanwhile", async () => {
    const file = join(mkdtempSync(join(dir, "two-")), "two.jsonl");
    const other = generateRollout({ calls: 40, seed: 5 });
    writeFileSync(file, `${JSON.stringify(example)}\n${rolloutToJson(other)}\n`);
    const { page, errors } = await open(file);
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      // The click, and at once (while the writer unpacks) the second rollout: the first one's plan
      // is released only after its file is written.
      page.evaluate(() => {
        document.getElementById("download-parquet")!.click();
        const select = document.getElementById("rollout-select") as HTMLSelectElement;
        select.value = "1";
        select.dispatchEvent(new Event("change"));
      }),
    ]);
    expect(download.suggestedFilename()).toBe("login-bug.parquet");
    expect(readFileSync((await download.path())!).equals(await cliParquet(LOGIN_BUG))).toBe(true);
    await page.waitForFunction(() =>
      /^login-bug\.parquet: 5 rows/.test(document.getElementById("status")!.textContent!),
    );
    expect(await page.textContent("#strip-title")).toMatch(/^row 0 · /);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("says in one line why it could not write (here: a page without its writer), never a stack", async () => {
    const { page, errors } = await open(LOGIN_BUG);
    await page.evaluate(() => document.getElementById("cf-parquet-wasm")!.remove());
    await page.click("#download-parquet");
    await page.waitForSelector("#status.error");
    expect(await page.textContent("#status")).toBe("login-bug.parquet: this build of the page holds no Parquet writer");
    expect(errors).toEqual([]);
    await page.close();
  });
});

describe("the packed view's bins", () => {
  it("shows the bins of a capacity and what they cost, as cf.plan lays them out (the worked example)", async () => {
    const { page } = await open(LOGIN_BUG);
    await page.check("#packed-toggle");
    expect(await page.$$eval("#packed-host g.cf-tree", (gs) => gs.length)).toBe(3);
    await setCapacity(page, "20");
    const plan = cf.plan(example, { capacity: 20 });
    try {
      expect(plan.report.packed_tokens).toBe(63);
      expect(await page.$$eval("#packed-host g.cf-bin", (gs) => gs.length)).toBe(plan.bins.length);
      expect(plan.bins.length).toBe(4);
      expect(await page.textContent("#savings")).toBe(
        "bins of at most 20 tokens: tokens: rows 63 → bins 63 " +
          "(1.00× fewer) · trie 46 (the bins repeat 17 as context)",
      );
      // which segments each bin trains, and which it holds as context
      const segments = await page.$$eval("#packed-host g.cf-segment", (gs) =>
        gs.map((g) => `${g.getAttribute("data-bin")} ${g.getAttribute("data-call")} ${g.getAttribute("data-trained")}`),
      );
      expect(segments).toEqual(
        plan.bins.flatMap((bin) => bin.segments.map((s) => `${bin.index} ${s.call} ${s.trained}`)),
      );
      expect(segments.filter((s) => s.endsWith("false"))).toEqual([
        "1 C1 false",
        "1 C1 false",
        "1 C3 false",
        "1 C7 false",
        "2 C1 false",
      ]);
    } finally {
      plan.release();
    }
    // At 24 the fork tree fits one bin; only the system prompt that C11 shares is repeated.
    await setCapacity(page, "24");
    expect(await page.$$eval("#packed-host g.cf-bin", (gs) => gs.length)).toBe(3);
    expect(await page.textContent("#savings")).toMatch(/ → bins 49 \(1\.29× fewer\) · trie 46 \(the bins repeat 3 /);
    // Downloading the picture gives what `callforest draw --capacity 24` writes.
    const [svg] = await Promise.all([page.waitForEvent("download"), page.click("#download-svg")]);
    expect(svg.suggestedFilename()).toBe("login-bug.bins-24.svg");
    const drawn = join(mkdtempSync(join(dir, "draw-")), "bins.svg");
    expect((await cli("draw", LOGIN_BUG, "--capacity", "24", "-o", drawn)).code).toBe(0);
    expect(readFileSync((await svg.path())!, "utf8")).toBe(readFileSync(drawn, "utf8"));
    // No capacity: the packed trees again.
    await setCapacity(page, "");
    expect(await page.$$eval("#packed-host g.cf-bin", (gs) => gs.length)).toBe(0);
    expect(await page.$$eval("#packed-host g.cf-tree", (gs) => gs.length)).toBe(3);
    expect(await page.textContent("#savings")).toMatch(/^packed: tokens: rows 63 → packed 46 /);
    await page.close();
  });

  it(
    "says in one line that a rollout's longest row does not " + "fit (row_exceeds_capacity); its Parquet has no bins",
    async () => {
      const { page } = await open(LOGIN_BUG);
      await setCapacity(page, "16");
      expect(await page.isChecked("#packed-toggle")).toBe(true); // a capacity shows the packed view
      expect(await page.textContent("#packed-host")).toBe(
        'bins of at most 16 tokens: rejected, row_exceeds_capacity: leaf call "C9" (calls[8]) holds 19 tokens, ' +
          "more than the capacity of 16",
      );
      expect(await page.$$eval("#rows-table tr[data-row]", (trs) => trs.length)).toBe(5); // the rows stay
      const bins = await downloadParquet(page);
      expect(bins.status).toMatch(/^login-bug\.bins-16\.parquet: 0 bins, /);
      expect(bins.bytes.equals(await cliParquet(LOGIN_BUG, "--capacity", "16"))).toBe(true);
      expect((await parquetRecords(saved(bins.name, bins.bytes))).records).toEqual([]);
      // A capacity that is no whole number of tokens is refused, and the bins stay as they were.
      await setCapacity(page, "0");
      expect(await page.textContent("#status.error")).toBe(
        "the capacity must be a whole number of tokens from 1 to 2147483647",
      );
      expect(await page.textContent("#packed-host")).toMatch(/^bins of at most 16 tokens: rejected/);
      await page.close();
    },
  );
});

describe("Download Parquet, from `callforest view`", () => {
  let view: ViewServer;
  afterAll(() => view?.close());

  it("writes a generated rollout's bins as the CLI does, under the server's own Content-Security-Policy", async () => {
    const file = join(mkdtempSync(join(dir, "gen-")), "generated.json");
    const rollout = generateRollout({ calls: 300, seed: 11 });
    writeFileSync(file, rolloutToJson(rollout));
    view = await startViewServer({ page: join(dir, "web/index.html"), input: file, port: 0 });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(error.message));
    const response = await page.goto(view.url);
    expect(response!.headers()["content-security-policy"]).toMatch(/script-src 'self' 'unsafe-inline'/);
    await page.waitForSelector('body[data-loads="1"]');
    const plan = cf.plan(rollout, { capacity: 32768 });
    try {
      expect(plan.report.status).toBe("ok");
      expect(plan.bins.length).toBeGreaterThan(1);
      await setCapacity(page, "32768");
      expect(await page.$$eval("#packed-host g.cf-bin", (gs) => gs.length)).toBe(plan.bins.length);
      const packed = plan.report.packed_tokens!.toLocaleString("en-US");
      expect(await page.textContent("#savings")).toContain(` → bins ${packed} (`);
      const bins = await downloadParquet(page);
      expect(bins.name).toBe(`${rollout.rollout_id}.bins-32768.parquet`);
      expect(bins.bytes.equals(await cliParquet(file, "--capacity", "32768"))).toBe(true);
      const back = (await parquetRecords(saved(bins.name, bins.bytes))).records;
      expect(back.map((b) => b.num_tokens)).toEqual(plan.bins.map((b) => b.numTokens));
      expect(back.reduce((n, b) => n + (b.num_tokens as number), 0)).toBe(plan.report.packed_tokens);
    } finally {
      plan.release();
    }
    expect(errors).toEqual([]);
    await page.close();
  });
});
