// The page's Parquet writer, made on the first "Download Parquet". The page is one file that must
// work from disk, where Chromium fetches nothing (not even file: URLs), so its build keeps both
// parts inside it, gzip-compressed and base64-encoded in non-executed elements (web/inlined.ts):
// the writer's script (web/columnar.ts: the library's columnar API with apache-arrow and
// parquet-wasm's JS) and parquet-wasm's .wasm (5 MB). Until the first click they cost the page
// only their bytes: nothing is decoded, compiled or run.
import type { ColumnarApi } from "../src/columnar/api.js";
import type * as Writer from "./columnar.js";
import { WASM_ELEMENT, WRITER_ELEMENT, WRITER_GLOBAL } from "./inlined.js";

let loading: Promise<ColumnarApi> | null = null;
let loaded = false;

/** The library's columnar API (what `callforest rows -o x.parquet` writes with), made once. */
export function parquetWriter(): Promise<ColumnarApi> {
  if (loading === null) {
    loading = load();
    // A failed load is tried again on the next click.
    loading.then(
      () => void (loaded = true),
      () => void (loading = null),
    );
  }
  return loading;
}

/** Whether the writer has been made (the page's first paint never makes it). */
export function parquetWriterLoaded(): boolean {
  return loaded;
}

/** The bytes an element holds, gzip-compressed and base64-encoded. */
function inlined(id: string): ReadableStream<Uint8Array> {
  const text = document.getElementById(id)?.textContent;
  if (text == null || text === "") throw new Error("this build of the page holds no Parquet writer");
  return new Blob([fromBase64(text)]).stream().pipeThrough(new DecompressionStream("gzip"));
}

function fromBase64(text: string): Uint8Array<ArrayBuffer> {
  const native = (Uint8Array as unknown as { fromBase64?: (text: string) => Uint8Array<ArrayBuffer> }).fromBase64;
  if (native !== undefined) return native(text);
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** Compiles the .wasm as it is decompressed. */
async function compile(stream: ReadableStream<Uint8Array>): Promise<WebAssembly.Module> {
  const response = new Response(stream, { headers: { "Content-Type": "application/wasm" } });
  if (typeof WebAssembly.compileStreaming === "function") return WebAssembly.compileStreaming(response);
  return WebAssembly.compile(await response.arrayBuffer());
}

async function load(): Promise<ColumnarApi> {
  if (typeof DecompressionStream !== "function")
    throw new Error("this browser cannot unpack the page's Parquet writer (it has no DecompressionStream)");
  const [module, code] = await Promise.all([
    compile(inlined(WASM_ELEMENT)),
    new Response(inlined(WRITER_ELEMENT)).text(),
  ]);
  // A classic inline script runs as it is inserted (the page's CSP allows inline scripts; eval it does not).
  const script = document.createElement("script");
  script.textContent = code;
  document.head.append(script);
  script.remove();
  const scope = window as unknown as Record<string, typeof Writer | undefined>;
  const writer = scope[WRITER_GLOBAL];
  scope[WRITER_GLOBAL] = undefined; // (a top-level var: the global cannot be deleted)
  if (writer === undefined) throw new Error("the page's Parquet writer did not run");
  return writer.columnarWith(module);
}
