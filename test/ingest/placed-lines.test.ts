// In-process, a line longer than a batch buffer is read straight into the scanner's input buffer
// (readBatches' LongLines room), not into batch buffers: its rows, report and note are those the
// worker threads give, which read it in batch buffers and copy it in.
import { describe, expect, it } from "vitest";
import { runRows } from "../../src/ingest/run.js";
import type { IngestOptions } from "../../src/ingest/process.js";
import type { ByteSink } from "../../src/ingest/sink.js";
import { goodLines, tempDir } from "./cli.js";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const OPTIONS: IngestOptions = { reader: "scan", backend: "wasm", from: "auto", maskFormat: "bits", notes: true };

function memorySink(): ByteSink & { text(): string } {
  const parts: Buffer[] = [];
  return {
    write(data, written) {
      parts.push(Buffer.from(typeof data === "string" ? Buffer.from(data) : Buffer.from(data)));
      written?.();
    },
    async close() {},
    text: () => Buffer.concat(parts).toString("utf8"),
  };
}

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
});
