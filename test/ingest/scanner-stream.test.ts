// LineScanner's window mode (streamLine): a long line scanned as it is read, a piece at a time,
// through a region of memory that is reused. Whatever the region, the history it keeps and the
// pieces, a line it takes gives what scan() gives for the whole line; a line it cannot take (an
// item longer than the region, text that is not JSON or not UTF-8) it says so, and the reader
// scans that line whole instead.
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import {
  LineScanner,
  STREAM_WINDOW,
  streamWindow,
  type ScannedLine,
  type StreamWindow,
} from "../../src/ingest/scanner.js";
import { typedLikeOracle } from "../support/scan-oracle.js";

const encoder = new TextEncoder();

/** A value with its typed arrays written out (views over the scanner's memory are copied). */
function snapshot(result: ScannedLine): string {
  if (!result.ok) return `rejected: ${result.code}`;
  return JSON.stringify(result.value, (_key, value) =>
    ArrayBuffer.isView(value) ? `${value.constructor.name}(${Array.from(value as Int32Array)})` : value,
  );
}

type Streamed = ScannedLine | "gave up";

/** Pieces the scanner handed out shorter than asked for (by stream(), since the last reset). */
let shortPieces = 0;

/**
 * Streams `bytes` as the reader does: space(piece), the piece's bytes in, scanned(); the last
 * piece with `last` (empty when `emptyLast`, as when the input ends right after a piece).
 */
function stream(
  scanner: LineScanner,
  bytes: Uint8Array,
  window: StreamWindow,
  pieces: number[],
  emptyLast = false,
): Streamed {
  const line = scanner.streamLine(window);
  if (line === null) return "gave up";
  let at = 0;
  for (let i = 0; ; i++) {
    const want = pieces[i % pieces.length];
    const space = line.space(want);
    if (space === null) return "gave up";
    if (space.length < want) shortPieces++;
    const n = Math.min(space.length, bytes.length - at);
    space.set(bytes.subarray(at, at + n));
    at += n;
    const last = at === bytes.length && !(emptyLast && n > 0);
    if (!line.scanned(n, last)) return "gave up";
    if (last) return line.finish() ? line.value : "gave up";
  }
}

const token = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 10_000, max: 200_000 }).map(String) },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 99 }).map(String) },
  { weight: 1, arbitrary: fc.integer({ min: 100_000_000, max: 2 ** 31 - 1 }).map(String) },
);
/** Metadata text that looks like what the scanner looks for, or ends it early. */
const tricky = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.constantFrom(
    '"prompt_token_ids":[1,2]',
    "]",
    "[",
    '\\"',
    "\\\\",
    "é€😀",
    '"generation_token_ids"',
    "\u2028",
    "x".repeat(300),
  ),
);
const gap = fc.constantFrom("", "", "", " ", "\n ");
/** An array at a token key that is not plain: left in the metadata for the planner. */
const notPlain = fc.constantFrom('[1,"2"]', "[1.5]", "[[1],[2]]", '["]"]', "[-1, 3]", "[]");

const call = fc.record({
  from: fc.nat(),
  whole: fc.boolean(),
  cut: fc.nat(),
  tail: fc.array(token, { maxLength: 40 }),
  generation: fc.array(token, { maxLength: 30 }),
  note: fc.option(tricky, { nil: undefined }),
  odd: fc.option(notPlain, { freq: 8, nil: undefined }),
});

/** A rollout line whose prompts repeat earlier prompts (and their generations), as an agent's do. */
const lineArb = fc
  .tuple(fc.array(token, { minLength: 1, maxLength: 60 }), fc.array(call, { minLength: 1, maxLength: 12 }), gap)
  .map(([first, steps, space]) => {
    const prompts: string[][] = [first];
    const generations: string[][] = [[]];
    const list = (items: string[]) => `[${items.join(`,${space}`)}]`;
    const calls: string[] = [`{"id":"c0","prompt_token_ids":${list(first)}}`];
    for (const [c, step] of steps.entries()) {
      const i = step.from % prompts.length;
      const head = step.whole
        ? [...prompts[i], ...generations[i]]
        : prompts[i].slice(0, 1 + (step.cut % prompts[i].length));
      const prompt = [...head, ...step.tail];
      prompts.push(prompt);
      generations.push(step.generation);
      const note = step.note === undefined ? "" : `"note":${JSON.stringify(step.note)},`;
      const generation = step.odd ?? list(step.generation);
      calls.push(
        `{${note}"id":"c${c + 1}",${space}"prompt_token_ids"${space}:${space}${list(prompt)},` +
          `"generation_token_ids":${generation},` +
          `"generation_log_probs":[${step.generation.map((_, k) => `-0.${k + 1}`).join(",")}]}`,
      );
    }
    return `{"rollout_id":"r",${space}"calls":[${calls.join(",")}],"meta":{"k":[1,2,{"s":"]"}]}}`;
  });

