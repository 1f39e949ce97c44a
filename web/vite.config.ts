// Builds the page into ONE self-contained file, dist/web/index.html: the script is inlined into
// the HTML, and the .wasm cores and the worked example are inlined as data: URLs (assets under a
// few KB each); the Parquet writer and parquet-wasm's .wasm are inlined compressed, to be unpacked
// on first use. So the page works opened straight from disk (file://), from `callforest view`,
// or from any static server, and never fetches anything from elsewhere.
// `npm run build` runs `vite build --config web/vite.config.ts`; tests pass --outDir to build elsewhere.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build, defineConfig, type HtmlTagDescriptor, type Plugin } from "vite";
import { WASM_ELEMENT, WRITER_ELEMENT, WRITER_GLOBAL } from "./inlined.js";

/** Moves the entry chunk into the HTML as an inline module script. */
function inlineEntry(): Plugin {
  return {
    name: "callforest-inline-entry",
    enforce: "post",
    generateBundle(_options, bundle) {
      const html = bundle["index.html"];
      if (html === undefined || html.type !== "asset") this.error("index.html missing from the bundle");
      let source = String(html.source);
      for (const [name, chunk] of Object.entries(bundle)) {
        if (chunk.type !== "chunk") continue;
        if (chunk.code.includes("<!--")) this.error(`${name} contains "<!--", which cannot be inlined into a <script>`);
        const file = chunk.fileName.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
        const tag = new RegExp(`<script type="module"[^>]*src="[./]*${file}"[^>]*></script>`);
        if (!tag.test(source)) this.error(`no <script> tag for ${chunk.fileName} in index.html`);
        const code = chunk.code.replace(/<\/(script)/gi, "<\\/$1");
        source = source.replace(tag, () => `<script type="module">\n${code}</script>`);
        delete bundle[name];
      }
      html.source = source;
    },
  };
}

/**
 * The page's own script holds no columnar writer: the package's (loaded on first use by the
 * library, megabytes with apache-arrow and parquet-wasm's 5 MB .wasm) is a stub here, so the
 * dynamic imports that lazy-load it add nothing to the script the page runs as it opens. The
 * page writes Parquet with the copy `inlinedParquet` keeps beside it (web/parquet.ts).
 */
function withoutColumnar(): Plugin {
  const STUB = "\0callforest-page-no-columnar";
  const lazy = new Set(["./writer.js", "./arrow.js", "./arrow-modules.js", "parquet-wasm/esm"]);
  return {
    name: "callforest-page-no-columnar",
    enforce: "pre",
    resolveId(source, importer) {
      return importer !== undefined && /[\\/]src[\\/]columnar[\\/]/.test(importer) && lazy.has(source) ? STUB : null;
    },
    load(id) {
      if (id !== STUB) return null;
      const no = `() => { throw new Error("the page's script holds no columnar writer: use web/parquet.ts"); }`;
      return (
        `const no = ${no};\nexport class ColumnarWriter { constructor() { no(); } }\n` +
        "export class GroupCutter { constructor() { no(); } }\n" +
        "export const moduleCodec = { table: no, recordBatch: no, ipcStream: no, ipcEncoder: no };\nexport default no;\n"
      );
    },
  };
}

/**
 * web/columnar.ts (the library's columnar API, apache-arrow, parquet-wasm's JS) as one classic
 * script that sets WRITER_GLOBAL: built apart from the page, so that none of it runs, or is even
 * parsed, until the page asks for it.
 */
async function writerScript(): Promise<string> {
  const output = await build({
    configFile: false,
    logLevel: "warn",
    root: fileURLToPath(new URL(".", import.meta.url)),
    publicDir: false,
    plugins: [
      {
        // parquet-wasm's default init fetches its .wasm from beside the module; the page passes a
        // compiled module instead, and the URL must not pull 5 MB in as an asset.
        name: "callforest-parquet-wasm-no-url",
        enforce: "pre",
        transform(code, id) {
          if (!/[\\/]parquet-wasm[\\/]esm[\\/]parquet_wasm\.js$/.test(id)) return null;
          const url = "new URL('parquet_wasm_bg.wasm', import.meta.url)";
          if (!code.includes(url))
            this.error(`parquet-wasm's init no longer says ${url}: look again at web/parquet.ts`);
          return code.replace(url, `(() => { throw new Error("parquet-wasm: pass the page's module"); })()`);
        },
      },
    ],
    build: {
      write: false,
      target: "es2022",
      minify: true,
      sourcemap: false,
      reportCompressedSize: false,
      lib: { entry: "columnar.ts", formats: ["iife"], name: WRITER_GLOBAL, fileName: () => "parquet-writer.js" },
      rolldownOptions: { output: { codeSplitting: false } },
    },
  });
  const chunks = (Array.isArray(output) ? output : [output]).flatMap((o) =>
    "output" in o ? o.output.filter((c) => c.type === "chunk") : [],
  );
  if (chunks.length !== 1) throw new Error(`the Parquet writer built into ${chunks.length} chunks, not one`);
  return chunks[0].code;
}

/** Bytes as a non-executed element's text: gzip (DecompressionStream unpacks it), then base64. */
function inlinedBytes(id: string, bytes: Uint8Array): HtmlTagDescriptor {
  return {
    tag: "script",
    attrs: { type: "application/octet-stream", id, "data-encoding": "gzip, base64" },
    children: gzipSync(bytes, { level: 9 }).toString("base64"),
    injectTo: "body",
  };
}

/**
 * The Parquet writer's script and parquet-wasm's .wasm, at the end of the page's body, in
 * elements no browser runs (`type="application/octet-stream"`): web/parquet.ts unpacks them on
 * the first "Download Parquet". They add their bytes to the page and nothing else.
 */
function inlinedParquet(): Plugin {
  return {
    name: "callforest-page-parquet",
    apply: "build",
    async transformIndexHtml() {
      const wasm = readFileSync(createRequire(import.meta.url).resolve("parquet-wasm/esm/parquet_wasm_bg.wasm"));
      return [
        inlinedBytes(WRITER_ELEMENT, new TextEncoder().encode(await writerScript())),
        inlinedBytes(WASM_ELEMENT, wasm),
      ];
    },
  };
}

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "./",
  logLevel: "warn",
  clearScreen: false,
  publicDir: false,
  plugins: [withoutColumnar(), inlinedParquet(), inlineEntry()],
  build: {
    outDir: fileURLToPath(new URL("../dist/web", import.meta.url)),
    emptyOutDir: true,
    target: "es2022",
    modulePreload: false,
    sourcemap: false,
    reportCompressedSize: false,
    assetsInlineLimit: () => true,
    // One chunk: a page inlined into its HTML cannot load more (what would be lazy is stubbed above).
    rolldownOptions: { output: { codeSplitting: false } },
  },
});
