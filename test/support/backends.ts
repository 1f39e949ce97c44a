// Every backend a plan must agree on: the TypeScript core and the WebAssembly core, SIMD and scalar.
import { init } from "../../src/index.js";
import type { Callforest } from "../../src/types.js";

export interface NamedBackend {
  name: "ts" | "wasm" | "wasm-scalar";
  cf: Callforest;
}

export async function everyBackend(): Promise<NamedBackend[]> {
  return [
    { name: "ts", cf: await init({ backend: "ts" }) },
    { name: "wasm", cf: await init({ simd: true }) },
    { name: "wasm-scalar", cf: await init({ simd: false }) },
  ];
}
