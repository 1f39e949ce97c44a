// LineScanner copies token arrays that repeat text parsed earlier on the same line (an agent's
// prompts grow by appending) instead of parsing them again (assembly/scan/reuse.ts). Whatever
// an array shares with earlier ones — a whole earlier prompt, that prompt and its generation,
// part of a number, a run cut just before a bad value — the result is JSON.parse's.
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { LineScanner, type ScannedLine } from "../../src/ingest/scanner.js";
import { typedLikeOracle } from "../support/scan-oracle.js";

const encoder = new TextEncoder();

/** The parsed calls, with typed arrays copied out of the scanner's memory (or left as arrays). */
function callsOf(result: ScannedLine): unknown {
  if (!result.ok) return { rejected: result.code };
  return (result.value as { calls: Record<string, unknown>[] }).calls.map((call) => {
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(call))
      out[key] = ArrayBuffer.isView(value) ? `${value.constructor.name}(${Array.from(value as Int32Array)})` : value;
    return out;
  });
}

function expectedCalls(text: string): unknown {
  let value: { calls: Record<string, unknown>[] };
  try {
    value = typedLikeOracle(text) as typeof value;
  } catch {
    return { rejected: "malformed_json" };
  }
  return value.calls.map((call) => {
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(call))
      out[key] = ArrayBuffer.isView(v) ? `${v.constructor.name}(${Array.from(v as Int32Array)})` : v;
    return out;
  });
}

// Tokens long enough that a few of them pass the scanner's shortest reused run (32 bytes).
const token = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 10_000, max: 200_000 }).map(String) },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 99 }).map(String) },
  { weight: 1, arbitrary: fc.integer({ min: 100_000_000, max: 2 ** 31 - 1 }).map(String) },
);
/** What may follow a shared run: more tokens, or a value that is not a token (or not JSON). */
const tail = fc.oneof(
  { weight: 6, arbitrary: fc.array(token, { maxLength: 20 }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      ["01"],
      ["2147483648"],
      ["-1"],
      ["1.5"],
      ["7.5"],
      ["null"],
      ['"5"'],
      ["12", "0"],
      ["9999999999"],
    ),
  },
);
const gap = fc.constantFrom("", "", "", "", " ", "\n ");

/**
 * How a prompt is made from the arrays written before it (their items, in order): a prefix of
 * one of them (cut at any item, the last item maybe with digits added or removed), or all of an
 * earlier prompt followed by its generation; then `tail`.
 */
const recipe = fc.record({
  from: fc.nat(),
  whole: fc.boolean(),
  cut: fc.nat(),
  edit: fc.constantFrom("none", "none", "append digit", "drop digit"),
  tail,
  space: gap,
});

