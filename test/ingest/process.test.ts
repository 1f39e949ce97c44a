// A rollout that runs out of memory half-way (in the scanner, or while its rows are written) is
// rejected with rollout_too_large; the rollouts around it come out exactly as without it.
import { describe, expect, it } from "vitest";
import { LineProcessor, type IngestOptions, type Piece } from "../../src/ingest/process.js";
import type { Batch } from "../../src/ingest/batches.js";
import { goodLines } from "./cli.js";

const OPTIONS: IngestOptions = { reader: "scan", backend: "wasm", from: "auto", maskFormat: "bits", notes: true };

function batchOf(lines: string[]): Batch {
  const bytes = new Uint8Array(Buffer.from(lines.join("\n") + "\n"));
  return { bytes, firstLine: 1, lineCount: lines.length };
}

async function run(
  processor: LineProcessor,
  batch: Batch,
): Promise<{ rows: string; reports: string[]; notes: string }> {
  const pieces: Piece[] = [];
  await processor.processBatch(batch, "in.jsonl", (piece) => {
    pieces.push(piece);
  });
  expect(pieces[pieces.length - 1].last).toBe(true);
  return {
    rows: Buffer.concat(pieces.flatMap((p) => p.rows)).toString("utf8"),
    reports: pieces
      .map((p) => p.reports)
      .join("")
      .split("\n")
      .filter((l) => l !== ""),
    notes: pieces.map((p) => p.notes).join(""),
  };
}

describe("LineProcessor out of memory", () => {
  const [first, big, third] = goodLines(2, 5);
  const bigId = JSON.parse(big).rollout_id as string;

  it("rejects a rollout whose rows fail half-way and keeps the others' bytes", async () => {
    const reference = await run(await LineProcessor.create(OPTIONS), batchOf([first, third]));
    const processor = await LineProcessor.create(OPTIONS);
    const serializer = (processor as unknown as { serializer: { writeRow: (...args: unknown[]) => void } }).serializer;
    const writeRow = serializer.writeRow.bind(serializer);
    let wroteBigRow = false;
    serializer.writeRow = (row: unknown, format: unknown, emit: unknown) => {
      if ((row as { rolloutId: string }).rolloutId === bigId) {
        if (wroteBigRow) throw new RangeError("Array buffer allocation failed");
        wroteBigRow = true; // its first row is written, then undone
      }
      writeRow(row, format, emit);
    };
    const result = await run(processor, batchOf([first, big, third]));
    expect(wroteBigRow).toBe(true);
    expect(result.rows).toBe(reference.rows);
    expect(result.reports).toHaveLength(3);
    expect(JSON.parse(result.reports[1])).toMatchObject({
      rollout_id: bigId,
      status: "rejected",
      reason: "rollout_too_large",
      line: 2,
      rows: 0,
    });
    expect(result.reports[0]).toBe(reference.reports[0]);
    expect(JSON.parse(result.reports[2])).toEqual({ ...JSON.parse(reference.reports[1]), line: 3 });
    expect(result.notes).toMatch(
      new RegExp(
        /^in\.jsonl:2: rejected \(rollout_too_large\): /.source +
          /the rollout does not fit in memory \(Array buffer allocation failed\)\n$/.source,
      ),
    );
  });

  it("replaces a scanner that ran out of memory and goes on with the next line", async () => {
    const processor = await LineProcessor.create(OPTIONS);
    const internals = processor as unknown as { scanner: { scan: (line: Uint8Array) => unknown } };
    const exhausted = internals.scanner;
    exhausted.scan = () => {
      throw new RangeError("Array buffer allocation failed");
    };
    const result = await run(processor, batchOf([big, first]));
    expect(JSON.parse(result.reports[0])).toMatchObject({ status: "rejected", reason: "rollout_too_large", line: 1 });
    expect(JSON.parse(result.reports[1])).toMatchObject({ status: "ok", line: 2 });
    expect(internals.scanner).not.toBe(exhausted);
  });

  it("lets go of a scanner a huge line grew (its memory never shrinks): the next line gets a fresh one", async () => {
    const reference = await run(await LineProcessor.create(OPTIONS), batchOf([first, big, third]));
    const processor = await LineProcessor.create(OPTIONS);
    const internals = processor as unknown as { scanner: { memoryBytes: number } | null; keepScannerBytes: number };
    const original = internals.scanner!;
    internals.keepScannerBytes = 1 << 20; // (256 MiB in use) the other lines need far less
    // ~1.2 MB of text and 0.8 MB of tokens: the scanner grows past 1 MiB for it.
    const agent = JSON.parse(first).calls[0].agent;
    const huge = JSON.stringify({
      ...JSON.parse(first),
      rollout_id: "huge",
      calls: [
        {
          id: "c",
          agent,
          prompt_token_ids: Array.from({ length: 200_000 }, (_, i) => i),
          generation_token_ids: [1],
          generation_log_probs: [-1],
        },
      ],
    });
    const result = await run(processor, batchOf([first, huge, big, third]));
    expect(original.memoryBytes).toBeGreaterThan(1 << 20); // grown by the huge line ...
    expect(internals.scanner).not.toBe(original); // ... and let go: later lines had a fresh one
    expect(internals.scanner!.memoryBytes).toBeLessThanOrEqual(1 << 20);
    expect(result.reports).toHaveLength(4);
    const withoutLine = (report: string) => ({ ...JSON.parse(report), line: 0 });
    expect([result.reports[0], result.reports[2], result.reports[3]].map(withoutLine)).toEqual(
      reference.reports.map(withoutLine),
    );
    expect(JSON.parse(result.reports[1])).toMatchObject({ rollout_id: "huge", status: "ok", rows: 1 });
  });

  it("lets a WebAssembly trap through (a bug, not a rollout too large)", async () => {
    const processor = await LineProcessor.create(OPTIONS);
    const internals = processor as unknown as { scanner: { scan: (line: Uint8Array) => unknown } };
    internals.scanner.scan = () => {
      throw new WebAssembly.RuntimeError("memory access out of bounds");
    };
    await expect(run(processor, batchOf([first]))).rejects.toThrow(WebAssembly.RuntimeError);
  });
});

