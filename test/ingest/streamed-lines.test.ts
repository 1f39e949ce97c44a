// Window mode in the line reader: a line longer than a chunk, from a source that can be read again
// at a position (a file), is handed piece by piece to its place's StreamedLine as it is read; when
// the stream gives up (at any point), the line's bytes read so far are read again into the room,
// and the line arrives whole there, as it did before window mode. Here the StreamedLine is a fake
// (no WebAssembly) that logs every byte it is given and scribbles over what it handed out.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  BufferPool,
  batchLength,
  forEachLine,
  joinParts,
  lineParts,
  readBatches,
  type Batch,
  type ByteSource,
  type LongLinePlace,
  type StreamedLine,
} from "../../src/ingest/batches.js";

const NEWLINE = 10;
const BOM = Uint8Array.of(0xef, 0xbb, 0xbf);

/** Where a fake stream says no: its `call`th (0-based) call of `at`. */
type GiveUp = { at: "space" | "scanned" | "finish"; call: number };
/** What a long line's place offers: a stream that may give up, or no stream (stream() null). */
type Plan = GiveUp | "never" | "no stream";

/** A file in memory: read() in the given sizes (cycled); readAgain() when `positional`. */
function memorySource(input: Uint8Array, sizes: readonly number[], positional = true) {
  let at = 0; // where read() goes on
  let turn = 0;
  const log = { closed: false, rereads: [] as [number, number][] };
  const source: ByteSource = {
    async read(into, offset, length) {
      const n = Math.min(length, sizes[turn++ % sizes.length], input.length - at);
      into.set(input.subarray(at, at + n), offset);
      at += n;
      return n;
    },
    ...(positional
      ? {
          async readAgain(into: Uint8Array, offset: number, length: number, position: number) {
            // Only what read() has already handed out is read again, and read() does not move.
            expect(position + length).toBeLessThanOrEqual(at);
            into.set(input.subarray(position, position + length), offset);
            log.rereads.push([position, length]);
          },
        }
      : {}),
    async close() {
      log.closed = true;
    },
  };
  return { source, log };
}

/**
 * The scanner's linear memory as the reader sees it: the room (inputBuffer) and the stream's
 * region both start at its start. Grown memory is filled with 0xcc, so a byte the reader never
 * wrote shows.
 */
class Memory {
  bytes = new Uint8Array(0);
  view(length: number): Uint8Array {
    if (length > this.bytes.length) {
      const grown = new Uint8Array(Math.max(length, 2 * this.bytes.length)).fill(0xcc);
      grown.set(this.bytes);
      this.bytes = grown;
    }
    return this.bytes.subarray(0, length);
  }
}

/**
 * A StreamedLine that logs the bytes it is given (`pieces`, one per scanned()) and says no as
 * `plan` tells. space(n) hands out views at shifting places of its region, filled with 0xee, of
 * n bytes or fewer (`views`, cycled: a region short of room gives less); scanned() scribbles 0xdd
 * over the whole view once it has logged the bytes (a scan's sentinel and whatever else it
 * writes there), so the reader must take what it needs before.
 */
class FakeStream implements StreamedLine {
  readonly pieces: Uint8Array[] = [];
  readonly lasts: boolean[] = [];
  gaveUp: GiveUp["at"] | null = null;
  finished = false;
  /** A call after it said no, or after finish(): the reader must not make one. */
  usedAfterEnd = false;
  private view: Uint8Array | null = null;
  private spaces = 0;
  private scans = 0;

  constructor(
    private readonly region: Uint8Array,
    private readonly plan: GiveUp | "never",
    private readonly shift: number,
    private readonly views: readonly number[] = [Infinity],
  ) {}

  /** The reader took a view and left without scanned(): its first piece was short of a chunk. */
  get dangling(): boolean {
    return this.view !== null;
  }

  private saysNo(at: GiveUp["at"], call: number): boolean {
    if (this.plan === "never" || this.plan.at !== at || this.plan.call !== call) return false;
    this.gaveUp = at;
    return true;
  }

