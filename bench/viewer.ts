// The page on a large rollout (issue 22): 1,000 calls (generateRollout), served by `callforest
// view`, in headless Chromium at 1,400 × 1,000: time to first paint from navigation and from the
// file's bytes arriving, and one zoom step and the zoom to 1:1. Median of a few page loads.
// Needs the built page (dist/web/index.html: npm run build) and Chromium (CHROMIUM_PATH or
// /usr/bin/chromium).
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { chromium } from "playwright-core";
import { startViewServer } from "../src/cli/commands/view.js";
import { generateRollout } from "./generate.js";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url)); // build/bench-out/bench -> root
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const LOADS = 5;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export async function runViewerBench(log: (line: string) => void = console.log): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "callforest-viewer-bench-"));
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu"],
  });
  try {
    const file = join(dir, "big.json");
    const rollout = generateRollout({ calls: 1000, seed: 7 });
    writeFileSync(
      file,
      JSON.stringify(rollout, (_k, v: unknown) =>
        ArrayBuffer.isView(v) ? Array.from(v as unknown as ArrayLike<number>) : v,
      ),
    );
    const view = await startViewServer({ page: join(ROOT, "dist/web/index.html"), input: file, port: 0 });
    const runs: { paint: number; afterBytes: number; zoom: number; detail: number }[] = [];
    try {
      for (let i = 0; i < LOADS; i++) {
        const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
        await page.goto(view.url);
        await page.waitForFunction(() => performance.getEntriesByName("callforest:painted").length > 0, undefined, {
          timeout: 60_000,
        });
        const [paint, fetched] = await page.evaluate(() =>
          ["callforest:painted", "callforest:fetched"].map((name) => performance.getEntriesByName(name)[0].startTime),
        );
        const step = (button: string) =>
          page.evaluate(async (id) => {
            const started = performance.now();
            (document.getElementById(id) as HTMLButtonElement).click();
            await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
            return performance.now() - started;
          }, button);
        runs.push({
          paint,
          afterBytes: paint - fetched,
          zoom: await step("zoom-in"),
          detail: await step("zoom-detail"),
        });
        await page.close();
        log(`viewer: load ${i + 1} of ${LOADS}`);
      }
    } finally {
      await view.close();
    }
    const mb = statSync(file).size / 2 ** 20;
    const ms = (key: keyof (typeof runs)[number]) => `${median(runs.map((r) => r[key])).toFixed(0)}`;
    return [
      `| rollout | MB | first paint from navigation, ms | from the bytes arriving, ms | ` +
        `zoom step, ms | zoom to 1:1, ms |`,
      `|---|---:|---:|---:|---:|---:|`,
      `| 1,000 calls, ${new Set(rollout.calls.map((c) => c.agent)).size} agents | ${mb.toFixed(1)} | ` +
        `${ms("paint")} | ${ms("afterBytes")} | ${ms("zoom")} | ${ms("detail")} |`,
    ].join("\n");
  } finally {
    await browser.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.stdout.write((await runViewerBench((line) => process.stderr.write(`${line}\n`))) + "\n");
}
