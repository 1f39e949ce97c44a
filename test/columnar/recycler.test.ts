// The recycler of column buffers (BufferRecycler) under the Arrow IPC writer, as `rows` uses it:
// a group's buffers go back to the pool only once the output says it is done with every chunk
// over them, and are handed out again after that; builders grow large buffers in place when
// `rows` asks (growInPlace); and `rows` turns both off when it is done.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tableFromIPC } from "@uwdata/flechette";
import { afterEach, describe, expect, test, vi } from "vitest";
import { init, toArrowIPC, toParquet, type Row } from "../../src/index.js";
import { Growable, recycler } from "../../src/columnar/buffers.js";
import { ArrowCodec } from "../../src/columnar/arrow.js";
import { ColumnarWriter } from "../../src/columnar/writer.js";
import { generateRollout, generateSmallRollouts } from "../../bench/generate.js";
import { rolloutToJson } from "../../src/ingest/read.js";
import { cli, tempDir } from "../ingest/cli.js";
import { LOGIN_BUG } from "../support/fixtures.js";

/** Buffers smaller than this are never pooled (RECYCLED_MIN_BYTES). */
const POOLED_FROM = 64 << 10;

afterEach(() => {
  recycler.setLimit(0);
  recycler.growInPlace = false;
});

/** ES2024's resizable ArrayBuffer, as far as these tests look at it. */
type Resizable = ArrayBuffer & { resizable: boolean; maxByteLength: number };

/**
 * A byte output that holds the chunks it is given (views, not copies) and says they are written
 * only when flushed, as a sink with a slow disk would: until then the writer must leave them be.
 */
class LateOutput {
  pending: { chunk: Uint8Array; copy: Uint8Array; written?: () => void }[] = [];
  out: Uint8Array[] = [];

  write(chunk: Uint8Array, written?: () => void): void {
    this.pending.push({ chunk, copy: chunk.slice(), written });
  }

  /** Takes every pending chunk's bytes now, then tells the writer it is done with them. */
  flush(): void {
    const pending = this.pending;
    this.pending = [];
    for (const { chunk } of pending) this.out.push(chunk.slice());
    for (const { written } of pending) written?.();
  }

  bytes(): Uint8Array {
    return Buffer.concat(this.out);
  }
}

/** The pooled-size buffers under chunks. */
const largeBuffers = (chunks: { chunk: Uint8Array }[]) =>
  new Set(chunks.map(({ chunk }) => chunk.buffer).filter((buffer) => buffer.byteLength >= POOLED_FROM));

describe("BufferRecycler under the Arrow IPC writer", () => {
  test("a group's buffers are reused only after the output is done with them", async () => {
    const cf = await init();
    // Rows with their own arrays (a plan's are views of the core's memory).
    const rows: Row[] = generateSmallRollouts(30, 5, { arrays: "plain" }).flatMap((rollout) =>
      cf.plan(rollout).rows.map((row) => {
        const copy: Record<string, unknown> = { ...row };
        for (const [field, value] of Object.entries(row))
          if (ArrayBuffer.isView(value)) copy[field] = (value as Uint8Array).slice();
        return copy as unknown as Row;
      }),
    );
    // Groups of the same sizes: the rows, the rows reversed (other bytes in buffers of the same
    // sizes, which a buffer reused too early would show), and so on.
    const groups = [rows, [...rows].reverse(), rows, [...rows].reverse()];
    recycler.setLimit(32 << 20);
    const output = new LateOutput();
    const writer = new ColumnarWriter({ format: "arrows", layout: "rows", rowGroupRows: rows.length }, output, {
      arrow: new ArrowCodec(await import("apache-arrow")),
    });

    await writer.write(groups[0]);
    const first = [...output.pending];
    expect(largeBuffers(first).size).toBeGreaterThan(0); // else nothing here is ever pooled
    await writer.write(groups[1]);
    const second = output.pending.slice(first.length);
    expect(largeBuffers(second).size).toBeGreaterThan(0);
    // The first group's chunks, not yet written, are as they were.
    for (const { chunk, copy } of first) expect(Buffer.from(chunk).equals(copy)).toBe(true);
    for (const buffer of largeBuffers(second)) expect(largeBuffers(first).has(buffer)).toBe(false);

    output.flush();
    expect(recycler.bytes).toBeGreaterThan(0);
    const take = vi.spyOn(recycler, "take");
    await writer.write(groups[2]);
    const reused = take.mock.results.map((result) => result.value).filter((buffer) => buffer !== null);
    take.mockRestore();
    const earlier = new Set([...largeBuffers(first), ...largeBuffers(second)]);
    // Buffers of the written groups are handed out again (a finished group's builder takes the
    // next group's buffers as it hands out its own), and the fourth group's chunks are over them.
    expect(reused.some((buffer) => earlier.has(buffer))).toBe(true);
    await writer.write(groups[3]);
    expect([...largeBuffers(output.pending)].some((buffer) => earlier.has(buffer))).toBe(true);

    await writer.close();
    output.flush();
    // Read back by another library: every group whole, the recycled ones too.
    const table = tableFromIPC(output.bytes(), { useProxy: false });
    expect(table.numRows).toBe(groups.length * rows.length);
    const records = table.toArray() as { rollout_id: string; row: number; token_ids: ArrayLike<number> }[];
    const key = (id: string, row: number, tokens: ArrayLike<number>) => `${id}/${row}/${Array.from(tokens).join(",")}`;
    const expected = groups.flat().map((row) => key(row.rolloutId, row.index, row.tokenIds));
    expect(records.map((record) => key(record.rollout_id, record.row, record.token_ids))).toEqual(expected);
  });
});

