// callforest for Node: the .wasm core is read from the package's build/ folder.
import { readFile } from "node:fs/promises";
import { initWith } from "./api.js";
import { wasmUrl } from "./core/wasm-file.js";
import type { Callforest, InitOptions } from "./types.js";

export type { BuilderHeader, CallMeta, CallSlot, RolloutBuilder } from "./builder.js";
export * from "./types.js";
export { rowToJson, reportToJson, formatFloat32, toBase64, fromBase64, maskToInts, maskBit, type MaskFormat } from "./output.js";

async function loadModule(simd: boolean): Promise<WebAssembly.Module> {
  return WebAssembly.compile(await readFile(wasmUrl(simd)));
}

/** Loads a backend: WebAssembly by default (SIMD when supported), or `{ backend: "ts" }`. */
export function init(options: InitOptions = {}): Promise<Callforest> {
  return initWith(loadModule, options);
}