const sizes = fc.record({
  region: fc.integer({ min: 64, max: 4096 }),
  historyShare: fc.double({ min: 0, max: 1, noNaN: true }),
  pieces: fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 5 }),
  emptyLast: fc.boolean(),
});

describe.each([true, false])("LineScanner window mode (simd %s)", (simd) => {
  let scanner: LineScanner;
  beforeAll(async () => {
    scanner = await LineScanner.create({ simd });
  });

  it("gives scan()'s value for every line it takes, whatever the region, history and pieces", () => {
    let taken = 0;
    let runs = 0;
    fc.assert(
      fc.property(lineArb, sizes, (text, { region, historyShare, pieces, emptyLast }) => {
        const bytes = encoder.encode(text);
        const whole = snapshot(scanner.scan(bytes));
        const window = { regionBytes: region, historyBytes: Math.floor(region * historyShare) };
        const got = stream(scanner, bytes, window, pieces, emptyLast);
        runs++;
        if (got === "gave up") return;
        taken++;
        expect(snapshot(got), text).toBe(whole);
        expect(snapshot(got)).toBe(snapshot({ ok: true, value: typedLikeOracle(text) }));
      }),
      { numRuns: simd ? 600 : 200 },
    );
    // Most lines fit such regions: a property that held only by giving up would prove nothing.
    expect(taken).toBeGreaterThan(runs / 2);
  });

  it("takes every valid line when the region holds it all", () => {
    fc.assert(
      fc.property(
        lineArb,
        fc.array(fc.integer({ min: 1, max: 200 }), { minLength: 1, maxLength: 4 }),
        (text, pieces) => {
          const bytes = encoder.encode(text);
          const got = stream(scanner, bytes, { regionBytes: bytes.length + 256, historyBytes: 0 }, pieces);
          expect(got).not.toBe("gave up");
          expect(snapshot(got as ScannedLine)).toBe(snapshot(scanner.scan(bytes)));
        },
      ),
      { numRuns: simd ? 300 : 100 },
    );
  });

  it("keeps repeated prompts views over earlier tokens across region moves, while the history holds them", () => {
    // An agent of 60 calls: each prompt is the previous prompt, its generation and a new turn, so
    // each is a view that starts where the first one does (as scan() makes it).
    let prompt: number[] = Array.from({ length: 200 }, (_, i) => 100_000 + i);
    const calls: string[] = [];
    const want: number[][] = [];
    for (let c = 0; c < 60; c++) {
      const generation = Array.from({ length: 30 }, (_, i) => 150_000 + c * 100 + i);
      calls.push(
        `{"id":"c${c}","prompt_token_ids":[${prompt}],"generation_token_ids":[${generation}],` +
          `"generation_log_probs":[${generation.map(() => -0.25)}]}`,
      );
      want.push(prompt);
      prompt = [...prompt, ...generation, 7, 8, 9];
    }
    const bytes = encoder.encode(`{"calls":[${calls.join(",")}]}`);
    const longest = Math.max(...calls.map((c) => c.length));
    // The region holds two calls' text and a piece: it moves about 60 times. (Arrays this short
    // are not kept for being long: only the history keeps them.)
    const window = (historyBytes: number) => ({ regionBytes: 2 * longest + 1024, historyBytes });
    type Call = { prompt_token_ids: Int32Array };
    const prompts = (result: Streamed) => {
      expect(result).not.toBe("gave up");
      const value = (result as { ok: true; value: { calls: Call[] } }).value;
      return value.calls.map((call) => call.prompt_token_ids);
    };
    const kept = prompts(stream(scanner, bytes, window(longest), [1024]));
    expect(kept.map((p) => Array.from(p))).toEqual(want);
    for (const p of kept) expect(p.byteOffset).toBe(kept[0].byteOffset);
    // With no history a move leaves only the text not scanned yet: a prompt whose earlier text
    // went is parsed instead (not a view), with the same values.
    const parsed = prompts(stream(scanner, bytes, window(0), [1024]));
    expect(parsed.map((p) => Array.from(p))).toEqual(want);
    expect(parsed.some((p) => p.byteOffset !== parsed[0].byteOffset)).toBe(true);
  });

  it("gives up on a string or an array longer than the region can hold with a piece", () => {
    const long = encoder.encode(`{"calls":[{"prompt_token_ids":[1,2,3],"note":"${"n".repeat(5000)}"}]}`);
    const tokens = encoder.encode(`{"calls":[{"prompt_token_ids":[${Array.from({ length: 2000 }, (_, i) => i)}]}]}`);
    for (const bytes of [long, tokens]) {
      expect(stream(scanner, bytes, { regionBytes: 4096, historyBytes: 0 }, [512])).toBe("gave up");
      const wide = stream(scanner, bytes, { regionBytes: 16_384, historyBytes: 0 }, [512]);
      expect(snapshot(wide as ScannedLine)).toBe(snapshot(scanner.scan(bytes)));
    }
  });

  it("hands out smaller pieces when the region is short of a whole one, down to 64 KiB", () => {
    // In a 256 KiB region read in 128 KiB pieces, a 200 KB string that starts about 69 KB in
    // is cut by the second piece's end; beside what it has read of it only ~65 KiB fit.
    const prompt = Array.from({ length: 9_900 }, (_, i) => 100_000 + i);
    const bytes = encoder.encode(
      `{"calls":[{"id":"a","prompt_token_ids":[${prompt}],"note":"${"x".repeat(200_000)}"}]}`,
    );
    shortPieces = 0;
    const got = stream(scanner, bytes, { regionBytes: 256 << 10, historyBytes: 0 }, [128 << 10]);
    expect(snapshot(got as ScannedLine)).toBe(snapshot(scanner.scan(bytes)));
    expect(shortPieces).toBeGreaterThan(0);
    // A 300 KB string does not fit at all.
    const long = encoder.encode(`{"calls":[{"id":"a","prompt_token_ids":[1],"note":"${"x".repeat(300_000)}"}]}`);
    const note = stream(scanner, long, { regionBytes: 256 << 10, historyBytes: 0 }, [16 << 10]);
    expect(note).toBe("gave up");
  });

  it("gives up on a line that is not JSON or not UTF-8 (whose message needs the whole line)", () => {
    const cut = `{"calls":[{"prompt_token_ids":[${"1,".repeat(3000)}`;
    const window = { regionBytes: 1024, historyBytes: 256 };
    expect(stream(scanner, encoder.encode(cut), { ...window, regionBytes: 1 << 20 }, [100])).toBe("gave up");
    const unclosed = `{"calls":[{"prompt_token_ids":[1,2]}]`;
    expect(stream(scanner, encoder.encode(unclosed), window, [7])).toBe("gave up");
    const bytes = encoder.encode(`{"calls":[{"prompt_token_ids":[1,2]}],"note":"${"x".repeat(500)}é"}`);
    bytes[bytes.length - 3] = 0xc3; // é's first byte, then a quote: not UTF-8
    bytes[bytes.length - 2] = 0x22;
    bytes[bytes.length - 1] = 0x7d;
    expect(scanner.scan(bytes).ok).toBe(false);
    expect(stream(scanner, bytes, window, [64])).toBe("gave up");
  });

  it("holds a long line in memory the size of its region and distinct tokens, not of its text", async () => {
    const fresh = await LineScanner.create({ simd });
    let prompt: number[] = Array.from({ length: 2000 }, (_, i) => 100_000 + i);
    const calls: string[] = [];
    for (let c = 0; c < 200; c++) {
      const generation = Array.from({ length: 50 }, (_, i) => 120_000 + c * 50 + i);
      calls.push(`{"prompt_token_ids":[${prompt}],"generation_token_ids":[${generation}]}`);
      prompt = [...prompt, ...generation, 7, 8];
    }
    const bytes = encoder.encode(`{"calls":[${calls.join(",")}]}`);
    expect(bytes.length).toBeGreaterThan(9 << 20);
    const got = stream(fresh, bytes, { regionBytes: 1 << 20, historyBytes: 512 << 10 }, [256 << 10]);
    expect(got).not.toBe("gave up");
    const last = (got as { ok: true; value: { calls: { prompt_token_ids: Int32Array }[] } }).value.calls[199];
    expect(last.prompt_token_ids.length).toBe(2000 + 199 * 52);
    expect(last.prompt_token_ids[2000 + 199 * 52 - 3]).toBe(120_000 + 198 * 50 + 49);
    // Read whole, the line alone would take its 9+ MiB (and scan() about 12 MiB in all).
    expect(fresh.memoryBytes).toBeLessThan(6 << 20);
  });
});

describe("streamWindow", () => {
  it("is STREAM_WINDOW for the reader's usual pieces, and four pieces with one of history for larger ones", () => {
    expect(streamWindow(2 << 20)).toEqual(STREAM_WINDOW);
    expect(streamWindow(16 << 20)).toEqual({ regionBytes: 64 << 20, historyBytes: 16 << 20 });
  });

  it("is refused past 1 GiB (a line with such pieces is read whole)", async () => {
    const scanner = await LineScanner.create();
    expect(scanner.streamLine(streamWindow(512 << 20))).toBeNull();
    expect(scanner.streamLine(streamWindow(1 << 20))).not.toBeNull();
  });
});
