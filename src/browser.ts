// callforest for browsers (the package's `browser` export condition): the same API as the Node
// entry, with no Node built-ins. The .wasm core is fetched by URL and compiled while it streams
// (WebAssembly.compileStreaming); the URL is `new URL("../build/core-*.wasm", import.meta.url)`,
// which resolves to the package's build/ folder from both src/ and dist/, and which bundlers
// (vite, webpack, rollup, esbuild) recognise and rewrite to the emitted asset (or a data: URL when
// they inline it). `init({ wasmUrl })` overrides where the files are; the TS backend needs none.
import { initWith } from "./api.js";
import type { Callforest, InitOptions } from "./types.js";
import { columnarApi } from "./columnar/api.js";
import { loadParquet } from "./columnar/load-browser.js";

export * from "./exports.js";
export { setParquetWasmUrl } from "./columnar/load-browser.js";
/** Reads rollouts of any input format from bytes, a stream or a Blob (see docs/api.md). */
export { readRolloutBytes as readRollouts } from "./read-rollouts.js";

/**
 * Columns (SPEC "Columnar output"), as in the Node entry; parquet-wasm's .wasm is fetched on the
 * first Parquet write.
 */
export const { toArrowTable, toArrowIPC, toParquet, createColumnarWriter } = columnarApi(loadParquet);

export interface BrowserInitOptions extends InitOptions {
  /** Where the compiled core is, for builds that host the .wasm files elsewhere. */
  wasmUrl?: (simd: boolean) => string | URL;
}

// Two literal `new URL(...)` expressions (not a template) so bundlers can see both files.
function defaultWasmUrl(simd: boolean): URL {
  return simd
    ? new URL("../build/core-simd.wasm", import.meta.url)
    : new URL("../build/core-scalar.wasm", import.meta.url);
}

/**
 * Fetches and compiles one core build; falls back to a buffered compile when the server does not
 * say application/wasm.
 */
export async function loadWasm(url: string | URL): Promise<WebAssembly.Module> {
  let response: Response;
  try {
    response = await fetch(url);
  } catch (error) {
    // (fetch's own message, "fetch failed" or "Failed to fetch", names no URL.)
    throw new Error(
      `cannot load the callforest core from ${String(url)}: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
  if (!response.ok) throw new Error(`cannot load the callforest core from ${String(url)}: HTTP ${response.status}`);
  const type = response.headers.get("content-type") ?? "";
  if (typeof WebAssembly.compileStreaming === "function" && type.split(";")[0].trim() === "application/wasm") {
    return WebAssembly.compileStreaming(response);
  }
  return WebAssembly.compile(await response.arrayBuffer());
}

/** Loads a backend: WebAssembly by default (SIMD when supported), or `{ backend: "ts" }`. */
export function init(options: BrowserInitOptions = {}): Promise<Callforest> {
  if (options?.wasmUrl !== undefined && typeof options.wasmUrl !== "function") {
    return Promise.reject(
      new TypeError(
        `wasmUrl must be a function from simd (true or false) to the .wasm file's URL, got ${typeof options.wasmUrl}`,
      ),
    );
  }
  const urlOf = options?.wasmUrl ?? defaultWasmUrl;
  return initWith((simd) => loadWasm(urlOf(simd)), options);
}
