// init(): picks a backend and returns the planning API. Environment-neutral: the entry points
// (src/index.ts for Node, src/browser.ts for browsers) supply how the .wasm bytes are loaded.
import { planRollout } from "./plan/plan-rollout.js";
import { planBatch } from "./plan/plan-batch.js";
import { BatchBufferPool } from "./plan/batch-output.js";
import { createBuilder } from "./plan/builder.js";
import { TsCorePool } from "./core/ts-core.js";
import { WasmCorePool } from "./core/wasm-core.js";
import { checkMaxMemory } from "./core/memory.js";
import { WASM_MEMORY_MAX_BYTES, type CoreFactory } from "./core/types.js";
import type { BackendName, Callforest, InitOptions } from "./types.js";

export type { Callforest } from "./types.js";

/** Compiles the core: `simd` picks assembly built with or without v128. */
export type ModuleLoader = (simd: boolean) => Promise<WebAssembly.Module>;

// The smallest module using a v128 instruction (as wasm-feature-detect does).
const SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11,
]);

export function simdSupported(): boolean {
  try {
    return WebAssembly.validate(SIMD_PROBE);
  } catch {
    return false;
  }
}

function makeApi(backend: BackendName, simd: boolean, makeCore: CoreFactory): Callforest {
  const batchBuffers = new BatchBufferPool();
  return {
    backend,
    simd,
    plan: (rollout, options) => planRollout(makeCore, rollout, options),
    builder: (header, options) => createBuilder(makeCore, header, options?.callsHint),
    planBatch: (batch) => planBatch(makeCore, batchBuffers, batch),
  };
}

export async function initWith(loadModule: ModuleLoader, options: InitOptions = {}): Promise<Callforest> {
  if (options === null || typeof options !== "object") {
    throw new TypeError(
      `init() takes an options object such as { backend: "ts" }, ` +
        `got ${typeof options === "string" ? JSON.stringify(options) : String(options)}`,
    );
  }
  const backend = options.backend ?? "wasm";
  if (backend !== "wasm" && backend !== "ts")
    throw new TypeError(`unknown backend ${JSON.stringify(backend)} (expected "wasm" or "ts")`);
  if (options.simd !== undefined && typeof options.simd !== "boolean")
    throw new TypeError(`simd must be true or false, got ${JSON.stringify(options.simd)}`);
  const maxMemory = checkMaxMemory(options.maxMemory);
  if (backend === "ts") {
    const pool = new TsCorePool(Math.min(maxMemory, WASM_MEMORY_MAX_BYTES));
    return makeApi("ts", false, () => pool.acquire());
  }
  if (typeof WebAssembly === "undefined")
    throw new Error('WebAssembly is not available here; use init({ backend: "ts" })');
  const simd = options.simd ?? simdSupported();
  if (simd && !simdSupported()) throw new Error("this runtime has no WebAssembly SIMD; use init({ simd: false })");
  const pool = new WasmCorePool(await loadModule(simd), maxMemory);
  return makeApi("wasm", simd, () => pool.acquire());
}
