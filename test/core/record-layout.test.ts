// The row and packed record layouts are declared twice: in bytes where the WebAssembly core writes
// them (R_* in assembly/rows.ts, P_* in assembly/packed.ts) and in i32 units where the host reads
// them (ROW_*, PACK_* in src/core/wasm-core.ts); so are a batch's table and results (B_* in
// assembly/batch.ts, STAGED_* in src/core/types.ts). Both builds export theirs; this fails on any drift.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { RECORD_LAYOUTS } from "../../src/core/wasm-core.js";

describe("record layouts", () => {
  it.each(["core-simd", "core-scalar"])("%s writes records as the host reads them", (build) => {
    const module = new WebAssembly.Module(readFileSync(new URL(`../../build/${build}.wasm`, import.meta.url)));
    const exports = new WebAssembly.Instance(module, { env: { abort() {} } }).exports as Record<string, unknown>;
    const exported = Object.fromEntries(
      Object.entries(exports)
        .filter(([name, value]) => /^[RPB]_/.test(name) && value instanceof WebAssembly.Global)
        .map(([name, value]) => [name, (value as WebAssembly.Global).value as number]),
    );
    expect(exported).toEqual(RECORD_LAYOUTS);
  });
});