  private ended(): boolean {
    if (this.gaveUp !== null || this.finished) this.usedAfterEnd = true;
    return this.usedAfterEnd;
  }

  space(length: number): Uint8Array | null {
    if (this.ended()) return null;
    if (this.view !== null) throw new Error("space() twice without scanned()");
    if (this.lasts.includes(true)) throw new Error("space() after the last piece");
    const call = this.spaces++;
    if (this.saysNo("space", call)) return null;
    const size = Math.max(1, Math.min(length, this.views[call % this.views.length]));
    const at = (this.shift * call) % (this.region.length - size + 1);
    this.view = this.region.subarray(at, at + size).fill(0xee);
    return this.view;
  }

  scanned(got: number, last: boolean): boolean {
    if (this.ended()) return false;
    const view = this.view;
    this.view = null;
    if (view === null) throw new Error("scanned() without space()");
    if (got < 0 || got > view.length) throw new Error(`scanned(${got}) of a view of ${view.length}`);
    this.pieces.push(view.slice(0, got));
    this.lasts.push(last);
    view.fill(0xdd);
    return !this.saysNo("scanned", this.scans++);
  }

  finish(): boolean {
    if (this.ended()) return false;
    if (this.lasts.at(-1) !== true) throw new Error("finish() before the last piece");
    if (this.saysNo("finish", 0)) return false;
    this.finished = true;
    return true;
  }

  get line(): Uint8Array {
    return Buffer.concat(this.pieces);
  }
}

/** One batch as seen by a planner, and what it was made of. */
type Seen =
  | { kind: "lines"; firstLine: number; lineCount: number; lines: Uint8Array[]; endsWithNewline: boolean }
  | { kind: "placed"; firstLine: number; line: Uint8Array; placed: NonNullable<Batch["placed"]> }
  | { kind: "streamed"; firstLine: number; placed: NonNullable<Batch["placed"]> }
  | { kind: "dropped"; firstLine: number; dropped: NonNullable<Batch["dropped"]> }
  | { kind: "parts"; firstLine: number; line: Uint8Array };

interface Options {
  chunk: number;
  sizes: readonly number[];
  /** The source can be read at a position (a file), or not (stdin). */
  positional?: boolean;
  maxLineBytes?: number;
  /** What the place of each long line offers, in turn (cycled); undefined: a place with no stream() at all. */
  plans?: readonly Plan[];
  regionBytes?: number;
  shift?: number;
  /** The views' lengths (see FakeStream), cycled. */
  views?: readonly number[];
  /** The room holds lines up to this long (room() is null past it). */
  most?: number;
}

