// The streaming line reader: whatever the read sizes, batches hold whole lines, in order, with
// true line numbers, and a long line stays in the chunk buffers it was read into (never joined).
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import {
  BufferPool,
  batchBuffers,
  batchLength,
  forEachLine,
  joinParts,
  lineParts,
  readBatches,
  readWhole,
  sniffDocument,
  streamSource,
  type Batch,
  type ByteSource,
  type LongLines,
} from "../../src/ingest/batches.js";

/** A source that hands out the input in reads of the given sizes (cycled), like a slow pipe. */
function chunkedSource(input: Uint8Array, sizes: number[]): ByteSource & { closed: boolean } {
  let at = 0;
  let turn = 0;
  const source = {
    closed: false,
    async read(into: Uint8Array, offset: number, length: number) {
      const n = Math.min(length, sizes[turn++ % sizes.length], input.length - at);
      into.set(input.subarray(at, at + n), offset);
      at += n;
      return n;
    },
    async close() {
      source.closed = true;
    },
  };
  return source;
}

async function collect(source: ByteSource, chunk: number): Promise<Batch[]> {
  const out: Batch[] = [];
  for await (const batch of readBatches(source, new BufferPool(chunk))) out.push(batch);
  return out;
}

/** Lines as [number, text] from batches, checking batch invariants on the way. */
function linesOf(batches: Batch[]): [number, string][] {
  const out: [number, string][] = [];
  let expected = 1;
  for (const [i, batch] of batches.entries()) {
    expect(batch.firstLine).toBe(expected);
    const isLast = i === batches.length - 1;
    if (batch.parts !== undefined) {
      // One long line in several chunk buffers, each owned from the start: transferable.
      expect(batch.parts.length).toBeGreaterThan(1);
      for (const part of batch.parts) expect(part.byteOffset).toBe(0);
      expect(batch.lineCount).toBe(1);
      const joined = joinParts(batch.parts);
      if (!isLast) expect(joined[joined.length - 1]).toBe(10);
      out.push([batch.firstLine, Buffer.from(joinParts(lineParts(batch))).toString("latin1")]);
      expected++;
      continue;
    }
    expect(batch.bytes.byteOffset).toBe(0); // owns its buffer from the start: transferable
    if (!isLast) expect(batch.bytes[batch.bytes.length - 1]).toBe(10);
    let count = 0;
    forEachLine(batch, (start, end, line) => {
      out.push([line, Buffer.from(batch.bytes.subarray(start, end)).toString("latin1")]);
      count++;
    });
    expect(count).toBe(batch.lineCount);
    expected += batch.lineCount;
  }
  return out;
}

function expectedLines(text: string): [number, string][] {
  const parts = text.split("\n");
  if (parts[parts.length - 1] === "") parts.pop(); // a final newline ends the last line
  return parts.map((line, i) => [i + 1, line]);
}

const encode = (text: string) => new Uint8Array(Buffer.from(text, "latin1"));

