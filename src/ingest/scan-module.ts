// Loads build/scan-{simd,scalar}.wasm (assembly/scan) and instantiates it with its two host
// fallbacks: decimal parsing for the rare numbers Eisel–Lemire cannot decide, and float32
// formatting outside the magnitudes the fast formatter handles.
import { readFile } from "node:fs/promises";
import { CoreUnavailableError } from "../core/errors.js";
import { errorLine } from "../messages.js";
import { checkMaxMemory, memoryLimitPages } from "../core/memory.js";
import { formatFloat32 } from "../codecs/float32.js";

export interface ScanExports {
  memory: WebAssembly.Memory;
  setPrefixByte(index: number, byte: number): void;
  inputAddress(length: number): number;
  scan(length: number): number;
  metaAddress(): number;
  metaLength(): number;
  tableAddress(): number;
  arrayCount(): number;
  streamBegin(regionBytes: number, historyBytes: number): number;
  streamRoom(most: number, least: number): number;
  streamScan(got: number, last: number): number;
  formatInts(source: number, count: number, at: number, comma: number): number;
  formatFloats(source: number, count: number, at: number, comma: number): number;
  base64(source: number, length: number, at: number): number;
  maskInts(source: number, first: number, count: number, at: number, comma: number): number;
  workspace(bytes: number): number;
  setMemoryLimit(pages: number): void;
}

/** An instance's exports, and where window mode's metadata goes (see assembly/scan/scan.ts). */
export interface ScanInstance extends ScanExports {
  /** Gets each piece of metadata a streamScan() makes (a view valid during the call). */
  onMeta: ((bytes: Uint8Array) => void) | null;
}

export interface ScanModuleOptions {
  /** SIMD build (default) or the scalar one. */
  simd?: boolean;
  /** Where the .wasm file is, when not in the package's build/ folder (bundles, benchmarks). */
  url?: URL;
  /** Bytes of linear memory the instance may use (default 4 GiB, the wasm32 maximum). */
  maxMemory?: number;
}

function scanWasmUrl(simd: boolean): URL {
  return new URL(`../../build/scan-${simd ? "simd" : "scalar"}.wasm`, import.meta.url);
}

const latin1 = new TextDecoder("latin1"); // the scanner only hands over ASCII number text
const compiled = new Map<string, Promise<WebAssembly.Module>>();

function compileOnce(url: URL): Promise<WebAssembly.Module> {
  let module = compiled.get(url.href);
  if (!module) {
    module = readFile(url).then((bytes) => WebAssembly.compile(bytes));
    compiled.set(url.href, module);
    // A failure is not kept: the next scanner tries again (and says why, if it fails again).
    module.catch(() => compiled.delete(url.href));
  }
  return module;
}

/** A fresh instance (own linear memory). */
export async function instantiateScan(options: ScanModuleOptions = {}): Promise<ScanInstance> {
  const limitPages = memoryLimitPages(checkMaxMemory(options.maxMemory));
  const module = await compileOnce(options.url ?? scanWasmUrl(options.simd ?? true));
  let memory: WebAssembly.Memory | null = null;
  let scan: ScanInstance | null = null;
  // Addresses arrive as i32: `>>> 0` reads those past 2 GiB as the unsigned numbers they are.
  const env = {
    parseFloatSlow(address: number, length: number): number {
      return Number(latin1.decode(new Uint8Array(memory!.buffer, address >>> 0, length)));
    },
    formatFloatSlow(value: number, address: number): number {
      const text = formatFloat32(value);
      const bytes = new Uint8Array(memory!.buffer, address >>> 0, text.length);
      for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
      return text.length;
    },
    flushMeta(address: number, length: number): void {
      scan!.onMeta?.(new Uint8Array(memory!.buffer, address >>> 0, length));
    },
  };
  let instance: WebAssembly.Instance;
  try {
    instance = await WebAssembly.instantiate(module, { env });
  } catch (error) {
    // As for the planning core: the process's address space, not the input.
    throw new CoreUnavailableError(
      `cannot create a WebAssembly scanner instance ` +
        `(each reserves address space; a limit such as ulimit -v counts every instance): ${errorLine(error)}`,
    );
  }
  const exports = instance.exports as unknown as ScanExports;
  memory = exports.memory;
  exports.setMemoryLimit(limitPages);
  scan = { ...exports, onMeta: null }; // the exports object itself is frozen
  return scan;
}
