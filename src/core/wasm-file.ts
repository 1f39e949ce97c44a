// Where the compiled core lives, relative to this module (src/core or dist/core).
export function wasmUrl(simd: boolean): URL {
  return new URL(`../../build/core-${simd ? "simd" : "scalar"}.wasm`, import.meta.url);
}