describe("readBatches", () => {
  const text = ['{"a":1}', "", "  ", "x".repeat(300), "\r", '{"b":2}\r', "last"].join("\n");

  it("cuts any read pattern into the same lines with true numbers, blank ones included", async () => {
    const want = expectedLines(text);
    for (const sizes of [[1], [2, 3, 5, 7], [13], [64], [1 << 20]]) {
      for (const chunk of [1, 8, 64, 4096]) {
        const source = chunkedSource(encode(text), sizes);
        const batches = await collect(source, chunk);
        expect(linesOf(batches)).toEqual(want);
        expect(source.closed).toBe(true);
      }
    }
  });

  it("keeps a final newline from making an extra line, and an unterminated last line whole", async () => {
    expect(linesOf(await collect(chunkedSource(encode("a\nb\n"), [3]), 4))).toEqual([
      [1, "a"],
      [2, "b"],
    ]);
    const cut = await collect(chunkedSource(encode('a\n{"cut'), [3]), 4);
    expect(linesOf(cut)).toEqual([
      [1, "a"],
      [2, '{"cut'],
    ]);
    expect(cut[cut.length - 1].bytes[cut[cut.length - 1].bytes.length - 1]).not.toBe(10);
    expect(await collect(chunkedSource(new Uint8Array(0), [3]), 4)).toEqual([]);
  });

  it("hands a multi-MB line on in the chunks it was read into, never joining or growing a buffer", async () => {
    const long = "[" + "1234567,".repeat(5 << 17) + "0]"; // ~5 MB
    const input = encode(`small\n${long}\nafter\n`);
    const chunk = 4096;
    const batches = await collect(chunkedSource(input, [997, 4093, 65536]), chunk);
    expect(linesOf(batches)).toEqual([
      [1, "small"],
      [2, long],
      [3, "after"],
    ]);
    // Bounded by design: no buffer is ever larger than a chunk, and the line is not copied.
    for (const batch of batches) for (const buffer of batchBuffers(batch)) expect(buffer.byteLength).toBe(chunk);
    expect(batches.map((batch) => batch.parts !== undefined)).toEqual([false, true, false]);
    expect(batchLength(batches[1])).toBe(long.length + 1);
    for (const part of batches[1].parts!.slice(0, -1)) expect(part.length).toBe(chunk); // full chunks, then the end
  });

  it("reads a stream (stdin) of many small chunks", async () => {
    const parts: Buffer[] = [];
    let text = "";
    for (let i = 0; i < 500; i++) {
      const line = `{"i":${i},"pad":"${"p".repeat(i % 37)}"}\n`;
      text += line;
      for (let at = 0; at < line.length; at += 5) parts.push(Buffer.from(line.slice(at, at + 5)));
    }
    const batches = await collect(streamSource(Readable.from(parts)), 256);
    expect(batches.length).toBeGreaterThan(10);
    expect(linesOf(batches)).toEqual(expectedLines(text));
  });

  it("reuses the buffers given back, so a long run touches a few chunks of memory", async () => {
    const text = Array.from({ length: 2000 }, (_, i) => `{"i":${i}}`).join("\n") + "\n";
    const pool = new BufferPool(256);
    const seen = new Set<ArrayBufferLike>();
    const lines: [number, string][] = [];
    for await (const batch of readBatches(chunkedSource(encode(text), [100]), pool)) {
      seen.add(batch.bytes.buffer);
      forEachLine(batch, (start, end, line) =>
        lines.push([line, Buffer.from(batch.bytes.subarray(start, end)).toString("latin1")]),
      );
      pool.give(batch.bytes.buffer as ArrayBuffer); // planned: back to the pool
    }
    expect(lines).toEqual(expectedLines(text));
    expect(seen.size).toBeLessThanOrEqual(3);
  });
});

/**
 * A LongLines room like the scanner's input buffer: one growing buffer (at most `most` bytes),
 * whose views keep what was written; asked for batch `index`, it checks that the batches before
 * it were all handed on (`taken`), as rows' in-process planner does.
 */
function growingRoom(most: number) {
  let memory = new Uint8Array(0);
  const state = { taken: 0, asked: [] as number[], memory: () => memory };
  const longLines: LongLines = async (index) => {
    expect(index).toBe(state.taken);
    state.asked.push(index);
    return {
      room(length: number) {
        if (length > most) return null;
        if (length > memory.length) {
          const grown = new Uint8Array(Math.min(most, Math.max(length, memory.length * 2)));
          grown.set(memory);
          memory = grown;
        }
        return memory.subarray(0, length);
      },
    };
  };
  return { state, longLines };
}

/** Lines as [number, text] from batches read with a room (a placed line is read from it at once). */
async function linesWithRoom(source: ByteSource, chunk: number, most: number, maxLineBytes = Infinity) {
  const { state, longLines } = growingRoom(most);
  const out: [number, string][] = [];
  const kinds: string[] = [];
  let expected = 1;
  for await (const batch of readBatches(source, new BufferPool(chunk), maxLineBytes, longLines)) {
    expect(batch.firstLine).toBe(expected);
    if (batch.placed !== undefined) {
      kinds.push("placed");
      expect(batch.lineCount).toBe(1);
      out.push([batch.firstLine, Buffer.from(state.memory().subarray(0, batch.placed.bytes)).toString("latin1")]);
    } else if (batch.dropped !== undefined) {
      kinds.push(`dropped ${batch.dropped.bytes}`);
      out.push([batch.firstLine, `<${batch.dropped.bytes} bytes>`]);
    } else {
      kinds.push(batch.parts !== undefined ? "parts" : "lines");
      out.push(
        ...linesOf([{ ...batch, firstLine: 1 }]).map(([n, line]): [number, string] => [n - 1 + batch.firstLine, line]),
      );
    }
    expected += batch.lineCount;
    state.taken++;
  }
  return { lines: out, kinds, asked: state.asked };
}