/** Reads `input` with a room (and a stream, per `plans`) for long lines; every batch as planned. */
async function readAll(input: Uint8Array, options: Options) {
  const { chunk, sizes, positional = true, maxLineBytes = Infinity, plans } = options;
  const { source, log } = memorySource(input, sizes, positional);
  const memory = new Memory();
  const streams = new Map<number, FakeStream>(); // by the index of the batch the line is
  const offered: number[] = []; // indices asked for a place
  let taken = 0;
  let streamCalls = 0;
  let places = 0;
  const longLines = async (index: number): Promise<LongLinePlace> => {
    expect(index).toBe(taken); // the place is asked for once every batch before it is planned
    offered.push(index);
    const plan = plans?.[places++ % plans.length];
    const room = (length: number) => (length > (options.most ?? Infinity) ? null : memory.view(length));
    if (plan === undefined) return { room };
    return {
      room,
      stream() {
        streamCalls++;
        if (plan === "no stream") return null;
        const region = memory.view(options.regionBytes ?? 3 * chunk);
        const stream = new FakeStream(region, plan, options.shift ?? 7, options.views);
        streams.set(index, stream);
        return stream;
      },
    };
  };
  const seen: Seen[] = [];
  const batches: Batch[] = [];
  for await (const batch of readBatches(source, new BufferPool(chunk), maxLineBytes, longLines)) {
    batches.push(batch);
    const { firstLine } = batch;
    if (batch.dropped !== undefined) {
      expect(batch.lineCount).toBe(1);
      seen.push({ kind: "dropped", firstLine, dropped: batch.dropped });
    } else if (batch.placed?.streamed) {
      expect(batch.lineCount).toBe(1);
      expect(batch.bytes.length).toBe(0);
      seen.push({ kind: "streamed", firstLine, placed: batch.placed });
    } else if (batch.placed !== undefined) {
      // In the room until the next long line: read at once, as the planner does.
      expect(batch.lineCount).toBe(1);
      expect(batch.bytes.length).toBe(0);
      seen.push({ kind: "placed", firstLine, placed: batch.placed, line: memory.view(batch.placed.bytes).slice() });
    } else if (batch.parts !== undefined) {
      expect(batch.lineCount).toBe(1);
      seen.push({ kind: "parts", firstLine, line: joinParts(lineParts(batch)).slice() });
    } else {
      const lines: Uint8Array[] = [];
      forEachLine(batch, (start, end) => lines.push(batch.bytes.slice(start, end)));
      expect(lines.length).toBe(batch.lineCount);
      const endsWithNewline = batch.bytes[batch.bytes.length - 1] === NEWLINE;
      seen.push({ kind: "lines", firstLine, lineCount: batch.lineCount, lines, endsWithNewline });
    }
    taken++;
  }
  expect(log.closed).toBe(true);
  return { seen, batches, streams, offered, streamCalls, rereads: log.rereads };
}

/** The input's lines (without the byte order mark it may start with), each with whether `\n` ended it. */
function linesOf(input: Uint8Array): { bytes: Uint8Array; newline: boolean }[] {
  let text = Buffer.from(input);
  if (text.length >= 3 && text[0] === 0xef && text[1] === 0xbb && text[2] === 0xbf) text = text.subarray(3);
  const out: { bytes: Uint8Array; newline: boolean }[] = [];
  let start = 0;
  while (start < text.length) {
    const end = text.indexOf(NEWLINE, start);
    out.push({ bytes: text.subarray(start, end < 0 ? text.length : end), newline: end >= 0 });
    start = end < 0 ? text.length : end + 1;
  }
  return out;
}

const isBlank = (bytes: Uint8Array) => bytes.every((c) => c === 0x20 || c === 0x09 || c === 0x0d);
const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b));
const latin1 = (bytes: Uint8Array) => Buffer.from(bytes).toString("latin1");

