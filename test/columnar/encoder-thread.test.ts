// The Parquet encoder thread's side of its protocol with ThreadedColumnarWriter: while it waits
// for its first row group it sends one spare shared buffer (touched) for the writer to put that
// group's IPC stream in; a stream in a shared buffer or transferred is said "copied" without a
// buffer coming back; the groups come back as a Parquet file, and the thread ends by itself once
// closed.
import { Worker } from "node:worker_threads";
import { expect, test } from "vitest";
import { init } from "../../src/index.js";
import { ArrowCodec } from "../../src/columnar/arrow.js";
import { RecordColumns } from "../../src/columnar/columns.js";
import type { FromEncoder } from "../../src/columnar/encoder-thread.js";
import { threadUrl } from "../../src/thread-url.js";
import { generateSmallRollouts } from "../../bench/generate.js";

test("waiting for its first group, the encoder thread sends a spare buffer; then it encodes and ends", async () => {
  // The built thread, in dist/ (as the writer run from src/ starts it).
  const worker = new Worker(threadUrl(import.meta.url, "columnar", "encoder-thread.js"), {
    workerData: { compression: "zstd", tieringBudget: 100_000_000 },
  });
  const messages: FromEncoder[] = [];
  let spare: () => void = () => {};
  const spareCame = new Promise<void>((resolve) => (spare = resolve));
  let closed: () => void = () => {};
  const closedCame = new Promise<void>((resolve) => (closed = resolve));
  worker.on("message", (message: FromEncoder) => {
    messages.push(message);
    if (message.type === "spare") spare();
    if (message.type === "closed" || message.type === "error") closed();
  });
  const exited = new Promise<number>((resolve) => worker.on("exit", resolve));
  await spareCame;
  const first = messages[0];
  expect(first?.type).toBe("spare");
  if (first?.type !== "spare") throw new Error("no spare buffer first");
  const buffer = first.buffer;
  expect(buffer).toBeInstanceOf(SharedArrayBuffer);
  expect(buffer.byteLength).toBe(24 << 20);

  const cf = await init();
  const arrow = new ArrowCodec(await import("apache-arrow"));
  const columns = new RecordColumns("rows");
  for (const rollout of generateSmallRollouts(2, 3, { arrays: "plain" })) {
    const plan = cf.plan(rollout);
    for (const row of plan.rows) columns.add(row);
    plan.release();
  }
  const group = arrow.recordBatch(columns.finish());
  const shared = arrow.ipcStream("rows", group, { bytes: new Uint8Array(buffer) });
  worker.postMessage({ type: "ipc", bytes: shared }); // shared, not transferred
  const own = arrow.ipcStream("rows", group);
  worker.postMessage({ type: "ipc", bytes: own }, [own.buffer as ArrayBuffer]);
  worker.postMessage({ type: "close" });
  await closedCame;
  expect(messages.map((message) => message.type).filter((type) => type !== "bytes")).toEqual([
    "spare",
    "copied",
    "taken",
    "copied",
    "taken",
    "closed",
  ]);
  expect(messages.some((message) => "buffer" in message && message.type !== "spare")).toBe(false);
  const file = Buffer.concat(messages.flatMap((message) => (message.type === "bytes" ? [message.bytes] : [])));
  expect(file.subarray(0, 4).toString()).toBe("PAR1");
  expect(file.subarray(-4).toString()).toBe("PAR1");
  expect(await exited).toBe(0);
}, 120_000); // the spare comes within a few seconds even on a loaded machine; without it, a failure
