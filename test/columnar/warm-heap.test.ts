// warmHeap: touches exactly the bytes it took from the allocator, a step at a time, and gives
// them back once (before the module's next use); with no room, it does nothing.
import { expect, test, vi } from "vitest";
import { warmHeap, type WasmHeap } from "../../src/columnar/warm-heap.js";

/** A heap of 8 MiB whose allocator hands out one block at `at`, and says what it was asked. */
function fakeHeap(at: number, full = false) {
  const memory = new WebAssembly.Memory({ initial: 128 });
  const calls: string[] = [];
  const heap: WasmHeap = {
    memory,
    __wbindgen_malloc(size, align) {
      calls.push(`malloc ${size} ${align}`);
      if (full) throw new WebAssembly.RuntimeError("unreachable");
      return at;
    },
    __wbindgen_free(ptr, size, align) {
      calls.push(`free ${ptr} ${size} ${align}`);
    },
  };
  return { heap, bytes: new Uint8Array(memory.buffer), calls };
}

test("touches the block it took, and nothing around it, then gives it back once", async () => {
  const { heap, bytes, calls } = fakeHeap(1 << 20);
  const size = (5 << 20) + 100; // not a whole number of steps
  bytes.fill(0xaa);
  const stop = warmHeap(heap, size);
  await vi.waitFor(() => expect(bytes[(1 << 20) + size - 1]).toBe(0), { timeout: 30_000, interval: 5 });
  expect(bytes.subarray(1 << 20, (1 << 20) + size).every((byte) => byte === 0)).toBe(true);
  expect(bytes[(1 << 20) - 1]).toBe(0xaa);
  expect(bytes[(1 << 20) + size]).toBe(0xaa);
  stop();
  stop();
  expect(calls).toEqual([`malloc ${size} 8`, `free ${1 << 20} ${size} 8`]);
});

test("stopped at once, it touches nothing more and gives the block back", async () => {
  const { heap, bytes, calls } = fakeHeap(0);
  bytes.fill(0xaa);
  warmHeap(heap, 4 << 20)();
  await new Promise((resolve) => setTimeout(resolve, 0)); // the turn its first step was due
  expect(bytes.every((byte) => byte === 0xaa)).toBe(true);
  expect(calls).toEqual([`malloc ${4 << 20} 8`, `free 0 ${4 << 20} 8`]);
});

test("with no room for the block, it does nothing", () => {
  const { heap, calls } = fakeHeap(0, true);
  warmHeap(heap, 4 << 20)();
  expect(calls).toEqual([`malloc ${4 << 20} 8`]);
});
