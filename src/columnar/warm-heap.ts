// First touches of memory taken ahead of its use, while a thread would otherwise wait: a
// WebAssembly module's heap, or a buffer to hand over (the Parquet encoder's thread, before its
// first row group: see encoder-thread.ts).
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
 * Writes zeros over the bytes `view()` gives (asked again at each step: a WebAssembly memory that
 * grows detaches its older views) a step at a time, one step a turn of the event loop, and calls
 * `done` after the last. The function returned stops it (and `done` is then never called).
 */
export function touchInSteps(view: () => Uint8Array, done: () => void = () => {}): () => void {
  let at = 0;
  let stopped = false;
  const step = () => {
    if (stopped) return;
    const bytes = view();
    const end = Math.min(at + STEP_BYTES, bytes.length);
    bytes.fill(0, at, end);
    at = end;
    if (at < bytes.length) setTimeout(step, 0);
    else done();
  };
  setTimeout(step, 0);
  return () => {
    stopped = true;
  };
}

/**
 * Takes `bytes` from the module's allocator and touches them in steps (touchInSteps), then calls
 * `done`. The function returned stops and gives them back to the allocator, whose next
 * allocations reuse them, warm. Call it before the module's next use. Nothing of the module's own
 * data is written.
 */
export function warmHeap(heap: WasmHeap, bytes: number, done?: () => void): () => void {
  let at: number;
  try {
    at = heap.__wbindgen_malloc(bytes, 8);
  } catch {
    return () => {}; // no room: the heap grows as it would have
  }
  const stopTouching = touchInSteps(() => new Uint8Array(heap.memory.buffer, at, bytes), done);
  let stopped = false;
  return () => {
    if (stopped) return;
    stopped = true;
    stopTouching();
    heap.__wbindgen_free(at, bytes, 8);
  };
}
