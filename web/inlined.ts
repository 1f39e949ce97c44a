// Names the page's build (vite.config.ts) and the page (parquet.ts) share: the two non-executed
// elements that hold the Parquet writer's script and parquet-wasm's .wasm (gzip, then base64),
// and the one global that script sets when it runs.
export const WRITER_ELEMENT = "cf-parquet-writer";
export const WASM_ELEMENT = "cf-parquet-wasm";
export const WRITER_GLOBAL = "__callforestParquetWriter";
