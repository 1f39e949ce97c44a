// The package's browser entry (src/browser.ts, the `browser` export condition) as a consumer's
// bundler would use it: vite bundles a tiny app, emits the .wasm files as separate assets, and a
// static server serves them. In real Chromium the core is fetched by URL and compiled while
// streaming; a server with the wrong MIME type still works (buffered compile); the TS backend
// works there too; and rows equal Node's. The entry's import graph has no Node built-ins.
import { CHROMIUM_LAUNCH, NO_DEADLINE } from "../support/chromium.js";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, extname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { init, rowToJson } from "../../src/index.js";
import { generateRollout } from "../../bench/generate.js";
import type { Rollout } from "../../src/types.js";
// The browser entry exports the Node entry's types too (a consumer resolving the `browser`
// condition type-checks the same code): `npm run typecheck` fails here if one goes missing.
import type * as NodeEntry from "../../src/index.js";
import type * as BrowserEntry from "../../src/browser.js";
type MissingFromBrowser = Exclude<keyof typeof NodeEntry, keyof typeof BrowserEntry>;
// Compile-time checks (tsc fails on a mismatch), used so the linter knows they are meant.
const sameValues: [MissingFromBrowser] extends [never] ? true : MissingFromBrowser = true;
type BuilderTypes = [
  BrowserEntry.RolloutBuilder,
  BrowserEntry.BuilderHeader,
  BrowserEntry.CallMeta,
  BrowserEntry.CallSlot,
];
void sameValues;
export type { BuilderTypes };

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const example = JSON.parse(readFileSync(join(ROOT, "examples/login-bug.json"), "utf8")) as Rollout;

const TYPES: Record<string, string> = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm" };

