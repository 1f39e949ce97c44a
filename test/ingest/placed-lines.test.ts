// In-process, a line longer than a batch buffer is read straight into the scanner's input buffer
// (readBatches' LongLines room), not into batch buffers: its rows, report and note are those the
// worker threads give, which read it in batch buffers and copy it in.
import { describe, expect, it, vi } from "vitest";
import { runRows } from "../../src/ingest/run.js";
import { LineProcessor, type IngestOptions } from "../../src/ingest/process.js";
import { goodLines, memorySink, tempDir } from "./cli.js";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const OPTIONS: IngestOptions = { reader: "scan", backend: "wasm", from: "auto", maskFormat: "bits", notes: true };

async function rows(path: string, jobs: number, chunk: number) {
  const [out, report] = [memorySink(), memorySink()];
  let notes = "";
  const totals = await runRows([path], { ...OPTIONS, jobs, chunk }, { rows: out, report, notes: (t) => (notes += t) });
  return { rows: out.text(), report: report.text(), notes, totals };
}

describe("rows in-process with lines longer than a batch buffer", () => {
  it("gives the rows, reports and notes the worker threads give, bytes counted", async () => {
    const good = goodLines(6, 11);
    const bad = JSON.parse(good[1]);
    bad.rollout_id = "bad-token";
    bad.calls[0].prompt_token_ids[3] = -5;
    const lines = [
      good[0],
      " ".repeat(9000), // a long blank line: skipped
      good[1],
      JSON.stringify(bad),
      `{"rollout_id":"cut","calls":[${"1,".repeat(5000)}`, // not JSON
      good[2],
      good[3],
      good[4],
    ];
    const text = lines.join("\n") + "\n" + good[5]; // the last line without a newline
    const path = join(tempDir(), "long-lines.jsonl");
    writeFileSync(path, text);
    const chunk = 1024;
    expect(lines.filter((line) => line.length > chunk).length).toBeGreaterThan(4);
    const inProcess = await rows(path, 1, chunk);
    const workers = await rows(path, 2, chunk);
    expect(inProcess.rows).toBe(workers.rows);
    expect(inProcess.report).toBe(workers.report);
    expect(inProcess.notes).toBe(workers.notes);
    expect(inProcess.totals).toEqual(workers.totals);
    expect(inProcess.totals.bytes).toBe(Buffer.byteLength(text));
    const reports = inProcess.report
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(reports.map((r) => [r.line, r.status, r.reason ?? null])).toEqual([
      [1, "ok", null],
      [3, "ok", null],
      [4, "rejected", "invalid_token"],
      [5, "rejected", "malformed_json"],
      [6, "ok", null],
      [7, "ok", null],
      [8, "ok", null],
      [9, "ok", null],
    ]);
    expect(reports[2].detail).toContain("prompt_token_ids[3] is -5");
  });

  it("with worker threads too, each long line is read into this thread's scanner and planned here, in order (issue 39)", async () => {
    // Sent to a worker, a long line would be read into batch buffers and copied into the worker's
    // scanner: two passes over fresh memory, which on 2 cores cost more than the worker gains.
    const good = goodLines(12, 5);
    const chunk = 2 * Math.max(...good.map((line) => line.length)); // several short lines a batch
    const lines = good.map((line, i) => (i % 3 === 1 ? `{${" ".repeat(chunk)}${line.slice(1)}` : line));
    const path = join(tempDir(), "mixed-long.jsonl");
    writeFileSync(path, lines.join("\n") + "\n");
    const processBatch = LineProcessor.prototype.processBatch;
    const placed: number[] = [];
    const spy = vi.spyOn(LineProcessor.prototype, "processBatch").mockImplementation(function (
      this: LineProcessor,
      batch,
      name,
      emit,
    ) {
      if (batch.placed !== undefined) placed.push(batch.firstLine);
      return processBatch.call(this, batch, name, emit);
    });
    let workers: Awaited<ReturnType<typeof rows>>;
    try {
      workers = await rows(path, 2, chunk);
    } finally {
      spy.mockRestore();
    }
    expect(placed).toEqual(good.flatMap((_, i) => (i % 3 === 1 ? [i + 1] : [])));
    const inProcess = await rows(path, 1, chunk);
    expect(workers.rows).toBe(inProcess.rows);
    expect(workers.report).toBe(inProcess.report);
    expect(workers.report.split("\n").filter((line) => line.includes('"status":"ok"'))).toHaveLength(good.length);
  });
});