describe("LineProcessor on a line the reader dropped unread (Batch.dropped)", () => {
  const dropped = (bytes: number, blank = false): Batch => ({
    bytes: new Uint8Array(0),
    dropped: { bytes, newline: true, blank },
    firstLine: 7,
    lineCount: 1,
  });

  it("rejects it with rollout_too_large in each reader's words, as if it had been kept", async () => {
    for (const [reader, detail] of [
      ["scan", "a line of 5000000000 bytes does not fit in the scanner's memory"],
      [
        "json",
        "the line has 5000000000 bytes, more than the JSON.parse reader takes (256 MB); " +
          "the WASM scanner (--backend wasm) reads lines of up to 4 GiB",
      ],
    ] as const) {
      const pieces: Piece[] = [];
      await (await LineProcessor.create({ ...OPTIONS, reader })).processBatch(dropped(5e9), "in.jsonl", (piece) => {
        pieces.push(piece);
      });
      expect(pieces).toHaveLength(1);
      expect(pieces[0]).toMatchObject({ last: true, rollouts: 1, rejected: 1, rowCount: 0, bytes: 5e9 + 1, rows: [] });
      expect(JSON.parse(pieces[0].reports)).toMatchObject({
        rollout_id: null,
        line: 7,
        status: "rejected",
        reason: "rollout_too_large",
        detail,
        rows: 0,
      });
      expect(pieces[0].notes).toBe(`in.jsonl:7: rejected (rollout_too_large): ${detail}\n`);
    }
  });

  it("skips it without a report when it was all blanks, as a short blank line is", async () => {
    const result = await run(await LineProcessor.create(OPTIONS), dropped(5e9, true));
    expect(result).toEqual({ rows: "", reports: [], notes: "" });
  });
});
