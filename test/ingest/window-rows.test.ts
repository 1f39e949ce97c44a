// Window mode end to end, in process with the real scanner: a long line of a file scanned as it is
// read (through a region of the scanner's memory that is reused, LineScanner.streamLine) gives the
// rows, report, notes and totals that reading each long line whole gives (`window: false`), with
// the default window and with tiny ones (text moved down often, history evicted, and items longer
// than the region, which are read again whole), whatever the lines hold: reused prompts, long
// strings, escapes, malformed JSON, invalid UTF-8, blank lines, rejected rollouts.
import { execFileSync, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { LineProcessor, type IngestOptions } from "../../src/ingest/process.js";
import { runRows } from "../../src/ingest/run.js";
import { LineStream, type StreamWindow } from "../../src/ingest/scanner.js";
import { goodLines, memorySink, tempDir } from "./cli.js";

const OPTIONS: IngestOptions = { reader: "scan", backend: "wasm", from: "auto", maskFormat: "bits", notes: true };
const CHUNK = 1024;

/** A window of `region` bytes keeping `history` bytes of scanned text. */
const tiny = (region: number, history: number): StreamWindow => ({ regionBytes: region, historyBytes: history });

/** Which long lines went which way: line numbers of placed batches, streamed or read whole. */
interface Placed {
  streamed: number[];
  whole: number[];
}

/** Rows of `path` in process (one job), in batches of `chunk`; `window` as IngestOptions.window. */
async function rowsOf(path: string, window: StreamWindow | false | undefined, chunk = CHUNK) {
  const [out, report] = [memorySink(), memorySink()];
  let notes = "";
  const placed: Placed = { streamed: [], whole: [] };
  const processBatch = LineProcessor.prototype.processBatch;
  const spy = vi.spyOn(LineProcessor.prototype, "processBatch").mockImplementation(function (
    this: LineProcessor,
    batch,
    name,
    emit,
  ) {
    if (batch.placed !== undefined) (batch.placed.streamed ? placed.streamed : placed.whole).push(batch.firstLine);
    return processBatch.call(this, batch, name, emit);
  });
  let totals: Awaited<ReturnType<typeof runRows>>;
  try {
    const options = { ...OPTIONS, jobs: 1, chunk, ...(window === undefined ? {} : { window }) };
    totals = await runRows([path], options, { rows: out, report, notes: (t) => (notes += t) });
  } finally {
    spy.mockRestore();
  }
  return { output: { rows: out.text(), report: report.text(), notes, totals }, placed };
}

/** Reports' [line, status, reason]. */
const statuses = (report: string) =>
  report
    .trim()
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line))
    .map((r) => [r.line, r.status, r.reason ?? null]);

// The lines: generated rollouts (an agent's next prompt repeats its last prompt and generation,
// so the scanner's reuse finds text it has seen) with long strings, and lines that fail.
type Rollout = { rollout_id: string; group_id?: string; calls: Record<string, unknown>[]; [key: string]: unknown };

/** A string of `length` characters from `alphabet`, escapes and multi-byte characters among them. */
function textOf(length: number, seed: number, alphabet: string): string {
  const chars = [...alphabet];
  let x = seed >>> 0 || 1;
  let out = "";
  while (out.length < length) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out += chars[(x >>> 0) % chars.length];
  }
  return out;
}
const TRICKY = 'abc xyz 0123 "quoted" back\\slash \n\t é€😀 [1,2,3] {"prompt_token_ids":[4,5]} ]]] \u0000 \u2028';

