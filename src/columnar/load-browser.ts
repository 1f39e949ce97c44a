// parquet-wasm for browsers: its ESM build, which fetches its .wasm file (5 MB) on first use.
// By default from beside its own module (bundlers rewrite that URL to the emitted asset);
// `setParquetWasmUrl` points it elsewhere.
import type { ParquetModule } from "./parquet.js";

let loading: Promise<ParquetModule> | null = null;
let wasmUrl: string | URL | undefined;

/** Where parquet-wasm's .wasm file is served, for builds that host it elsewhere (before the first Parquet write). */
export function setParquetWasmUrl(url: string | URL): void {
  wasmUrl = url;
}

export function loadParquet(): Promise<ParquetModule> {
  loading ??= (async () => {
    const pq = await import("parquet-wasm/esm");
    await pq.default(wasmUrl === undefined ? undefined : { module_or_path: wasmUrl });
    return pq;
  })();
  return loading;
}
