// The worker pool starts workers as batches need them: `--jobs 64` on a short input does not
// pay for 64 threads (each with its own WebAssembly instances), and output stays in order.
import { describe, expect, it } from "vitest";
import { WorkerPool } from "../../src/ingest/pool.js";
import type { IngestOptions, Piece } from "../../src/ingest/process.js";
import type { Batch } from "../../src/ingest/batches.js";
import { goodLines } from "./cli.js";

const OPTIONS: IngestOptions = { reader: "scan", backend: "wasm", from: "auto", maskFormat: "bits", notes: false };

function batchOf(line: string, firstLine: number): Batch {
  const bytes = Buffer.from(line + "\n");
  const owned = new Uint8Array(new ArrayBuffer(bytes.length));
  owned.set(bytes);
  return { bytes: owned, firstLine, lineCount: 1 };
}

describe("WorkerPool", () => {
  it("starts no more workers than batches were in flight, and writes in input order", async () => {
    const lines = goodLines(6, 4);
    const reports: string[] = [];
    const pool = new WorkerPool(64, OPTIONS, async (piece: Piece) => {
      reports.push(...piece.reports.split("\n").filter((line) => line !== ""));
    });
    try {
      for (const [i, line] of lines.entries()) await pool.submit(batchOf(line, i + 1), "in.jsonl");
      await pool.drain();
    } finally {
      await pool.close();
    }
    expect(reports.map((report) => JSON.parse(report).rollout_id)).toEqual(
      lines.map((line) => JSON.parse(line).rollout_id),
    );
    const started = (pool as unknown as { workers: unknown[] }).workers.length;
    expect(started).toBeGreaterThanOrEqual(1);
    expect(started).toBeLessThanOrEqual(lines.length);
  });
});