let dir: string;
let server: Server;
let origin: string;
let wasmType = "application/wasm";
const served: string[] = [];
let browser: Browser;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "callforest-entry-"));
  const app = join(dir, "app");
  mkdirSync(app);
  const entry = relative(app, join(ROOT, "src/browser.ts")).split("\\").join("/");
  writeFileSync(
    join(app, "index.html"),
    `<!doctype html><meta charset="utf-8"><script type="module" src="./app.ts"></script>`,
  );
  writeFileSync(
    join(app, "app.ts"),
    `import { init, rowToJson } from "${entry}";
const wasm = await init();
const ts = await init({ backend: "ts" });
(window as any).planRows = (text: string, backend: string) => {
  const plan = (backend === "ts" ? ts : wasm).plan(JSON.parse(text));
  const rows = plan.rows.map((row) => rowToJson(row, "bits")).join("\\n");
  plan.release();
  return rows;
};
(window as any).cf = { backend: wasm.backend, simd: wasm.simd };
// init({ wasmUrl }): the core from a URL of the caller's choosing.
(window as any).rowsFrom = async (url: string, text: string) => {
  const cf = await init({ simd: false, wasmUrl: (simd: boolean) => new URL(url + "?simd=" + simd, location.href) });
  const plan = cf.plan(JSON.parse(text));
  const rows = plan.rows.map((row) => rowToJson(row, "bits")).join("\\n");
  plan.release();
  return [cf.backend, cf.simd, rows];
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
    served.push(path);
    const scalarCore = () =>
      join(dir, "out/assets", readdirSync(join(dir, "out/assets")).find((name) => name.startsWith("core-scalar"))!);
    const file =
      path === "/elsewhere/core.wasm"
        ? scalarCore()
        : resolve(join(dir, "out"), "." + (path === "/" ? "/index.html" : path));
    let body: Buffer;
    try {
      body = readFileSync(file);
    } catch {
      response.writeHead(404).end();
      return;
    }
    const type = extname(file) === ".wasm" ? wasmType : (TYPES[extname(file)] ?? "application/octet-stream");
    response.writeHead(200, { "Content-Type": type }).end(body);
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

/** Opens the app in a fresh page that counts compileStreaming calls. */
async function openApp() {
  const page = await browser.newPage();
  page.setDefaultTimeout(NO_DEADLINE);
  await page.addInitScript(() => {
    const original = WebAssembly.compileStreaming;
    (window as unknown as { streamed: number }).streamed = 0;
    WebAssembly.compileStreaming = function (source) {
      (window as unknown as { streamed: number }).streamed++;
      return original.call(WebAssembly, source);
    };
  });
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(`${origin}/`);
  await page.waitForSelector("body[data-ready=true]", { state: "attached" });
  return { page, errors };
}

function nodeRows(cf: Awaited<ReturnType<typeof init>>, rollout: unknown): string {
  const plan = cf.plan(rollout);
  const rows = plan.rows.map((row) => rowToJson(row, "bits")).join("\n");
  plan.release();
  return rows;
}

describe("the browser entry, bundled", () => {
  it("emits the .wasm cores as separate assets", () => {
    const assets = readdirSync(join(dir, "out/assets"));
    // (parquet-wasm's own .wasm is a third asset, fetched on the first Parquet write.)
    expect(assets.filter((name) => name.startsWith("core-") && name.endsWith(".wasm")).length).toBe(2);
  });

  it("loads the core from the URL init({ wasmUrl }) gives (the scalar build here)", async () => {
    served.length = 0;
    const { page, errors } = await openApp();
    const rowsFrom = (args: [string, string]) =>
      (window as unknown as { rowsFrom(u: string, t: string): Promise<unknown> }).rowsFrom(...args);
    const got = await page.evaluate(rowsFrom, ["/elsewhere/core.wasm", JSON.stringify(example)] as [string, string]);
    expect(got).toEqual(["wasm", false, nodeRows(await init(), example)]);
    expect(served).toContain("/elsewhere/core.wasm");
    expect(errors).toEqual([]);
    await page.close();
  });

  it("fetches the core by URL and compiles it streaming; rows equal Node's on both backends", async () => {
    served.length = 0;
    const { page, errors } = await openApp();
    expect(await page.evaluate(() => (window as unknown as { cf: { backend: string; simd: boolean } }).cf)).toEqual({
      backend: "wasm",
      simd: true,
    });
    expect(await page.evaluate(() => (window as unknown as { streamed: number }).streamed)).toBe(1);
    expect(served.filter((path) => path.endsWith(".wasm"))).toEqual([
      expect.stringMatching(/^\/assets\/core-simd-[\w-]+\.wasm$/),
    ]);
    const cf = await init();
    const rollout = JSON.stringify(generateRollout({ calls: 200, seed: 9 }), (_k, v) =>
      ArrayBuffer.isView(v) ? Array.from(v as Int32Array) : v,
    );
    for (const input of [JSON.stringify(example), rollout]) {
      const expected = nodeRows(cf, JSON.parse(input));
      const planRows = (args: [string, string]) =>
        (window as unknown as { planRows(r: string, b: string): string }).planRows(...args);
      expect((await page.evaluate(planRows, [input, "wasm"] as [string, string])) === expected).toBe(true);
      expect((await page.evaluate(planRows, [input, "ts"] as [string, string])) === expected).toBe(true);
    }
    expect(errors).toEqual([]);
    await page.close();
  });

  it("still loads when the server does not send application/wasm (buffered compile)", async () => {
    wasmType = "application/octet-stream";
    try {
      const { page, errors } = await openApp();
      expect(await page.evaluate(() => (window as unknown as { streamed: number }).streamed)).toBe(0);
      const rows = await page.evaluate(
        (r) => (window as unknown as { planRows(r: string, b: string): string }).planRows(r, "wasm"),
        JSON.stringify(example),
      );
      expect(rows.split("\n").length).toBe(5);
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      wasmType = "application/wasm";
    }
  });
});

describe("the browser entry, statically", () => {
  /** Every module reachable from `file` by relative imports; bare or node: imports are returned apart. */
  function importGraph(file: string, seen = new Set<string>(), external = new Set<string>()) {
    if (seen.has(file)) return { seen, external };
    seen.add(file);
    const source = readFileSync(file, "utf8");
    for (const m of source.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s*"([^"]+)"|import\("([^"]+)"\)/g)) {
      const spec = m[1] ?? m[2];
      if (spec.startsWith(".")) importGraph(resolve(dirname(file), spec.replace(/\.js$/, ".ts")), seen, external);
      else external.add(spec);
    }
    return { seen, external };
  }

  it(
    "imports no Node built-in and no other package, from the entry, the " +
      "renderer or the page (but its columnar and tokenizer libraries)",
    () => {
      // The page decodes tokens with gpt-tokenizer's special-token tables and Hugging Face's
      // tokenizers.js: both pure JavaScript for browsers, bundled into the page.
      const pageOnly = ["@huggingface/tokenizers", "gpt-tokenizer/modelParams"];
      const columnar = ["apache-arrow", "parquet-wasm/esm"];
      for (const start of ["src/browser.ts", "src/draw/index.ts", "web/main.ts"]) {
        const { seen, external } = importGraph(join(ROOT, start));
        expect(seen.size).toBeGreaterThan(1);
        // The entry's columnar writers load apache-arrow and parquet-wasm on first use; the page's
        // script stubs them out and unpacks its own copy (web/columnar.ts) on "Download Parquet".
        const allowed =
          start === "web/main.ts" ? [...pageOnly, ...columnar] : start === "src/browser.ts" ? columnar : [];
        expect([start, [...external].filter((name) => !allowed.includes(name)).sort()]).toEqual([start, []]);
        if (start === "web/main.ts")
          expect([...external].filter((name) => pageOnly.includes(name)).sort()).toEqual(pageOnly);
      }
    },
  );

  it("is what package.json's browser condition names", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    const dot = pkg.exports["."];
    expect(Object.keys(dot)[0]).toBe("browser");
    expect(dot.browser).toEqual({ types: "./dist/browser.d.ts", default: "./dist/browser.js" });
    expect(dot.default).toBe("./dist/index.js");
  });
});

describe("loadWasm", () => {
  it("names the URL when the fetch itself fails (fetch's own message names none)", async () => {
    const { loadWasm } = await import("../../src/browser.js");
    await expect(loadWasm("http://127.0.0.1:9/core.wasm")).rejects.toThrow(
      /^cannot load the callforest core from http:\/\/127\.0\.0\.1:9\/core\.wasm: /,
    );
  });
});