describe.each([true, false])("LineScanner reusing repeated token text (simd %s)", (simd) => {
  let scanner: LineScanner;
  beforeAll(async () => {
    scanner = await LineScanner.create({ simd });
  });

  it("gives JSON.parse's values for prompts that repeat earlier prompts and generations", () => {
    fc.assert(
      fc.property(
        fc.array(token, { minLength: 1, maxLength: 40 }),
        fc.array(fc.tuple(recipe, fc.array(token, { maxLength: 15 })), { minLength: 1, maxLength: 8 }),
        gap,
        (first, steps, space) => {
          const prompts: string[][] = [first];
          const generations: string[][] = [[]];
          for (const [step, generation] of steps) {
            const i = step.from % prompts.length;
            let items = step.whole
              ? [...prompts[i], ...generations[i]]
              : prompts[i].slice(0, 1 + (step.cut % prompts[i].length));
            if (step.edit !== "none" && items.length > 0) {
              const last = items[items.length - 1];
              const edited = step.edit === "append digit" ? last + "7" : last.length > 1 ? last.slice(0, -1) : last;
              items = [...items.slice(0, -1), edited];
            }
            prompts.push([...items, ...step.tail]);
            generations.push(generation);
          }
          const list = (items: string[]) => `[${items.join(`,${space}`)}]`;
          const calls = prompts.map(
            (prompt, c) =>
              `{"id":"c${c}","prompt_token_ids":${list(prompt)},"generation_token_ids":${list(generations[c])},` +
              `"generation_log_probs":[${generations[c].map(() => "-0.5").join(",")}]}`,
          );
          const text = `{"rollout_id":"r","calls":[${calls.join(",")}]}`;
          const got = callsOf(scanner.scan(encoder.encode(text)));
          expect(got, text).toEqual(expectedCalls(text));
        },
      ),
      { numRuns: simd ? 800 : 300 },
    );
  });

  it("follows a prompt through an earlier prompt and on into its generation, across many calls", () => {
    // A leader whose every prompt is the previous prompt, its generation, and a new turn.
    let prompt: number[] = Array.from({ length: 300 }, (_, i) => 100_000 + i);
    const calls: string[] = [];
    const want: number[][] = [];
    for (let c = 0; c < 40; c++) {
      const generation = Array.from({ length: 20 + c }, (_, i) => 150_000 + c * 100 + i);
      calls.push(
        `{"id":"c${c}","prompt_token_ids":[${prompt}],"generation_token_ids":[${generation}],` +
          `"generation_log_probs":[${generation.map(() => -0.25)}]}`,
      );
      want.push(prompt);
      prompt = [...prompt, ...generation, 7, 8, 9];
    }
    const result = scanner.scan(encoder.encode(`{"calls":[${calls.join(",")}]}`));
    expect(result.ok).toBe(true);
    const got = (result as { value: { calls: { prompt_token_ids: Int32Array }[] } }).value.calls;
    expect(got.map((call) => Array.from(call.prompt_token_ids))).toEqual(want);
  });

  it("makes such a prompt a view over the earlier prompt and generation, not a copy", () => {
    // The leader above, with logprobs between a generation and the next prompt (the usual key
    // order): each prompt after the first starts where the first one does, and its own turn
    // follows the previous generation in memory, so the tokens take their distinct count.
    let prompt: number[] = Array.from({ length: 200 }, (_, i) => 100_000 + i);
    const calls: string[] = [];
    let distinct = prompt.length;
    for (let c = 0; c < 30; c++) {
      const generation = Array.from({ length: 10 + c }, (_, i) => 150_000 + c * 100 + i);
      calls.push(
        `{"id":"c${c}","prompt_token_ids":[${prompt}],"generation_token_ids":[${generation}],` +
          `"generation_log_probs":[${generation.map(() => -0.25)}]}`,
      );
      prompt = [...prompt, ...generation, 7, 8, 9];
      distinct += generation.length + 3;
    }
    const result = scanner.scan(encoder.encode(`{"calls":[${calls.join(",")}]}`));
    expect(result.ok).toBe(true);
    type Call = { prompt_token_ids: Int32Array; generation_token_ids: Int32Array; generation_log_probs: Float32Array };
    const got = (result as { value: { calls: Call[] } }).value.calls;
    const first = got[0].prompt_token_ids;
    for (let c = 1; c < got.length; c++) {
      const previous = got[c - 1];
      expect(got[c].prompt_token_ids.byteOffset).toBe(first.byteOffset);
      expect(previous.generation_token_ids.byteOffset).toBe(
        previous.prompt_token_ids.byteOffset + previous.prompt_token_ids.byteLength,
      );
      expect(Array.from(previous.generation_log_probs)).toEqual(Array.from(previous.generation_token_ids, () => -0.25));
    }
    const last = got[got.length - 1];
    const tokenBytes = last.generation_token_ids.byteOffset + last.generation_token_ids.byteLength - first.byteOffset;
    expect(tokenBytes).toBe((distinct - 3) * 4);
  });

  it("copies repeated values that are not the newest tokens, and keeps every array right", () => {
    // Call 1 repeats call 0's prompt after call 0's generation was followed by another array:
    // the values cannot be extended in place, so they are copied.
    const base = Array.from({ length: 100 }, (_, i) => 100_000 + i);
    const text =
      `{"calls":[{"prompt_token_ids":[${base}],"generation_token_ids":[${[1, 2, 3]}]},` +
      `{"prompt_token_ids":[${[5, 6]}]},{"prompt_token_ids":[${[...base, 1, 2, 3, 9]}]}]}`;
    const result = scanner.scan(encoder.encode(text));
    expect(callsOf(result)).toEqual(expectedCalls(text));
    const got = (result as { value: { calls: { prompt_token_ids: Int32Array }[] } }).value.calls;
    expect(got[2].prompt_token_ids.byteOffset).toBeGreaterThan(got[1].prompt_token_ids.byteOffset);
  });

  it("follows a run on past a copy that moved the arrays' headers", () => {
    // C repeats G, then B; B is a view over A and G, so taking it copies, and the copy moves
    // the stack the headers are on while C's run still has B's header to go on from. (The tokens
    // were picked to read as a logprob header if the moved-from place were read.)
    const a = Array.from({ length: 4000 }, (_, i) => (i % 2 === 0 ? 805306368 : 1));
    const g = [200000, 200001, 200002, 200003, 200004];
    const b = [...a, ...g, 7, 8, 9];
    const c = [...g, ...b, 5];
    const text =
      `{"calls":[{"prompt_token_ids":[${a}],"generation_token_ids":[${g}]},` +
      `{"prompt_token_ids":[${b}]},{"prompt_token_ids":[${c}]}]}`;
    expect(callsOf(scanner.scan(encoder.encode(text)))).toEqual(expectedCalls(text));
  });

  it("keeps every array right when the tokens outgrow their first room many times over", () => {
    // Generations that repeat nothing fill the room a line's bytes first give the tokens, so the
    // headers and logprobs above them move up, again and again; each prompt repeats the
    // generation before it (found by header after those moves) and extends it in place.
    const calls: string[] = [];
    let previous: number[] = [];
    let seed = 1;
    const digit = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % 10;
    };
    for (let c = 0; c < 60; c++) {
      const generation = Array.from({ length: 400 }, digit);
      const logprobs = Array.from({ length: 1 + (c % 5) }, (_, i) => -(c + i + 1) / 8);
      calls.push(
        `{"prompt_token_ids":[${[...previous, 7, 8, 9]}],"generation_token_ids":[${generation}],` +
          `"generation_log_probs":[${logprobs}]}`,
      );
      previous = generation;
    }
    const text = `{"calls":[${calls.join(",")}]}`;
    const result = scanner.scan(encoder.encode(text));
    expect(callsOf(result)).toEqual(expectedCalls(text));
    type Call = { prompt_token_ids: Int32Array; generation_token_ids: Int32Array };
    const got = (result as { value: { calls: Call[] } }).value.calls;
    for (let c = 1; c < got.length; c++)
      expect(got[c].prompt_token_ids.byteOffset).toBe(got[c - 1].generation_token_ids.byteOffset);
  });
});
