// The page's Parquet writer, built apart from the page (web/vite.config.ts, `lazyColumnar`): the
// library's columnar API (src/columnar: apache-arrow, parquet-wasm's JS) as one classic script
// that the page keeps gzip-compressed in a non-executed element and runs on the first "Download
// Parquet" (web/parquet.ts). It sets one global, read and deleted by the loader at once.
import * as parquetWasm from "parquet-wasm/esm";
import { columnarApi, type ColumnarApi } from "../src/columnar/api.js";

/**
 * The columnar API over parquet-wasm instantiated from `module` (compiled by the loader from the
 * page's inlined .wasm: a page opened from disk can fetch nothing).
 */
export function columnarWith(module: WebAssembly.Module): ColumnarApi {
  let loading: Promise<typeof parquetWasm> | null = null;
  return columnarApi(() => {
    loading ??= parquetWasm.default({ module_or_path: module }).then(() => parquetWasm);
    return loading;
  });
}
