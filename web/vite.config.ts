// Builds the page into ONE self-contained file, dist/web/index.html: the script is inlined into
// the HTML, and the .wasm cores and the worked example are inlined as data: URLs (assets under a
// few KB each). So the page works opened straight from disk (file://), from `callforest view`,
// or from any static server, and never fetches anything from elsewhere.
// `npm run build` runs `vite build --config web/vite.config.ts`; tests pass --outDir to build elsewhere.
import { fileURLToPath } from "node:url";
import { defineConfig, type Plugin } from "vite";

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
        const tag = new RegExp(
          `<script type="module"[^>]*src="[./]*${chunk.fileName.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}"[^>]*></script>`,
        );
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
 * The page writes no Arrow or Parquet, and is one file: the package's columnar writers (loaded on
 * first use by the library, megabytes with apache-arrow and parquet-wasm's 5 MB .wasm) are a stub
 * here that says so, so the dynamic imports that lazy-load them add nothing to the page.
 */
function withoutColumnar(): Plugin {
  const STUB = "\0callforest-page-no-columnar";
  const lazy = new Set(["./writer.js", "./arrow.js", "parquet-wasm/esm"]);
  return {
    name: "callforest-page-no-columnar",
    enforce: "pre",
    resolveId(source, importer) {
      return importer !== undefined && /[\\/]src[\\/]columnar[\\/]/.test(importer) && lazy.has(source) ? STUB : null;
    },
    load(id) {
      if (id !== STUB) return null;
      const no = `() => { throw new Error("the callforest page writes no Arrow or Parquet: use the package's toArrowTable / toParquet"); }`;
      return `const no = ${no};\nexport class ColumnarWriter { constructor() { no(); } }\nexport class GroupCutter { constructor() { no(); } }\nexport const tableOf = no;\nexport default no;\n`;
    },
  };
}

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "./",
  logLevel: "warn",
  clearScreen: false,
  publicDir: false,
  plugins: [withoutColumnar(), inlineEntry()],
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