/** What a line of the file is made from. */
const lineArb = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("good" as const),
      // a long group_id (in every row), a long unknown key, a long call id
      group: fc.oneof(fc.constant(0), fc.integer({ min: 100, max: 20_000 })),
      extra: fc.oneof(fc.constant(0), fc.integer({ min: 100, max: 12_000 })),
      callId: fc.oneof(fc.constant(0), fc.integer({ min: 100, max: 6_000 })),
      seed: fc.integer(),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constantFrom(
        "cut" as const, // malformed: ends inside an array
        "double comma" as const, // malformed inside a token array
        "bad utf8" as const, // invalid UTF-8 inside a long string
        "blank" as const, // a long blank line
        "bad token" as const, // rejected by validation
        "agents object" as const, // rejected, its detail quoting a value that holds token arrays
        "top array" as const,
        "short" as const, // a short line between long ones
      ),
      seed: fc.integer(),
    }),
  },
);
type LineShape = typeof lineArb extends fc.Arbitrary<infer T> ? T : never;

const fileArb = fc.record({
  rollouts: fc.integer({ min: 1, max: 5 }),
  seed: fc.integer({ min: 1, max: 1000 }),
  lines: fc.array(lineArb, { minLength: 1, maxLength: 7 }),
  mark: fc.boolean(),
  finalNewline: fc.boolean(),
  name: fc.constantFrom("in.jsonl", "in.txt"), // a .txt file is sniffed first (sniffDocument)
});
type FileShape = typeof fileArb extends fc.Arbitrary<infer T> ? T : never;

const encoder = new TextEncoder();

