// callforest for Node: the .wasm core is read from the package's build/ folder.
import { readFile } from "node:fs/promises";
import { initWith } from "./api.js";
import { wasmUrl } from "./core/wasm-file.js";
import type { Callforest, InitOptions } from "./types.js";
import { columnarApi } from "./columnar/api.js";
import { loadParquet } from "./columnar/load-node.js";

export * from "./exports.js";
export { readRollouts, type NodeReadRolloutsOptions } from "./read-node.js";

/**
 * Columns (SPEC "Columnar output"): plans, rows or packed records as Arrow tables, Arrow IPC,
 * Parquet, or a streaming writer.
 */
export const { toArrowTable, toArrowIPC, toParquet, createColumnarWriter } = columnarApi(loadParquet);

async function loadModule(simd: boolean): Promise<WebAssembly.Module> {
  return WebAssembly.compile(await readFile(wasmUrl(simd)));
}

/** Loads a backend: WebAssembly by default (SIMD when supported), or `{ backend: "ts" }`. */
export function init(options: InitOptions = {}): Promise<Callforest> {
  return initWith(loadModule, options);
}
