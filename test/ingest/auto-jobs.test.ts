// The default --jobs (autoJobs): in-process below WORKERS_FROM_BYTES, workers above; input of
// unknown size (stdin, a pipe) starts in-process and moves to workers once that much has been
// read. Wherever it moves, the rows, reports and columns are the bytes one job writes.
import { Readable } from "node:stream";
import { describe, expect, test, vi } from "vitest";
import { runRows, type RunOptions } from "../../src/ingest/run.js";
import type { ByteSink } from "../../src/ingest/sink.js";
import { WorkerPool } from "../../src/ingest/pool.js";
import { goodLines } from "./cli.js";

const BASE: RunOptions = {
  reader: "scan",
  backend: "wasm",
  from: "auto",
  maskFormat: "bits",
  notes: false,
  jobs: 2,
  chunk: 4096,
};

function collecting(): ByteSink & { text(): string } {
  const chunks: Buffer[] = [];
  return {
    write(data) {
      chunks.push(
        Buffer.from(
          typeof data === "string" ? Buffer.from(data) : Buffer.from(data.buffer, data.byteOffset, data.byteLength),
        ),
      );
    },
    close: async () => {},
    text: () => Buffer.concat(chunks).toString("utf8"),
  };
}

/** Runs `rows` on `input` fed as stdin; returns its rows, its reports, and how many worker pools it made. */
async function run(input: string, options: Partial<RunOptions>) {
  const rows = collecting();
  const report = collecting();
  const pools = vi.spyOn(WorkerPool.prototype, "submit");
  const stdin = vi
    .spyOn(process, "stdin", "get")
    .mockReturnValue(Readable.from([Buffer.from(input)]) as unknown as typeof process.stdin);
  try {
    await runRows(["-"], { ...BASE, ...options }, { rows, report, notes: () => {} });
    return { rows: rows.text(), report: report.text(), submitted: pools.mock.calls.length };
  } finally {
    pools.mockRestore();
    stdin.mockRestore();
  }
}

describe("the default --jobs", () => {
  const lines = goodLines(80, 3);
  const input = lines.join("\n") + "\n";
  // Batches of a few lines each: a line longer than a batch is planned in-process anyway (issue 39).
  const chunk = 2 * Math.max(...lines.map((line) => line.length));

  test("stdin: in-process first, on workers once past the threshold — the same bytes as one job", async () => {
    const one = await run(input, { jobs: 1, chunk });
    expect(one.submitted).toBe(0);
    const moved = await run(input, { autoJobs: true, workersFromBytes: input.length >> 1, chunk });
    expect(moved.submitted).toBeGreaterThan(0);
    expect(moved.submitted).toBeLessThan(input.length / chunk); // not every batch: the first half was planned in-process
    expect(moved.rows).toBe(one.rows);
    expect(moved.report).toBe(one.report);
  });

  test("below the threshold the default starts no worker", async () => {
    const small = await run(input, { autoJobs: true, workersFromBytes: input.length * 2 });
    expect(small.submitted).toBe(0);
  });
});
