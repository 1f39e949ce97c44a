// First touches of a WebAssembly module's heap taken ahead of its work, while its thread would
// otherwise wait (the Parquet encoder's, before its first row group: see encoder-thread.ts).
// A page of fresh memory costs about 12 µs the first time it is written on this project's VMs,
// against well under 0.1 µs to write it again (docs/performance.md, "Where the time goes").

/** What is needed of a wasm-bindgen module: its memory and its allocator. */
export interface WasmHeap {
  readonly memory: WebAssembly.Memory;
  __wbindgen_malloc(size: number, align: number): number;
  __wbindgen_free(at: number, size: number, align: number): void;
}

/** Bytes touched per turn of the event loop, so that a message waiting is not held up for long. */
const STEP_BYTES = 2 << 20;

/**
 * Takes `bytes` from the module's allocator and touches them a step at a time, one step a turn
 * of the event loop. The function returned stops and gives them back to the allocator, whose next
 * allocations reuse them, warm. Call it before the module's next use. Nothing of the module's
 * own data is written.
 */
export function warmHeap(heap: WasmHeap, bytes: number): () => void {
  let at: number;
  try {
    at = heap.__wbindgen_malloc(bytes, 8);
  } catch {
    return () => {}; // no room: the heap grows as it would have
  }
  let done = 0;
  let stopped = false;
  const step = () => {
    if (stopped || done >= bytes) return;
    const size = Math.min(STEP_BYTES, bytes - done);
    new Uint8Array(heap.memory.buffer, at + done, size).fill(0);
    done += size;
    setTimeout(step, 0);
  };
  setTimeout(step, 0);
  return () => {
    if (stopped) return;
    stopped = true;
    heap.__wbindgen_free(at, bytes, 8);
  };
}