describe("readBatches with a room for long lines (LongLines)", () => {
  const long = (n: number, c = "7") => "[" + `${c},`.repeat(n) + "0]";

  it("reads a long line straight into the room, whatever the read sizes, the lines around it as before", async () => {
    const lines = ["a", long(3000), "", long(50, "  "), "b", long(5000), long(4000)];
    for (const end of ["\n", ""]) {
      const text = lines.join("\n") + end;
      for (const sizes of [[1 << 20], [997, 4093], [7], [64]]) {
        const got = await linesWithRoom(chunkedSource(encode(text), sizes), 64, Infinity);
        expect(got.lines).toEqual(expectedLines(text));
        expect(got.kinds.filter((kind) => kind === "placed").length).toBe(4);
        // Asked once per long line, never ahead of the batches before it.
        expect(got.asked.length).toBe(4);
      }
    }
  });

  it("counts a placed line's bytes (and its newline) as the batch's length", async () => {
    const text = `x\n${long(100)}\n${long(100)}`;
    const batches: Batch[] = [];
    const { state, longLines } = growingRoom(Infinity);
    for await (const batch of readBatches(chunkedSource(encode(text), [10]), new BufferPool(16), Infinity, longLines)) {
      batches.push(batch);
      state.taken++;
    }
    expect(batches.reduce((n, batch) => n + batchLength(batch), 0)).toBe(text.length);
    expect(batches[1].placed).toEqual({ bytes: long(100).length, newline: true });
    expect(batches[2].placed).toEqual({ bytes: long(100).length, newline: false });
    expect(batchBuffers(batches[1])).toEqual([]);
  });

  it("drops a line the room cannot hold, or past maxLineBytes, keeping its place and length", async () => {
    const text = `a\n${long(2000)}\nb\n${long(10)}\n`;
    for (const [most, max] of [
      [1000, Infinity],
      [Infinity, 1000],
      [Infinity, long(2000).length - 17], // over it by more than a chunk
    ]) {
      const got = await linesWithRoom(chunkedSource(encode(text), [100]), 16, most, max);
      expect(got.lines).toEqual([
        [1, "a"],
        [2, `<${long(2000).length} bytes>`],
        [3, "b"],
        [4, long(10)],
      ]);
    }
  });

  it("keeps every line up to maxLineBytes", async () => {
    const text = `a\n${long(2000)}\n`;
    const got = await linesWithRoom(chunkedSource(encode(text), [7]), 16, Infinity, long(2000).length);
    expect(got.lines).toEqual(expectedLines(text));
  });

  it("falls back to batch buffers when there is no room", async () => {
    const text = `a\n${long(300)}\nb`;
    const got = [] as Batch[];
    for await (const batch of readBatches(
      chunkedSource(encode(text), [50]),
      new BufferPool(64),
      Infinity,
      async () => null,
    ))
      got.push(batch);
    expect(linesOf(got)).toEqual(expectedLines(text));
    expect(got.some((batch) => batch.parts !== undefined)).toBe(true);
  });
});

describe("readBatches with maxLineBytes (a line longer than any reader takes)", () => {
  /** Every buffer the pool hands out, to check how many a run needs. */
  class CountingPool extends BufferPool {
    readonly handedOut = new Set<ArrayBufferLike>();
    override take(): Uint8Array {
      const buffer = super.take();
      this.handedOut.add(buffer.buffer);
      return buffer;
    }
  }

  async function read(text: string, maxLineBytes: number, chunk = 16, sizes = [7, 16, 5]) {
    const pool = new CountingPool(chunk);
    const batches: Batch[] = [];
    for await (const batch of readBatches(chunkedSource(encode(text), sizes), pool, maxLineBytes)) batches.push(batch);
    return { batches, buffers: pool.handedOut.size };
  }

  it("drops a line once more than the limit of it was read, keeping its place, length and end", async () => {
    const long = "z".repeat(1000);
    const { batches, buffers } = await read(`a\n${long}\n${"y".repeat(40)}\nb`, 64);
    const dropped = batches.filter((batch) => batch.dropped !== undefined);
    expect(dropped).toHaveLength(1);
    expect(dropped[0]).toMatchObject({
      firstLine: 2,
      lineCount: 1,
      dropped: { bytes: 1000, newline: true, blank: false },
    });
    expect(batchLength(dropped[0])).toBe(1001);
    expect(batchBuffers(dropped[0])).toEqual([]);
    // The lines around it, the one kept in parts under the limit included, are whole.
    const kept = batches.filter((batch) => batch.dropped === undefined);
    const texts: [number, string][] = [];
    for (const batch of kept) {
      if (batch.parts !== undefined)
        texts.push([batch.firstLine, Buffer.from(joinParts(lineParts(batch))).toString("latin1")]);
      else
        forEachLine(batch, (start, end, line) =>
          texts.push([line, Buffer.from(batch.bytes.subarray(start, end)).toString("latin1")]),
        );
    }
    expect(texts).toEqual([
      [1, "a"],
      [3, "y".repeat(40)],
      [4, "b"],
    ]);
    // Bounded: the 1000-byte line went through a few 16-byte buffers, not 63 of them.
    expect(buffers).toBeLessThanOrEqual(8);
  });

  it("keeps every line up to the limit, and drops an unterminated last line or a blank one as such", async () => {
    for (const length of [16, 48, 63, 64]) {
      const { batches } = await read(`${"k".repeat(length)}\n`, 64);
      expect(batches.some((batch) => batch.dropped !== undefined)).toBe(false);
    }
    const cut = await read(`a\n${"c".repeat(200)}`, 64);
    expect(cut.batches.at(-1)).toMatchObject({ firstLine: 2, dropped: { bytes: 200, newline: false, blank: false } });
    const blank = await read(`${" \t\r".repeat(100)}\nx\n`, 64);
    expect(blank.batches[0]).toMatchObject({ firstLine: 1, dropped: { bytes: 300, newline: true, blank: true } });
    const notQuiteBlank = await read(`${" ".repeat(150)}!${" ".repeat(150)}\n`, 64);
    expect(notQuiteBlank.batches[0].dropped).toMatchObject({ bytes: 301, blank: false });
  });
});

