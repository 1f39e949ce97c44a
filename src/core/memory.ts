// init({ maxMemory }): checked once for every backend, and as the page limit every WebAssembly
// module (core, scanner) is given.
import { WASM_MEMORY_MAX_BYTES } from "./types.js";

/** A WebAssembly page, the unit of linear memory. */
export const PAGE_BYTES = 65536;
/** The pages of a 4 GiB (wasm32's whole) memory. */
export const MAX_PAGES = WASM_MEMORY_MAX_BYTES / PAGE_BYTES;

/** `init({ maxMemory })` as given (default 4 GiB); throws for what is not a positive whole number of bytes. */
export function checkMaxMemory(maxMemory: number | undefined): number {
  const bytes = maxMemory ?? WASM_MEMORY_MAX_BYTES;
  if (!(bytes > 0 && (Number.isSafeInteger(bytes) || bytes === Infinity))) {
    // (A number out of range is a RangeError, anything else a TypeError, as Node's own checks.)
    const ErrorClass = typeof bytes === "number" ? RangeError : TypeError;
    throw new ErrorClass(
      `maxMemory must be a positive whole number of bytes (or Infinity: 4 GiB), ` +
        `got ${typeof bytes === "string" ? JSON.stringify(bytes) : String(maxMemory)}`,
    );
  }
  return bytes;
}

/**
 * `maxMemory` bytes as 64 KiB pages: at least 1. The modules themselves stop at 65,535 pages
 * (4 GiB less 64 KiB, see assembly/pages.ts), whatever larger number they are given.
 */
export function memoryLimitPages(maxMemory: number): number {
  return Math.min(MAX_PAGES, Math.max(1, Math.floor(maxMemory / PAGE_BYTES)));
}