/** Checks every batch against the input's lines; returns how each line arrived. */
function checkAgainstInput(input: Uint8Array, got: Awaited<ReturnType<typeof readAll>>, options: Options): string[] {
  const { chunk, maxLineBytes = Infinity, positional = true, plans, most = Infinity } = options;
  const want = linesOf(input);
  const bomBytes = input.length - want.reduce((n, line) => n + line.bytes.length + (line.newline ? 1 : 0), 0);
  expect([0, 3]).toContain(bomBytes);
  expect(got.batches.reduce((n, batch) => n + batchLength(batch), 0)).toBe(input.length - bomBytes);
  const how: string[] = [];
  let next = 1; // the line number the next batch starts at
  for (const [index, seen] of got.seen.entries()) {
    expect(seen.firstLine).toBe(next);
    const isLast = index === got.seen.length - 1;
    if (seen.kind === "lines") {
      // Short lines, in the batch buffer as read.
      for (const [i, line] of seen.lines.entries()) {
        const expected = want[next - 1 + i];
        expect(latin1(line)).toBe(latin1(expected.bytes));
        expect(line.length).toBeLessThan(chunk); // a line of a chunk or more takes the long-line path
        how.push("line");
      }
      if (!isLast) expect(seen.endsWithNewline).toBe(true);
      next += seen.lineCount;
      continue;
    }
    const expected = want[next - 1];
    const length = expected.bytes.length;
    expect(length).toBeGreaterThanOrEqual(chunk);
    // The room is asked for at most two chunks past the line's length: below `most`, it never says no.
    const roomEnough = length + 2 * chunk <= most;
    const stream = got.streams.get(index);
    if (seen.kind === "dropped") {
      expect(seen.dropped).toEqual({ bytes: length, newline: expected.newline, blank: isBlank(expected.bytes) });
      expect(length > maxLineBytes || !roomEnough).toBe(true);
      how.push("dropped");
    } else if (seen.kind === "parts") {
      // No room from the start and no stream: in the batch buffers, as without a room.
      expect(roomEnough).toBe(false);
      expect(latin1(seen.line)).toBe(latin1(expected.bytes));
      expect(stream === undefined || stream.gaveUp !== null || stream.dangling).toBe(true);
      how.push("parts");
    } else if (seen.kind === "streamed") {
      expect(positional).toBe(true);
      expect(stream).toBeDefined();
      expect(stream!.gaveUp).toBe(null);
      expect(stream!.finished).toBe(true);
      // Every byte of the line once, in order, without its `\n`; the first piece a whole chunk.
      expect(latin1(stream!.line)).toBe(latin1(expected.bytes));
      expect(stream!.pieces[0].length).toBe(chunk);
      expect(stream!.lasts).toEqual(stream!.pieces.map((_, i) => i === stream!.pieces.length - 1));
      expect(seen.placed).toEqual({ bytes: expected.bytes.length, newline: expected.newline, streamed: true });
      how.push("streamed");
    } else {
      // Placed: the room holds exactly the line, however far the stream (if any) had got.
      expect(seen.line.length).toBe(expected.bytes.length);
      expect(same(seen.line, expected.bytes)).toBe(true);
      expect(seen.placed).toEqual({ bytes: expected.bytes.length, newline: expected.newline });
      if (stream?.dangling)
        expect(stream.pieces).toEqual([]); // a first view short of a chunk: not used
      else if (stream !== undefined) expect(stream.gaveUp).not.toBe(null);
      else if (positional && plans !== undefined) expect(plans).toContain("no stream");
      how.push(stream === undefined ? "placed" : `placed after ${stream.dangling ? "a short view" : stream.gaveUp}`);
    }
    if (stream !== undefined) expect(stream.usedAfterEnd).toBe(false);
    // Lines up to the limit are kept (in the room, when it has room); lines far over it are not. (The
    // documented bound, "over it by more than a chunk never", is checked case by case below: here
    // a room asked for two chunks at once may hold a line of up to twice a chunk.)
    if (length <= maxLineBytes && roomEnough) expect(["placed", "streamed"]).toContain(seen.kind);
    if (length > Math.max(maxLineBytes, chunk) + 2 * chunk) expect(seen.kind).toBe("dropped");
    next++;
  }
  expect(next - 1).toBe(want.length);
  // A source that cannot be read again is never given to a stream.
  if (!positional) {
    expect(got.streamCalls).toBe(0);
    expect(got.streams.size).toBe(0);
  }
  // Nothing is read twice unless a stream gave up on it.
  if ([...got.streams.values()].every((stream) => stream.gaveUp === null && !stream.dangling))
    expect(got.rereads).toEqual([]);
  return how;
}

// Inputs: lines short and long (longer than any chunk here), blank long lines, any bytes but `\n`.
const bytesOf = (length: number, seed: number, alphabet: readonly number[]) => {
  const out = new Uint8Array(length);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = alphabet[(x >>> 0) % alphabet.length];
  }
  return out;
};
const ANY = Array.from({ length: 256 }, (_, i) => i).filter((i) => i !== NEWLINE);
const JSONISH = [...'{}[]",:0123456789 abcxyz\\é'].flatMap((c) => [...Buffer.from(c)]);
const BLANKS = [0x20, 0x09, 0x0d];

