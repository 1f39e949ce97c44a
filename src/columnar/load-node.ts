// parquet-wasm for Node: its ESM build, compiled from the .wasm file in node_modules (the same
// build browsers fetch, so both write the same bytes).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { ArrowLibrary } from "./arrow.js";
import type { ParquetModule } from "./parquet.js";
import { compileWithTieringBudget } from "./wasm-tiering.js";

let loading: Promise<{ pq: ParquetModule; wasm: ParquetWasmExports }> | null = null;

/** parquet-wasm's WebAssembly exports: its memory and its allocator among them. */
export type ParquetWasmExports = ReturnType<ParquetModule["initSync"]>;

/** Where parquet-wasm's .wasm file is; throws MODULE_NOT_FOUND when parquet-wasm is not installed. */
export function parquetWasmPath(): string {
  return createRequire(import.meta.url).resolve("parquet-wasm/esm/parquet_wasm_bg.wasm");
}

export interface ParquetLoadOptions {
  /**
   * V8's tiering budget for parquet-wasm's functions (see wasm-tiering.ts); V8's own when not
   * given. Taken by the first load only.
   */
  tieringBudget?: number;
}

function load(options: ParquetLoadOptions = {}): Promise<{ pq: ParquetModule; wasm: ParquetWasmExports }> {
  loading ??= (async () => {
    const pq = await import("parquet-wasm/esm");
    const module = readFileSync(parquetWasmPath());
    const { tieringBudget } = options;
    const wasm =
      tieringBudget === undefined
        ? pq.initSync({ module })
        : compileWithTieringBudget(tieringBudget, () => pq.initSync({ module }));
    return { pq, wasm };
  })();
  return loading;
}

export async function loadParquet(options?: ParquetLoadOptions): Promise<ParquetModule> {
  return (await load(options)).pq;
}

/** The WebAssembly exports of the parquet-wasm loadParquet() gives (see warmHeap in encoder-thread.ts). */
export async function parquetWasmExports(): Promise<ParquetWasmExports> {
  return (await load()).wasm;
}

/**
 * apache-arrow's one-file build, the same release as the ES modules callers import: the CLI
 * loads it in about a fifth of the time their 158 modules take (28 against 140 ms, measured),
 * which every `rows` run writing Parquet or Arrow pays. Throws MODULE_NOT_FOUND when apache-arrow
 * is not installed.
 */
export function loadArrowBundle(): ArrowLibrary {
  return createRequire(import.meta.url)("apache-arrow/Arrow.esnext.min") as ArrowLibrary;
}
