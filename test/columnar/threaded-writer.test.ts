// ThreadedColumnarWriter's encoder thread: once the file is closed, the thread ends by itself
// (exit code 0), and close() does not wait for it to be torn down.
import { once } from "node:events";
import { Worker } from "node:worker_threads";
import { expect, test, vi } from "vitest";
import { init } from "../../src/index.js";
import { ArrowCodec } from "../../src/columnar/arrow.js";
import { ThreadedColumnarWriter } from "../../src/columnar/threaded-writer.js";
import { generateSmallRollouts } from "../../bench/generate.js";

test("the encoder thread ends by itself once the file is closed", async () => {
  const cf = await init();
  const arrow = new ArrowCodec(await import("apache-arrow"));
  const workers: Worker[] = [];
  const on = Worker.prototype.on;
  vi.spyOn(Worker.prototype, "on").mockImplementation(function (this: Worker, event, listener) {
    if (event === "exit") workers.push(this);
    return on.call(this, event, listener);
  });
  const terminate = vi.spyOn(Worker.prototype, "terminate");
  const chunks: Uint8Array[] = [];
  const writer = new ThreadedColumnarWriter(
    { format: "parquet", layout: "rows" },
    { write: (bytes) => void chunks.push(bytes) },
    arrow,
  );
  vi.mocked(Worker.prototype.on).mockRestore();
  expect(workers).toHaveLength(1);
  const exited = once(workers[0]!, "exit");

  for (const rollout of generateSmallRollouts(3, 5, { arrays: "plain" })) {
    const plan = cf.plan(rollout);
    await writer.write(plan.rows);
    plan.release();
  }
  await writer.close();
  expect(Buffer.concat(chunks).subarray(-4).toString()).toBe("PAR1"); // the footer is out
  expect(await exited).toEqual([0]);
  expect(terminate).not.toHaveBeenCalled();
  terminate.mockRestore();
}, 120_000); // the thread ends within a second even on a loaded machine; if it does not, a failure