/** The bytes of a line (no `\n`); `good` is the generated rollouts' lines, taken in turn. */
function lineBytes(shape: LineShape, good: string[], i: number): Uint8Array {
  const rollout = JSON.parse(good[i % good.length]) as Rollout;
  rollout.rollout_id += `-${i}`; // rows differ line by line
  const json = (value: unknown) => encoder.encode(JSON.stringify(value));
  const callOf = (r: Rollout) => r.calls[Math.min(1, r.calls.length - 1)];
  switch (shape.kind) {
    case "good": {
      if (shape.group > 0) rollout.group_id = textOf(shape.group, shape.seed, TRICKY);
      if (shape.extra > 0) rollout.extra = { note: textOf(shape.extra, shape.seed + 1, TRICKY), n: [1, 2] };
      if (shape.callId > 0) callOf(rollout).id = textOf(shape.callId, shape.seed + 2, TRICKY);
      return json(rollout);
    }
    case "cut": {
      const text = JSON.stringify(rollout);
      return encoder.encode(text.slice(0, text.length - 1 - (shape.seed & 255)));
    }
    case "double comma":
      return encoder.encode(JSON.stringify(rollout).replace(/("prompt_token_ids":\[\d+,\d+),/, "$1,,"));
    case "bad utf8": {
      rollout.group_id = `${textOf(3000, shape.seed, TRICKY)}@@${textOf(3000, shape.seed + 1, TRICKY)}`;
      const bytes = json(rollout);
      const at = Buffer.from(bytes).indexOf("@@");
      bytes[at] = 0xff; // never in UTF-8
      bytes[at + 1] = 0xc3; // a lead byte without its continuation
      return bytes;
    }
    case "blank":
      return encoder.encode(textOf(2000 + (shape.seed & 8191), shape.seed, " \t\r"));
    case "bad token": {
      const call = callOf(rollout) as { prompt_token_ids: number[] };
      call.prompt_token_ids[3] = -5;
      return json(rollout);
    }
    case "agents object":
      // Its detail quotes the value, whose arrays the scanner made typed arrays (a logprob float32)
      rollout.agents = {
        generation_log_probs: [-0.1, 0.3],
        prompt_token_ids: [1, 2, 3],
        pad: "p".repeat(2000),
      } as never;
      return json(rollout);
    case "top array":
      return json([rollout, { generation_log_probs: [-0.1, 0.5] }]);
    case "short":
      return encoder.encode(`{"rollout_id":"short-${i}","calls":[]}`);
  }
}

/** The file of `shape` written to a fresh directory: its path and bytes. */
function writeFile(shape: FileShape): { path: string; bytes: Buffer } {
  const good = goodLines(shape.rollouts, shape.seed);
  const lines = shape.lines.map((line, i) => lineBytes(line, good, i));
  const parts: Uint8Array[] = shape.mark ? [Uint8Array.of(0xef, 0xbb, 0xbf)] : [];
  lines.forEach((line, i) => {
    parts.push(line);
    if (i < lines.length - 1 || shape.finalNewline) parts.push(Uint8Array.of(10));
  });
  const bytes = Buffer.concat(parts);
  const path = join(tempDir(), shape.name);
  writeFileSync(path, bytes);
  return { path, bytes };
}

describe("rows in window mode (long lines scanned as they are read)", () => {
  it("gives the rows, report, notes and totals of long lines read whole, with any window", async () => {
    const ways = { streamed: 0, small: 0, again: 0 }; // lines streamed by default, in a tiny window, read again
    await fc.assert(
      fc.asyncProperty(
        fileArb,
        fc.integer({ min: CHUNK, max: 16_384 }),
        fc.double({ min: 0, max: 0.75, noNaN: true }),
        async (shape, region, history) => {
          const { path, bytes } = writeFile(shape);
          const whole = await rowsOf(path, false);
          expect(whole.placed.streamed).toEqual([]);
          const byDefault = await rowsOf(path, undefined);
          const small = await rowsOf(path, tiny(region, Math.floor(region * history)));
          expect(byDefault.output).toEqual(whole.output);
          expect(small.output).toEqual(whole.output);
          // The same long lines were placed (one way or the other), and every byte counted.
          const placed = (p: Placed) => [...p.streamed, ...p.whole].sort((a, b) => a - b);
          expect(placed(byDefault.placed)).toEqual(whole.placed.whole);
          expect(placed(small.placed)).toEqual(whole.placed.whole);
          expect(whole.output.totals.bytes).toBe(bytes.length - (shape.mark ? 3 : 0));
          const blank = shape.lines.filter((line) => line.kind === "blank").length;
          expect(statuses(whole.output.report)).toHaveLength(shape.lines.length - blank);
          ways.streamed += byDefault.placed.streamed.length;
          ways.small += small.placed.streamed.length;
          ways.again += small.placed.whole.length;
        },
      ),
      { numRuns: 12 },
    );
    // Window mode ran, and so did its way back (each is common: most runs take both).
    expect(Object.values(ways).every((n) => n > 0)).toBe(true);
  });
});

describe("rows in window mode, case by case", () => {
  const good = goodLines(6, 5);
  const longString = 'é€\\"x'.repeat(15_000); // 75,000 characters, 150,000 bytes written (escapes, UTF-8)
  const lines = good.map((line, i) => {
    const rollout = JSON.parse(line) as Rollout;
    if (i === 2) rollout.group_id = longString;
    return JSON.stringify(rollout);
  });
  const longest = (rollout: string) =>
    Math.max(...(JSON.parse(rollout) as Rollout).calls.map((call) => JSON.stringify(call.prompt_token_ids).length));

  function file(): { path: string; text: string } {
    const text = `\uFEFF${lines.join("\n")}`; // a byte order mark, and no final newline
    const path = join(tempDir(), "window.jsonl");
    writeFileSync(path, text);
    return { path, text };
  }

  it("scans the long lines as they are read with the default window (and not with `window: false`)", async () => {
    const { path } = file();
    expect(lines.every((line) => line.length > CHUNK)).toBe(true);
    const whole = await rowsOf(path, false);
    const streamed = await rowsOf(path, undefined);
    expect(whole.placed).toEqual({ streamed: [], whole: [1, 2, 3, 4, 5, 6, 7] });
    expect(streamed.placed).toEqual({ streamed: [1, 2, 3, 4, 5, 6, 7], whole: [] });
    expect(streamed.output).toEqual(whole.output);
    expect(statuses(whole.output.report)).toEqual(lines.map((_, i) => [i + 1, "ok", null]));
    expect(whole.output.rows.split("\n").filter((row) => row.includes(JSON.stringify(longString)))).not.toEqual([]);
  });

  it("reads a line whole again when one of its strings is longer than the region can ever hold", async () => {
    const { path } = file();
    // Every token array fits (with room to spare); the 21,000-byte string does not.
    const region = 4 * Math.max(...lines.map(longest), CHUNK);
    expect(region).toBeLessThan(Buffer.byteLength(JSON.stringify(longString)));
    const whole = await rowsOf(path, false);
    const small = await rowsOf(path, tiny(region, region / 4));
    expect(small.placed.whole).toEqual([3]);
    expect(small.placed.streamed).toEqual([1, 2, 4, 5, 6, 7]);
    expect(small.output).toEqual(whole.output);
  });

  it("reads every long line whole when the region is smaller than a read (its first piece has no room)", async () => {
    const { path } = file();
    const whole = await rowsOf(path, false);
    const none = await rowsOf(path, tiny(CHUNK / 2, 0));
    expect(none.placed).toEqual({ streamed: [], whole: [1, 2, 3, 4, 5, 6, 7] });
    expect(none.output).toEqual(whole.output);
  });

  it("reads a long malformed or invalid UTF-8 line whole again, for the words of a line read whole", async () => {
    const rollout = JSON.parse(good[1]) as Rollout;
    rollout.group_id = `${"g".repeat(3000)}@@`;
    const utf8 = Buffer.from(JSON.stringify(rollout));
    utf8[utf8.indexOf("@@")] = 0xff;
    const cut = good[2].slice(0, good[2].length - 10);
    const text = Buffer.concat([Buffer.from(`${good[0]}\n${cut}\n`), utf8, Buffer.from(`\n${good[3]}\n`)]);
    const path = join(tempDir(), "bad-lines.jsonl");
    writeFileSync(path, text);
    const whole = await rowsOf(path, false);
    const streamed = await rowsOf(path, undefined);
    expect(streamed.output).toEqual(whole.output);
    expect(streamed.placed).toEqual({ streamed: [1, 4], whole: [2, 3] });
    expect(statuses(whole.output.report)).toEqual([
      [1, "ok", null],
      [2, "rejected", "malformed_json"],
      [3, "rejected", "malformed_json"],
      [4, "ok", null],
    ]);
    expect(whole.output.notes).toContain("invalid UTF-8");
  });

  it("takes a shorter piece when the region is short of room for a whole read", async () => {
    // Reads of 96 KiB into a region of 128 KiB that keeps 48 KiB of history: less than a read is left.
    const big = goodLines(40, 9).filter((line) => line.length > 110_000);
    expect(big.length).toBeGreaterThan(3);
    const path = join(tempDir(), "big.jsonl");
    writeFileSync(path, big.join("\n") + "\n");
    const chunk = 96 << 10;
    const whole = await rowsOf(path, false, chunk);
    const space = LineStream.prototype.space;
    const views: [number, number][] = [];
    const spy = vi.spyOn(LineStream.prototype, "space").mockImplementation(function (this: LineStream, length) {
      const view = space.call(this, length);
      views.push([length, view?.length ?? -1]);
      return view;
    });
    let small: Awaited<ReturnType<typeof rowsOf>>;
    try {
      small = await rowsOf(path, tiny(128 << 10, 48 << 10), chunk);
    } finally {
      spy.mockRestore();
    }
    expect(views.some(([asked, got]) => got > 0 && got < asked)).toBe(true);
    expect(small.placed.streamed).toEqual(big.map((_, i) => i + 1));
    expect(small.output).toEqual(whole.output);
    expect(statuses(whole.output.report)).toEqual(big.map((_, i) => [i + 1, "ok", null]));
  });

  it("quotes a short streamed line's rejection as a line read whole does (its bytes read again)", async () => {
    // A rejection's detail quotes `agents`, logprobs included: the scanner's are float32, so the
    // words come from the line's own text, which a streamed line of at most 1 MiB brings along.
    const rollout = JSON.parse(good[0]) as Rollout;
    const agents = { generation_log_probs: [-0.1234567891, 0.3], prompt_token_ids: [1, 2, 3], z: "p".repeat(3000) };
    const path = join(tempDir(), "agents.jsonl");
    writeFileSync(path, `${JSON.stringify({ ...rollout, agents })}\n${good[1]}\n`);
    const whole = await rowsOf(path, false);
    const streamed = await rowsOf(path, undefined);
    expect(streamed.placed.streamed).toEqual([1, 2]);
    expect(streamed.output).toEqual(whole.output);
    expect(whole.output.notes).toContain("-0.123456789"); // as written (float32 would read -0.12345679)
  });

  it("drops a scanner a streamed line grew past the memory it may keep, as for a line read whole", async () => {
    const { path } = file();
    const create = LineProcessor.create;
    const scanners: unknown[] = [];
    const spy = vi.spyOn(LineProcessor, "create").mockImplementation(async (options, direct) => {
      const processor = await create.call(LineProcessor, options, direct);
      Object.assign(processor, { keepScannerBytes: 1 }); // every scanner is past it
      const processLine = Reflect.get(processor, "processLine") as (...args: unknown[]) => void;
      Reflect.set(processor, "processLine", function (this: unknown, ...args: unknown[]) {
        processLine.apply(this, args);
        scanners.push(Reflect.get(processor, "scanner"));
      });
      return processor;
    });
    try {
      const streamed = await rowsOf(path, undefined);
      expect(streamed.placed.streamed).toEqual([1, 2, 3, 4, 5, 6, 7]);
    } finally {
      spy.mockRestore();
    }
    expect(scanners).toHaveLength(7);
    expect(scanners.every((scanner) => scanner === null)).toBe(true);
  });
});

describe("rows from a pipe given by name", () => {
  it("never streams it (it cannot be read again), and gives the rows of the same lines in a file", async () => {
    const good = goodLines(4, 5);
    // A long line with a string longer than the tiny region: window mode would give it up.
    const rollout = JSON.parse(good[1]) as Rollout;
    rollout.group_id = "g".repeat(20_000);
    const text = [good[0], JSON.stringify(rollout), good[2], good[3]].join("\n") + "\n";
    const dir = tempDir();
    const regular = join(dir, "rollouts.jsonl");
    writeFileSync(regular, text);
    const fifo = join(dir, "rollouts.fifo");
    execFileSync("mkfifo", [fifo]);
    const writer = spawn("sh", ["-c", 'cat "$1" > "$2"', "sh", regular, fifo], { stdio: "ignore" });
    const exited = new Promise<number | null>((resolve) => writer.on("exit", resolve));
    const piped = await rowsOf(fifo, tiny(8 * CHUNK, CHUNK));
    expect(await exited).toBe(0);
    const file = await rowsOf(regular, false);
    expect(piped.placed.streamed).toEqual([]);
    expect(piped.output.rows).toBe(file.output.rows);
    expect(statuses(piped.output.report)).toEqual(statuses(file.output.report));
    expect(statuses(file.output.report).every(([, status]) => status === "ok")).toBe(true);
  });
});

describe("rows with batches larger than the default region (--batch-bytes)", () => {
  it("scans a long line as it is read in a region of four batches", async () => {
    const [first, second] = goodLines(2, 5);
    const rollout = JSON.parse(first) as Rollout;
    rollout.note = "n".repeat(10 << 20); // a key rows ignore: only the line is long
    const path = join(tempDir(), "big-batches.jsonl");
    writeFileSync(path, `${JSON.stringify(rollout)}\n${second}\n`);
    const chunk = 9 << 20; // more than STREAM_WINDOW's 8 MiB region holds beside its history
    const streamed = await rowsOf(path, undefined, chunk);
    const whole = await rowsOf(path, false, chunk);
    expect(streamed.placed.streamed).toEqual([1]);
    expect(streamed.output).toEqual(whole.output);
    expect(statuses(whole.output.report)).toEqual([
      [1, "ok", null],
      [2, "ok", null],
    ]);
  });
});