const lineArb = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 40 }).map((n) => bytesOf(n, n * 31 + 7, JSONISH)) },
  {
    weight: 4,
    arbitrary: fc
      .tuple(fc.integer({ min: 60, max: 420 }), fc.integer(), fc.constantFrom(JSONISH, ANY))
      .map(([n, seed, alphabet]) => bytesOf(n, seed, alphabet)),
  },
  { weight: 1, arbitrary: fc.integer({ min: 60, max: 300 }).map((n) => bytesOf(n, n, BLANKS)) },
  {
    weight: 1, // blank but for one byte
    arbitrary: fc.tuple(fc.integer({ min: 60, max: 300 }), fc.nat()).map(([n, at]) => {
      const line = bytesOf(n, n, BLANKS);
      line[at % n] = 0x78;
      return line;
    }),
  },
  { weight: 1, arbitrary: fc.constantFrom(0, 16, 32, 48, 63, 64, 65).map((n) => bytesOf(n, 3, JSONISH)) },
);

const inputArb = fc
  .record({
    lines: fc.array(lineArb, { minLength: 1, maxLength: 7 }),
    finalNewline: fc.boolean(),
    mark: fc.constantFrom("none", "bom", "bom", "partial"),
  })
  .map(({ lines, finalNewline, mark }) => {
    const body = Buffer.concat(
      lines
        .flatMap((line, i) => (i < lines.length - 1 || finalNewline ? [line, [10]] : [line]))
        .map((part) => Buffer.from(part)),
    );
    const head = mark === "bom" ? BOM : mark === "partial" ? BOM.subarray(0, 2) : new Uint8Array(0);
    return new Uint8Array(Buffer.concat([head, body]));
  });

const giveUpArb: fc.Arbitrary<Plan> = fc.oneof(
  { weight: 3, arbitrary: fc.constant("never" as const) },
  { weight: 1, arbitrary: fc.constant("no stream" as const) },
  {
    weight: 6,
    arbitrary: fc.record({
      at: fc.constantFrom("space" as const, "scanned" as const, "finish" as const),
      call: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 8 })),
    }),
  },
);

const readArb = fc.record({
  chunk: fc.integer({ min: 16, max: 64 }),
  sizes: fc.array(fc.integer({ min: 1, max: 150 }), { minLength: 1, maxLength: 4 }),
  plans: fc.array(giveUpArb, { minLength: 1, maxLength: 4 }),
  regionChunks: fc.integer({ min: 1, max: 4 }),
  shift: fc.integer({ min: 0, max: 100 }),
  views: fc.oneof(
    { weight: 2, arbitrary: fc.constant([Infinity]) },
    { weight: 1, arbitrary: fc.array(fc.integer({ min: 1, max: 80 }), { minLength: 1, maxLength: 3 }) },
  ),
  most: fc.oneof(
    { weight: 3, arbitrary: fc.constant(Infinity) },
    { weight: 1, arbitrary: fc.integer({ min: 40, max: 500 }) },
  ),
});

const RUNS = { numRuns: 100 };