describe("growInPlace", () => {
  test("a builder grows its resizable buffer in place from 256 KiB, copies past 32 MiB, and keeps every value", () => {
    recycler.setLimit(32 << 20);
    recycler.growInPlace = true;
    const values = new Growable(Int32Array);
    const buffers: ArrayBufferLike[] = [];
    let pushed = 0;
    for (const upTo of [1 << 10, 1 << 16, 1 << 18, 1 << 21, 9 << 20]) {
      const chunk = new Int32Array(upTo - pushed);
      for (let i = 0; i < chunk.length; i++) chunk[i] = (pushed + i) * 7;
      values.pushAll(chunk);
      pushed = upTo;
      buffers.push(values.data.buffer);
    }
    const [small, , quarter, eight, past] = buffers as Resizable[];
    expect(small.resizable).toBe(false); // 4 KiB: a plain buffer
    expect(quarter.resizable).toBe(true); // 1 MiB, from its first 256 KiB ...
    expect(eight).toBe(quarter); // ... grown in place to 8 MiB ...
    expect(eight.byteLength).toBe(8 << 20);
    expect(past).not.toBe(quarter); // ... and 36 MiB, past its maximum, a copy
    const view = values.view();
    expect(view.length).toBe(pushed);
    expect(view.every((value, i) => value === i * 7)).toBe(true);
  });

  test("off (as for library callers), a builder never makes a resizable buffer", () => {
    recycler.setLimit(32 << 20);
    const values = new Growable(Float32Array);
    values.pushAll(new Float32Array(1 << 20));
    expect((values.data.buffer as Resizable).resizable).toBe(false);
  });

  test("rows: several row groups of long rows, grown in place, are the bytes the API writes for them", async () => {
    const dir = tempDir();
    const rollouts = [
      generateRollout({ calls: 300, seed: 3, arrays: "plain" }),
      ...generateSmallRollouts(5, 2, { arrays: "plain" }),
    ];
    const input = join(dir, "long.jsonl");
    writeFileSync(input, rollouts.map((rollout) => rolloutToJson(rollout)).join("\n") + "\n");
    const cf = await init();
    const plans = rollouts.map((rollout) => cf.plan(rollout));
    const resize = vi.spyOn(ArrayBuffer.prototype as unknown as { resize(bytes: number): void }, "resize");
    try {
      for (const [name, bytes] of [
        ["rows.arrow", await toArrowIPC(plans, { rowGroupRows: 20 })],
        ["rows.parquet", await toParquet(plans, { rowGroupRows: 20 })],
      ] as const) {
        resize.mockClear();
        const run = await cli("rows", input, "-o", join(dir, name), "--row-group-rows", "20", "--jobs", "1", "--quiet");
        expect(run.code, run.stderr).toBe(0);
        expect(resize.mock.calls.length, name).toBeGreaterThan(0); // else nothing here grew in place
        expect(Buffer.from(bytes).equals(readFileSync(join(dir, name))), name).toBe(true);
      }
    } finally {
      resize.mockRestore();
      for (const plan of plans) plan.release();
    }
  });
});

describe("rows and this thread's recycler", () => {
  test.each(["rows.arrow", "rows.arrows", "rows.parquet", "rows.jsonl"])(
    "%s: the pool's limit is as it was after the run",
    async (name) => {
      const dir = tempDir();
      for (const before of [0, 1 << 20]) {
        recycler.setLimit(before);
        const run = await cli("rows", LOGIN_BUG, "-o", join(dir, name), "--quiet");
        expect(run.code).toBe(0);
        expect(recycler.limit).toBe(before);
        expect(recycler.growInPlace).toBe(false);
      }
      expect(recycler.bytes).toBe(0);
    },
  );

  test.each(["rows.arrow", "rows.arrows"])("%s: and after a run whose writer fails", async (name) => {
    const dir = tempDir();
    const close = vi.spyOn(ColumnarWriter.prototype, "close").mockRejectedValue(new Error("the disk left"));
    try {
      const run = await cli("rows", LOGIN_BUG, "-o", join(dir, name), "--quiet");
      expect(run.code).not.toBe(0);
      expect(run.stderr).toContain("the disk left");
    } finally {
      close.mockRestore();
    }
    expect(recycler.limit).toBe(0);
    expect(recycler.growInPlace).toBe(false);
  });
});