describe("sniffDocument and readWhole (an input with no name to go by)", () => {
  const pretty = new TextEncoder().encode(`\n\n{\n  "a": [1, 2, 3]\n}\n`);

  it("looks at the first line that is not blank, whatever the read sizes, and hands every byte on", async () => {
    for (const sizes of [[1], [2, 1, 3], [4096]]) {
      const sniffed = await sniffDocument(chunkedSource(pretty, sizes));
      expect([sizes, sniffed.document]).toEqual([sizes, true]);
      expect(Array.from((await readWhole(sniffed.source, 1 << 20))!)).toEqual(Array.from(pretty));
    }
    const jsonl = new TextEncoder().encode(`{"a": 1}\n{\n`);
    const sniffed = await sniffDocument(chunkedSource(jsonl, [1]));
    expect(sniffed.document).toBe(false);
    expect(linesOf(await collect(sniffed.source, 64))).toEqual(expectedLines(`{"a": 1}\n{\n`));
  });

  it("decides by the whole first line that is not blank, however far it reaches (no window to fool)", async () => {
    const encode = (text: string) => new TextEncoder().encode(text);
    const sniff = async (text: string, sizes = [4096]) => {
      const bytes = encode(text);
      const sniffed = await sniffDocument(chunkedSource(bytes, sizes));
      // every byte handed on
      expect(Buffer.from((await readWhole(sniffed.source, bytes.length))!).equals(Buffer.from(bytes))).toBe(true);
      return sniffed.document;
    };
    const line = '{"rollout_id": "r", "calls": []}';
    expect(await sniff(`${"\n".repeat(65_535)}${line}\n${line}\n`)).toBe(false); // valid JSONL after many blank lines
    // `{` and blanks past a window, then more
    expect(await sniff(`{${" ".repeat(65_535)}"rollout_id": "r"}\n${line}\n`)).toBe(false);
    expect(await sniff(`${"\n".repeat(65_536)}{\n}\n`)).toBe(true); // a document after a window of blank lines
    expect(await sniff(`{${" ".repeat(70_000)}\n}`)).toBe(true);
    expect(await sniff(`\uFEFF[\n1]`, [1])).toBe(true); // a mark read a byte at a time
    expect(await sniff(`\uFEFF${line}\n`, [1, 2])).toBe(false);
    expect(await sniff(`\uFEFF`, [1])).toBe(false);
    expect(await sniff(`${" ".repeat(17 << 20)}{\n}`)).toBe(false); // past 16 MB of blanks it reads as JSONL
  });

  it("reads no further than the limit: null once there is more", async () => {
    expect(Array.from((await readWhole(chunkedSource(pretty, [3]), pretty.length))!)).toEqual(Array.from(pretty));
    const source = chunkedSource(pretty, [3]);
    expect(await readWhole(source, pretty.length - 1)).toBe(null);
    expect((await readWhole(chunkedSource(new Uint8Array(0), [1]), 0))?.length).toBe(0);
  });
});
