// warmHeap: touches exactly the bytes it took from the allocator, a step at a time, and gives
// them back once (before the module's next use); with no room, it does nothing. touchInSteps, the
// stepping under it: a step a turn, `done` after the last, nothing more once stopped.
import { expect, test, vi } from "vitest";
import { touchInSteps, warmHeap, type WasmHeap } from "../../src/columnar/warm-heap.js";

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

test("warmHeap calls `done` once its last step is taken, and not when stopped first", async () => {
  const { heap, bytes } = fakeHeap(0);
  bytes.fill(0xaa);
  let done = 0;
  warmHeap(heap, (3 << 20) + 1, () => done++);
  await vi.waitFor(() => expect(done).toBe(1), { timeout: 30_000, interval: 5 });
  expect(bytes.subarray(0, (3 << 20) + 1).every((byte) => byte === 0)).toBe(true);
  const other = fakeHeap(0);
  let stoppedDone = 0;
  warmHeap(other.heap, 2 << 20, () => stoppedDone++)(); // one step: `done` would come in its turn
  await new Promise((resolve) => setTimeout(resolve, 0)); // the turn its first step was due
  expect(stoppedDone).toBe(0);
});

test("touchInSteps zeroes a view in 2 MiB steps, one a turn, asking for the view at each", async () => {
  const bytes = new Uint8Array((5 << 20) + 3).fill(0xaa);
  const asked: number[] = [];
  let done = 0;
  touchInSteps(
    () => {
      asked.push(bytes.indexOf(0xaa));
      return bytes;
    },
    () => done++,
  );
  expect(asked).toEqual([]); // nothing before the event loop turns
  await vi.waitFor(() => expect(done).toBe(1), { timeout: 30_000, interval: 5 });
  expect(asked).toEqual([0, 2 << 20, 4 << 20]);
  expect(bytes.every((byte) => byte === 0)).toBe(true);
});

test("touchInSteps stopped half-way touches nothing more and never calls `done`", async () => {
  const bytes = new Uint8Array(8 << 20).fill(0xaa);
  let done = 0;
  let steps = 0;
  let stop = () => {};
  stop = touchInSteps(
    () => {
      if (++steps === 2) stop();
      return bytes;
    },
    () => done++,
  );
  await vi.waitFor(() => expect(steps).toBe(2), { timeout: 30_000, interval: 5 });
  await new Promise((resolve) => setTimeout(resolve, 0)); // the turn a third step would be due
  expect(steps).toBe(2);
  expect(done).toBe(0);
  expect(bytes.subarray(4 << 20).every((byte) => byte === 0xaa)).toBe(true);
});