describe("readBatches in window mode (a StreamedLine per long line of a file)", () => {
  it("streams each long line whole, or reads it again into the room whenever the stream gives up", async () => {
    const seen = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(inputArb, readArb, async (input, read) => {
        const options: Options = {
          chunk: read.chunk,
          sizes: read.sizes,
          plans: read.plans,
          regionBytes: read.chunk * read.regionChunks + (read.shift % 5),
          shift: read.shift,
          views: read.views,
          most: read.most,
        };
        const got = await readAll(input, options);
        for (const how of checkAgainstInput(input, got, options)) seen.set(how, (seen.get(how) ?? 0) + 1);
      }),
      RUNS,
    );
    // Every way a long line can arrive was taken (each is common: dozens of times a run).
    const ways = ["streamed", "placed", "placed after space", "placed after scanned", "placed after finish"];
    for (const how of [...ways, "placed after a short view"]) expect([how, seen.get(how) ?? 0]).not.toEqual([how, 0]);
  });

  it("gives the same lines whatever the stream does, and one place and one stream per long line", async () => {
    await fc.assert(
      fc.asyncProperty(inputArb, readArb, async (input, read) => {
        const base = { chunk: read.chunk, sizes: read.sizes };
        const streamed = await readAll(input, { ...base, plans: read.plans, shift: read.shift, views: read.views });
        const roomOnly = await readAll(input, base);
        // Line by line (how lines group into batches may differ: a stream reads in other sizes).
        const flat = (got: typeof streamed) =>
          got.seen.flatMap((s, index): [number, string][] => {
            if (s.kind === "lines") return s.lines.map((line, i) => [s.firstLine + i, latin1(line)]);
            if (s.kind === "streamed") return [[s.firstLine, latin1(got.streams.get(index)!.line)]];
            return [[s.firstLine, s.kind === "dropped" ? "dropped" : latin1(s.line)]];
          });
        expect(flat(streamed)).toEqual(flat(roomOnly));
        expect(roomOnly.streamCalls).toBe(0);
        // One place asked for each long line, and one stream.
        const long = roomOnly.seen.filter((s) => s.kind !== "lines").length;
        expect([streamed.offered.length, roomOnly.offered.length, streamed.streamCalls]).toEqual([long, long, long]);
      }),
      RUNS,
    );
  });

  it("never streams a source that cannot be read again (stdin): the room path's batches, as before", async () => {
    await fc.assert(
      fc.asyncProperty(inputArb, readArb, async (input, read) => {
        const options: Options = { chunk: read.chunk, sizes: read.sizes, plans: read.plans, positional: false };
        const got = await readAll(input, options);
        const how = checkAgainstInput(input, got, options);
        expect(how.filter((h) => h !== "line" && h !== "placed")).toEqual([]);
        const old = await readAll(input, { chunk: read.chunk, sizes: read.sizes, positional: false });
        expect(got.seen).toEqual(old.seen);
      }),
      RUNS,
    );
  });

  it("drops a line past maxLineBytes, counted whole, blank or not, and reads on after it", async () => {
    await fc.assert(
      fc.asyncProperty(
        inputArb,
        readArb,
        fc.integer({ min: 0, max: 300 }),
        fc.boolean(),
        async (input, read, maxLineBytes, positional) => {
          const options: Options = {
            chunk: read.chunk,
            sizes: read.sizes,
            plans: read.plans,
            maxLineBytes,
            positional,
            shift: read.shift,
            views: read.views,
            most: read.most,
          };
          checkAgainstInput(input, await readAll(input, options), options);
        },
      ),
      RUNS,
    );
  });
});

