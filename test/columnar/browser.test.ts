// The columnar API through the browser entry, bundled by vite as a consumer's app would be, in
// real Chromium: Parquet (parquet-wasm fetched on first use) and Arrow IPC bytes of a planned
// rollout, identical to what Node writes for the same records, and read back by DuckDB.
import { CHROMIUM_LAUNCH, NO_DEADLINE } from "../support/chromium.js";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { extname, join, relative, resolve } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import { init, toArrowIPC, toParquet } from "../../src/index.js";
import { LOGIN_BUG, ROOT } from "../support/fixtures.js";
import { parquetRecords } from "./support.js";

const TYPES: Record<string, string> = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm" };

let dir: string;
let server: Server;
let origin: string;
let browser: Browser;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "callforest-columnar-browser-"));
  const app = join(dir, "app");
  mkdirSync(app);
  const entry = relative(app, join(ROOT, "src/browser.ts")).split("\\").join("/");
  writeFileSync(
    join(app, "index.html"),
    `<!doctype html><meta charset="utf-8"><script type="module" src="./app.ts"></script>`,
  );
  writeFileSync(
    join(app, "app.ts"),
    `import { init, toParquet, toArrowIPC } from "${entry}";
const cf = await init();
const base64 = (bytes: Uint8Array) => { let s = ""; ` +
      `for (const b of bytes) s += String.fromCharCode(b); return btoa(s); };
(window as any).columns = async (text: string) => {
  const plan = cf.plan(JSON.parse(text), { trees: true });
  const out = { parquet: base64(await toParquet(plan)), ` +
      `trees: base64(await toParquet(plan, { layout: "trees", compression: "snappy" })), ` +
      `arrow: base64(await toArrowIPC(plan)) };
  plan.release();
  return out;
};
document.body.dataset.ready = "true";
`,
  );
  execFileSync(
    process.execPath,
    [
      join(ROOT, "node_modules/vite/bin/vite.js"),
      "build",
      app,
      "--outDir",
      join(dir, "out"),
      "--emptyOutDir",
      "--assetsInlineLimit",
      "0",
      "--target",
      "es2022",
      "--logLevel",
      "warn",
    ],
    { cwd: dir, stdio: "pipe" },
  );
  server = createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0];
    const file = resolve(join(dir, "out"), "." + (path === "/" ? "/index.html" : path));
    let body: Buffer;
    try {
      body = readFileSync(file);
    } catch {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { "Content-Type": TYPES[extname(file)] ?? "application/octet-stream" }).end(body);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  browser = await chromium.launch(CHROMIUM_LAUNCH);
});

afterAll(async () => {
  await browser?.close();
  await new Promise<void>((done) => (server ? server.close(() => done()) : done()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("parquet-wasm's .wasm is a separate asset, fetched only when Parquet is asked for", () => {
  const assets = readdirSync(join(dir, "out/assets"));
  expect(assets.filter((name) => name.startsWith("parquet_wasm_bg") && name.endsWith(".wasm"))).toHaveLength(1);
});

test(
  "in Chromium: Parquet and Arrow IPC bytes equal to Node's for the same rollout, " + "and DuckDB reads the Parquet",
  async () => {
    const page = await browser.newPage();
    page.setDefaultTimeout(NO_DEADLINE);
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(error.message));
    await page.goto(`${origin}/`);
    await page.waitForSelector("body[data-ready=true]", { state: "attached" });
    const text = readFileSync(LOGIN_BUG, "utf8");
    const got = await page.evaluate(
      (t) => (window as unknown as { columns(t: string): Promise<Record<string, string>> }).columns(t),
      text,
    );
    await page.close();
    expect(errors).toEqual([]);
    const plan = (await init()).plan(JSON.parse(text), { trees: true });
    expect(Buffer.from(got.parquet, "base64").equals(Buffer.from(await toParquet(plan)))).toBe(true);
    expect(
      Buffer.from(got.trees, "base64").equals(
        Buffer.from(await toParquet(plan, { layout: "trees", compression: "snappy" })),
      ),
    ).toBe(true);
    expect(Buffer.from(got.arrow, "base64").equals(Buffer.from(await toArrowIPC(plan)))).toBe(true);
    plan.release();
    writeFileSync(join(dir, "page.parquet"), Buffer.from(got.parquet, "base64"));
    const { records } = await parquetRecords(join(dir, "page.parquet"));
    expect(records.map((record) => record.leaf)).toEqual(["C4", "C6", "C9", "C10", "C12"]);
  },
);