describe("readBatches in window mode, case by case", () => {
  const chunk = 16;
  const long = (n: number, c = "7") => "[" + `${c},`.repeat(n) + "0]";
  const encode = (text: string) => new Uint8Array(Buffer.from(text, "latin1"));

  it("hands the stream every byte of the line, and what follows it to the next batches", async () => {
    const text = `a\n${long(40)}\nb\nc\n${long(30)}`;
    const options: Options = { chunk, sizes: [5, 16, 3], plans: ["never"] };
    const got = await readAll(encode(text), options);
    expect(checkAgainstInput(encode(text), got, options)).toEqual(["line", "streamed", "line", "line", "streamed"]);
    expect(got.seen.map((s) => s.kind)).toEqual(["lines", "streamed", "lines", "streamed"]);
    expect(got.batches[1].placed).toEqual({ bytes: long(40).length, newline: true, streamed: true });
    expect(got.batches[3].placed).toEqual({ bytes: long(30).length, newline: false, streamed: true });
    expect(latin1(got.streams.get(1)!.line)).toBe(long(40));
    expect(got.rereads).toEqual([]);

    // Views shorter than asked (a region short of room) after a whole first one: pieces of their size.
    const short = await readAll(encode(text), { ...options, sizes: [64], views: [Infinity, 5, 1, 7] });
    checkAgainstInput(encode(text), short, options);
    expect(short.seen.map((s) => s.kind)).toEqual(["lines", "streamed", "lines", "streamed"]);
    expect(
      short.streams
        .get(1)!
        .pieces.map((piece) => piece.length)
        .slice(0, 4),
    ).toEqual([16, 5, 1, 7]);
    // A first view short of a chunk: the line goes to the room, unscanned.
    const first = await readAll(encode(text), { ...options, views: [chunk - 1] });
    expect(checkAgainstInput(encode(text), first, options)).toEqual([
      "line",
      "placed after a short view",
      "line",
      "line",
      "placed after a short view",
    ]);
  });

  it("reads the line again into the room when the stream gives up, at whatever point", async () => {
    const text = `a\n${long(40)}\nb\n`;
    const pieces = Math.ceil((long(40).length + 1) / chunk); // space() calls of a stream that takes it
    const plans: GiveUp[] = [
      ...Array.from({ length: pieces }, (_, call) => ({ at: "space" as const, call })),
      ...Array.from({ length: pieces }, (_, call) => ({ at: "scanned" as const, call })),
      { at: "finish", call: 0 },
    ];
    const failures: string[] = [];
    for (const plan of plans) {
      const options: Options = { chunk, sizes: [7, 16], plans: [plan] };
      const got = await readAll(encode(text), options);
      const line = got.seen.find((s) => s.kind !== "lines");
      const room = line?.kind === "placed" ? latin1(line.line) : `(${line?.kind})`;
      if (room !== long(40)) failures.push(`${plan.at} #${plan.call}: the room holds ${JSON.stringify(room)}`);
      else checkAgainstInput(encode(text), got, options);
      expect(got.streams.get(1)!.gaveUp).toBe(plan.at);
    }
    expect(failures).toEqual([]);
  });

  it("reads the line again after a byte order mark, at the line's true place in the file", async () => {
    const text = `\uFEFF${long(12)}\n${long(40)}\nb`;
    const input = new Uint8Array(Buffer.from(text, "utf8"));
    const options: Options = { chunk, sizes: [16], plans: [{ at: "scanned", call: 1 }] };
    const got = await readAll(input, options);
    expect(checkAgainstInput(input, got, options)).toEqual(["placed after scanned", "placed after scanned", "line"]);
    const second = 3 + long(12).length + 1; // where the second line starts in the file
    expect(got.rereads[0]).toEqual([3, long(12).length]); // the first line, after the mark
    expect(got.rereads.find(([at]) => at >= second)?.[0]).toBe(second);
  });

  it("drops a streamed line once past maxLineBytes, and a blank one as blank", async () => {
    const blank = " \t\r".repeat(40);
    const text = `a\n${long(200)}\n${blank}\nafter\n`;
    const options: Options = { chunk, sizes: [9, 16], plans: ["never"], maxLineBytes: 100 };
    const got = await readAll(encode(text), options);
    expect(checkAgainstInput(encode(text), got, options)).toEqual(["line", "dropped", "dropped", "line"]);
    expect(got.batches[1].dropped).toEqual({ bytes: long(200).length, newline: true, blank: false });
    expect(got.batches[2].dropped).toEqual({ bytes: blank.length, newline: true, blank: true });
    expect(got.seen[3]).toMatchObject({ kind: "lines", firstLine: 4, lines: [encode("after")] });
  });

  it("drops a line over maxLineBytes by more than a chunk, whether the stream gave up on it or not", async () => {
    // The documented bound (readBatches): lines up to maxLineBytes are always kept, lines over it by
    // more than a chunk never. 125 bytes, over 100 by more than 16.
    const line = "x".repeat(125);
    const text = `${line}\nafter\n`;
    const outcomes: string[] = [];
    for (const plans of [undefined, ["no stream"], ["never"], [{ at: "scanned", call: 6 }]] as Plan[][]) {
      const options: Options = { chunk, sizes: [16], plans, maxLineBytes: 100 };
      const got = await readAll(encode(text), options);
      outcomes.push(`${JSON.stringify(plans)}: ${got.seen[0].kind}`);
      expect(got.seen.at(-1)).toMatchObject({ kind: "lines", lines: [encode("after")] });
    }
    expect(outcomes).toEqual([
      "undefined: dropped",
      '["no stream"]: dropped',
      '["never"]: dropped',
      '[{"at":"scanned","call":6}]: dropped',
    ]);
  });
});
