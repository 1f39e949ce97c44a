// LineScanner: for every valid line, the result equals JSON.parse(text) with each plain token array
// as an Int32Array and each plain logprob array as a Float32Array; arrays that are not plain stay
// JSON arrays (the planner reports them); bad lines get one message with a byte offset.
import { GYM_SAMPLES } from "../support/fixtures.js";
import { readFileSync } from "node:fs";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { LineScanner, type ScannedLine } from "../../src/ingest/scanner.js";
import { init } from "../../src/index.js";
import { toCanonical } from "../../src/formats/index.js";
import { LOGPROB_KEY, TOKEN_KEYS, typedLikeOracle } from "../support/scan-oracle.js";

const encoder = new TextEncoder();

// ---------------------------------------------------------------------------------------------
// A JSON model: text written with chosen whitespace and escapes, and the value expected back.

type Node =
  | { t: "raw"; text: string; value: unknown } // string, number, literal
  | { t: "arr"; items: Node[] }
  | { t: "obj"; entries: { key: Key; value: Node }[] }
  | { t: "nums"; kind: "i32" | "f32"; texts: string[]; plain: boolean; values: unknown[] };
interface Key {
  text: string; // as written, with quotes
  name: string; // as parsed
}

const ws = fc.constantFrom("", "", "", " ", "\n", "\r\n", "\t", "  ");

/** A string written with optional gratuitous escapes (\/, \u00XX) and real ones. */
function writeString(value: string, fancy: boolean): string {
  let out = '"';
  for (const ch of value) {
    const code = ch.codePointAt(0)!;
    if (ch === '"' || ch === "\\" || code < 0x20) out += JSON.stringify(ch).slice(1, -1);
    else if (fancy && ch === "/") out += "\\/";
    else if (fancy && code < 0x7f && code % 3 === 0) out += "\\u" + code.toString(16).padStart(4, "0");
    else out += ch;
  }
  return out + '"';
}

const trickyText = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: "binary", maxLength: 8 }),
  fc.constantFrom(
    'prompt_token_ids":[1,2]',
    '"generation_log_probs":[0.5]',
    "\\",
    '\\"',
    "[[[",
    "]}",
    '"prompt_token_ids"',
    "\u0000\u001f",
    "é€😀",
    "\u2028",
  ),
);

const keyArb: fc.Arbitrary<Key> = fc
  .oneof(
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        "id",
        "agent",
        "kept",
        "reward",
        "text",
        "__proto__",
        "constructor",
        "prototype",
        "toString",
        "0",
        "7",
      ),
    },
    { weight: 1, arbitrary: trickyText },
    { weight: 1, arbitrary: fc.constantFrom(...TOKEN_KEYS, LOGPROB_KEY) },
  )
  .chain((name) => fc.boolean().map((fancy) => ({ name, text: writeString(name, fancy && Math.random() < 0.2) })));

const numberText = fc.oneof(
  fc.integer({ min: -1000, max: 1e9 }).map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((x) => JSON.stringify(x)),
  fc.constantFrom("0", "-0", "1e3", "2.5E-3", "0.1", "123456789012345678901234"),
);

const scalarArb: fc.Arbitrary<Node> = fc.oneof(
  fc
    .tuple(trickyText, fc.boolean())
    .map(([s, fancy]) => ({ t: "raw" as const, text: writeString(s, fancy), value: s })),
  numberText.map((text) => ({ t: "raw" as const, text, value: JSON.parse(text) })),
  fc.constantFrom(true, false, null).map((v) => ({ t: "raw" as const, text: JSON.stringify(v), value: v })),
);

const plainToken = fc
  .oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: 200_000 }) },
    { weight: 1, arbitrary: fc.constantFrom(0, 2 ** 31 - 1) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 2 ** 31 - 1 }) },
  )
  .map(String);
const plainLogprob = fc.oneof(
  fc.double({ min: -50, max: 0, noNaN: true }).map((x) => JSON.stringify(x)),
  fc.float({ min: -50, max: 0, noNaN: true }).map((x) => JSON.stringify(x)),
  fc.constantFrom("0", "-0", "0.0", "-1e-05", "-3.4028234663852886e38", "-1E-45", "-2.5e-3", "-100"),
);
/** Entries that make a token array not plain (the planner must see them). */
const badToken = fc.constantFrom(
  "1.5",
  "-1",
  "2147483648",
  '"7"',
  "null",
  "[1]",
  "1e3",
  "7.0",
  "-0",
  "true",
  "{}",
  "99999999999",
);
const badLogprob = fc.constantFrom('"0.5"', "null", "[0]", "true", "{}", "1e39", "-1e400");

function numsArb(kind: "i32" | "f32"): fc.Arbitrary<Node> {
  const good = kind === "i32" ? plainToken : plainLogprob;
  const bad = kind === "i32" ? badToken : badLogprob;
  return fc
    .tuple(fc.array(good, { maxLength: 12 }), fc.option(fc.tuple(bad, fc.nat()), { freq: 4 }))
    .map(([texts, broken]) => {
      const all = [...texts];
      if (broken) all.splice(broken[1] % (all.length + 1), 0, broken[0]);
      return { t: "nums" as const, kind, texts: all, plain: !broken, values: all.map((x) => JSON.parse(x)) };
    });
}

const { node: nodeArb } = fc.letrec<{ node: Node }>((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    { weight: 4, arbitrary: scalarArb },
    { weight: 1, arbitrary: fc.array(tie("node"), { maxLength: 4 }).map((items) => ({ t: "arr" as const, items })) },
    {
      weight: 2,
      arbitrary: fc
        .array(
          fc.oneof(
            fc.record({ key: keyArb, value: tie("node") }),
            fc
              .constantFrom(...TOKEN_KEYS)
              .chain((name) => numsArb("i32").map((value) => ({ key: { name, text: `"${name}"` }, value }))),
            numsArb("f32").map((value) => ({ key: { name: LOGPROB_KEY, text: `"${LOGPROB_KEY}"` }, value })),
          ),
          { maxLength: 5 },
        )
        .map((entries) => ({ t: "obj" as const, entries })),
    },
  ),
}));

// Whole lines in the three formats of src/formats, with random extra fields.
const raw = (value: unknown): Node => ({
  t: "raw",
  text: JSON.stringify(value),
  value: JSON.parse(JSON.stringify(value)),
});
const obj = (fields: [string, Node][], extra: { key: Key; value: Node }[] = []): Node => ({
  t: "obj",
  entries: [...fields.map(([name, value]) => ({ key: { name, text: JSON.stringify(name) }, value })), ...extra],
});
const extraFields = fc.array(fc.record({ key: keyArb, value: nodeArb }), { maxLength: 2 });
const callArb = fc
  .tuple(fc.string({ maxLength: 6 }), numsArb("i32"), numsArb("i32"), numsArb("f32"), extraFields)
  .map(([id, prompt, generation, logprobs, extra]) =>
    obj(
      [
        ["id", raw(id)],
        ["prompt_token_ids", prompt],
        ["generation_token_ids", generation],
        ["generation_log_probs", logprobs],
      ],
      extra,
    ),
  );
const canonicalArb = fc
  .tuple(
    fc.string({ maxLength: 8 }),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.array(callArb, { maxLength: 4 }),
    extraFields,
  )
  .map(([id, reward, calls, extra]) =>
    obj(
      [
        ["rollout_id", raw(id)],
        ["reward", raw(reward)],
        ["calls", { t: "arr", items: calls }],
      ],
      extra,
    ),
  );
const gymRowArb = fc.tuple(fc.array(callArb, { maxLength: 4 }), nodeArb, extraFields).map(([items, input, extra]) =>
  obj(
    [
      ["responses_create_params", obj([["input", input]])],
      [
        "response",
        obj([
          ["id", raw("resp_1")],
          ["object", raw("response")],
          ["output", { t: "arr", items }],
        ]),
      ],
      ["reward", raw(1)],
      ["_ng_task_index", raw(3)],
      ["_ng_rollout_index", raw(0)],
    ],
    extra,
  ),
);
const tokenEntryArb = fc
  .tuple(numsArb("i32"), numsArb("i32"), numsArb("f32"), extraFields)
  .map(([prompt, generation, logprobs, extra]) =>
    obj(
      [
        ["model_call_id", raw("mc-1")],
        ["prompt_token_ids", prompt],
        ["generation_token_ids", generation],
        ["generation_log_probs", logprobs],
        ["created_at", raw(1756498939.5)],
      ],
      extra,
    ),
  );
const lineArb = fc.oneof(nodeArb, canonicalArb, gymRowArb, tokenEntryArb);

/** Writes a node with random whitespace (drawn from `spaces`). */
function write(node: Node, spaces: string[], k = { i: 0 }): string {
  const s = () => spaces[k.i++ % spaces.length];
  switch (node.t) {
    case "raw":
      return node.text;
    case "nums":
      return `[${s()}${node.texts.join(`${s()},${s()}`)}${node.texts.length ? s() : ""}]`;
    case "arr":
      return `[${s()}${node.items.map((n) => write(n, spaces, k)).join(`${s()},${s()}`)}${s()}]`;
    case "obj":
      return (
        `{${s()}` +
        `${node.entries.map((e) => `${e.key.text}${s()}:${s()}${write(e.value, spaces, k)}`).join(`${s()},${s()}`)}` +
        `${s()}}`
      );
  }
}

/** The value the scanner must give back: JSON.parse semantics, plain arrays at exact keys typed. */
function expected(node: Node, keyText?: string, typing = true): unknown {
  switch (node.t) {
    case "raw":
      return node.value;
    case "nums": {
      const typed =
        node.plain &&
        (keyText === `"${LOGPROB_KEY}"`
          ? node.kind === "f32"
          : TOKEN_KEYS.some((k) => keyText === `"${k}"`) && node.kind === "i32");
      if (!typed || !typing) return node.values;
      return node.kind === "i32"
        ? Int32Array.from(node.values as number[])
        : Float32Array.from(node.values as number[]);
    }
    case "arr": {
      const items = node.items.map((n) => expected(n, undefined, typing));
      // Any array of plain numbers under one of the keys is typed, whoever generated it.
      const texts = node.items.map((n) => (n.t === "raw" ? n.text : ""));
      const tokenKey = TOKEN_KEYS.some((k) => keyText === `"${k}"`);
      if (typing && tokenKey && texts.every((t) => /^(0|[1-9][0-9]*)$/.test(t) && Number(t) < 2 ** 31))
        return Int32Array.from(items as number[]);
      const plainNumber = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$/;
      if (
        typing &&
        keyText === `"${LOGPROB_KEY}"` &&
        texts.every((t) => plainNumber.test(t) && Number.isFinite(Math.fround(Number(t))))
      ) {
        return Float32Array.from(items as number[]);
      }
      return items;
    }
    case "obj": {
      const out: Record<string, unknown> = {};
      for (const e of node.entries) {
        // Like JSON.parse: an own data property even for "__proto__"; a repeated key keeps its place, last value wins.
        Object.defineProperty(out, e.key.name, {
          value: expected(e.value, e.key.text, typing),
          writable: true,
          enumerable: true,
          configurable: true,
        });
      }
      return out;
    }
  }
}

/** Deep equality that tells Int32Array, Float32Array and arrays apart, with Object.is on numbers. */
function same(a: unknown, b: unknown, path = "$"): string | null {
  if (a instanceof Int32Array || a instanceof Float32Array || b instanceof Int32Array || b instanceof Float32Array) {
    if (Object.prototype.toString.call(a) !== Object.prototype.toString.call(b))
      return `${path}: ${Object.prototype.toString.call(a)} vs ${Object.prototype.toString.call(b)}`;
    const x = a as Float32Array,
      y = b as Float32Array;
    if (x.length !== y.length) return `${path}: length ${x.length} vs ${y.length}`;
    for (let i = 0; i < x.length; i++) if (!Object.is(x[i], y[i])) return `${path}[${i}]: ${x[i]} vs ${y[i]}`;
    return null;
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return `${path}: array shapes differ`;
    for (let i = 0; i < a.length; i++) {
      const d = same(a[i], b[i], `${path}[${i}]`);
      if (d) return d;
    }
    return null;
  }
  if (typeof a === "object" && a !== null && typeof b === "object" && b !== null) {
    const ka = Object.keys(a),
      kb = Object.keys(b);
    if (ka.join("\u0001") !== kb.join("\u0001")) return `${path}: keys ${JSON.stringify(ka)} vs ${JSON.stringify(kb)}`;
    if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return `${path}: prototypes differ`;
    for (const k of ka) {
      const d = same((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], `${path}.${k}`);
      if (d) return d;
    }
    return null;
  }
  return Object.is(a, b) ? null : `${path}: ${String(a)} vs ${String(b)}`;
}

function scannedValue(result: ScannedLine): unknown {
  if (!result.ok) throw new Error(`${result.code}: ${result.detail}`);
  return result.value;
}

// ---------------------------------------------------------------------------------------------

describe.each([true, false])("LineScanner (simd %s)", (simd) => {
  let scanner: LineScanner;
  beforeAll(async () => {
    scanner = await LineScanner.create({ simd });
  });
  const scan = (text: string) => scanner.scan(encoder.encode(text));

  it(
    "equals JSON.parse with typed arrays for generated lines " +
      "(canonical, Gym rows, token entries, any JSON) with tricky keys, strings and whitespace",
    () => {
      fc.assert(
        fc.property(lineArb, fc.array(ws, { minLength: 1, maxLength: 7 }), (node, spaces) => {
          const text = write(node, spaces);
          const diff = same(scannedValue(scan(text)), expected(node));
          if (diff) throw new Error(`${diff}\nline: ${text}`);
          // The model itself agrees with JSON.parse when nothing is typed.
          expect(same(JSON.parse(text), expected(node, undefined, false))).toBeNull();
        }),
        { numRuns: simd ? 1500 : 500 },
      );
    },
  );

  it("parses long token and logprob arrays (the 64-byte SIMD blocks) like JSON.parse, whatever the spacing", () => {
    const digitsToken = fc
      .oneof(
        fc.integer({ min: 0, max: 9 }),
        fc.integer({ min: 10, max: 99_999_999 }),
        fc.integer({ min: 100_000_000, max: 2 ** 31 - 1 }),
        fc.integer({ min: 2 ** 31, max: 9_999_999_999 }), // out of range: not plain
      )
      .map(String);
    const item = fc.oneof({ weight: 30, arbitrary: digitsToken }, { weight: 1, arbitrary: badToken });
    const gap = fc.oneof(
      { weight: 12, arbitrary: fc.constant("") },
      { weight: 1, arbitrary: fc.constantFrom(" ", "\n", "\r\n", "\t ") },
    );
    fc.assert(
      fc.property(
        fc.array(fc.tuple(item, gap, gap), { maxLength: 300 }),
        fc.array(plainLogprob, { maxLength: 100 }),
        fc.string({ maxLength: 80 }),
        (items, logprobs, tail) => {
          const body = items.map(([t, a, b], i) => (i === 0 ? `${a}${t}` : `${a},${b}${t}`)).join("");
          const text =
            `{"prompt_token_ids":[${body}],"generation_log_probs":[${logprobs.join(",")}],` +
            `"tail":${JSON.stringify(tail)}}`;
          const parsed = JSON.parse(text);
          const plain = items.every(([t]) => /^(0|[1-9][0-9]*)$/.test(t) && Number(t) < 2 ** 31);
          const want = {
            ...parsed,
            prompt_token_ids: plain ? Int32Array.from(parsed.prompt_token_ids) : parsed.prompt_token_ids,
            generation_log_probs: Float32Array.from(parsed.generation_log_probs),
          };
          const diff = same(scannedValue(scan(text)), want);
          if (diff) throw new Error(`${diff}\nline: ${text}`);
        },
      ),
      { numRuns: simd ? 600 : 200 },
    );
  });

  it("hands out views over its own linear memory, typed per key", () => {
    const value = scannedValue(
      scan('{"calls":[{"prompt_token_ids":[5,6],"generation_token_ids":[7],"generation_log_probs":[-0.5]}]}'),
    ) as {
      calls: { prompt_token_ids: Int32Array; generation_token_ids: Int32Array; generation_log_probs: Float32Array }[];
    };
    const call = value.calls[0];
    expect(Array.from(call.prompt_token_ids)).toEqual([5, 6]);
    expect(call.prompt_token_ids).toBeInstanceOf(Int32Array);
    expect(call.generation_log_probs).toBeInstanceOf(Float32Array);
    expect(call.prompt_token_ids.buffer).toBe(call.generation_log_probs.buffer);
    expect(call.prompt_token_ids.buffer.byteLength).toBeGreaterThanOrEqual(65536); // linear memory, not a copy
  });

  it("leaves arrays that are not plain numbers of the right kind as JSON arrays", () => {
    for (const bad of ["1.5", "-1", "2147483648", '"7"', "null", "[7]", "7e0", "7.0", "-0", "01"]) {
      const text = `{"prompt_token_ids":[1,${bad},2],"generation_token_ids":[3]}`;
      const result = scan(text);
      if (bad === "01") {
        expect(result.ok).toBe(false); // not JSON at all
        continue;
      }
      const value = scannedValue(result) as { prompt_token_ids: unknown; generation_token_ids: unknown };
      expect(value.prompt_token_ids).toEqual(JSON.parse(text).prompt_token_ids);
      expect(Array.isArray(value.prompt_token_ids)).toBe(true);
      expect(value.generation_token_ids).toBeInstanceOf(Int32Array);
    }
    for (const bad of ['"0.5"', "null", "1e39", "-1e400", "[0]"]) {
      const value = scannedValue(scan(`{"generation_log_probs":[-0.5,${bad}]}`)) as { generation_log_probs: unknown };
      expect(Array.isArray(value.generation_log_probs)).toBe(true);
    }
    // Escaped key names are the same key to JSON.parse; the scanner leaves them plain (the planner checks them).
    const escaped = scannedValue(scan('{"prompt\\u005ftoken_ids":[1,2]}')) as { prompt_token_ids: unknown };
    expect(escaped.prompt_token_ids).toEqual([1, 2]);
  });

  it(
    "refuses number syntax JSON does not allow, " +
      "in a short array and at every place of a long one (the SIMD blocks)",
    () => {
      const tokenKeys = ["prompt_token_ids", "generation_token_ids"];
      const cases: [keys: string[], entry: string][] = [
        ...["01", "012345678", "00000000", "-01", "1,,2", "1,", "+1", "1 2"].map((entry): [string[], string] => [
          tokenKeys,
          entry,
        ]),
        ...["-1e", "2E+", "-1.", "0.e5", "-.5", "1e+-2", "-01.5", "--1", "-", "1.5.2"].map(
          (entry): [string[], string] => [[LOGPROB_KEY, ...tokenKeys], entry],
        ),
      ];
      for (const [keys, entry] of cases) {
        for (const key of keys) {
          const filler = key === LOGPROB_KEY ? "-0.25" : "7";
          for (const [before, after] of [
            [0, 0],
            [0, 40],
            [40, 0],
            ...Array.from({ length: 24 }, (_, i) => [i + 1, 40 - i]),
          ]) {
            const items = [...Array(before).fill(filler), entry, ...Array(after).fill(filler)];
            const text = `{"${key}":[${items.join(",")}]}`;
            expect(() => JSON.parse(text)).toThrow(SyntaxError);
            const result = scan(text);
            expect([text, result.ok ? "ok" : result.code]).toEqual([text, "malformed_json"]);
          }
        }
      }
    },
  );

  it("keeps __proto__ and constructor keys as plain own data, never reaching a prototype", () => {
    const text =
      '{"__proto__":{"prompt_token_ids":[1],"polluted":true},' +
      '"constructor":{"prototype":{"generation_token_ids":[2]}},' +
      '"calls":[{"__proto__":[3],"prompt_token_ids":[4]}]}';
    const value = scannedValue(scan(text)) as Record<string, any>;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.keys(value)).toEqual(["__proto__", "constructor", "calls"]);
    expect(Object.getOwnPropertyDescriptor(value, "__proto__")!.value.prompt_token_ids).toBeInstanceOf(Int32Array);
    expect(value.constructor.prototype.generation_token_ids).toBeInstanceOf(Int32Array);
    expect(Object.getOwnPropertyDescriptor(value.calls[0], "__proto__")!.value).toEqual([3]);
    expect(Array.from(value.calls[0].prompt_token_ids as Int32Array)).toEqual([4]);
  });

  it("does not take a user string for a placeholder", () => {
    const value = scannedValue(
      scan('{"a":{"prompt_token_ids":"\\u0000"},"b":{"prompt_token_ids":[9]},"c":{"generation_token_ids":"\\u00000"}}'),
    ) as Record<string, any>;
    expect(value.a.prompt_token_ids).toBe("\u0000");
    expect(value.c.generation_token_ids).toBe("\u00000");
    expect(Array.from(value.b.prompt_token_ids)).toEqual([9]);
  });

  it("finds arrays at any depth (100,000 nested arrays) without recursion", () => {
    const depth = 100_000;
    let value = scannedValue(scan("[".repeat(depth) + '{"generation_token_ids":[1,2]}' + "]".repeat(depth)));
    for (let d = 0; d < depth; d++) value = (value as unknown[])[0];
    expect(Array.from((value as { generation_token_ids: Int32Array }).generation_token_ids)).toEqual([1, 2]);
  });

  it("uses the last of repeated keys, as JSON.parse does", () => {
    const value = scannedValue(
      scan(
        '{"prompt_token_ids":[1,2],"prompt_token_ids":[3],"generation_log_probs":[0.5],"generation_log_probs":null}',
      ),
    ) as Record<string, any>;
    expect(Array.from(value.prompt_token_ids)).toEqual([3]);
    expect(value.generation_log_probs).toBeNull();
  });

  it("reads every real Gym sample line like the JSON.parse oracle", () => {
    const lines = readFileSync(GYM_SAMPLES + "/competitive-coding-rollouts.jsonl", "utf8")
      .split("\n")
      .filter((l) => l.trim());
    const whole = readFileSync(GYM_SAMPLES + "/vllm-round-trip.json", "utf8"); // newlines are JSON whitespace
    let typed = 0;
    for (const text of [...lines, whole, whole.replace(/\n/g, "\r\n")]) {
      const value = scannedValue(scan(text));
      const diff = same(value, typedLikeOracle(text));
      if (diff) throw new Error(diff);
      typed += JSON.stringify(value, (_k, v) => (ArrayBuffer.isView(v) ? "TYPED" : v)).split("TYPED").length - 1;
    }
    expect(typed).toBeGreaterThan(20);
  });

  it("gives the planner the same rows as the JSON.parse path for a real Gym rollout", async () => {
    const cf = await init();
    const text = readFileSync(GYM_SAMPLES + "/competitive-coding-rollouts.jsonl", "utf8").split("\n")[0];
    const fast = toCanonical(scannedValue(scan(text)), "auto");
    const slow = toCanonical(JSON.parse(text), "auto");
    if (!fast.ok || !slow.ok) throw new Error("rejected");
    const a = cf.plan(fast.rollout),
      b = cf.plan(slow.rollout);
    expect(a.report).toEqual(b.report);
    expect(a.rows.map((r) => [Array.from(r.tokenIds), Array.from(r.logprobs)])).toEqual(
      b.rows.map((r) => [Array.from(r.tokenIds), Array.from(r.logprobs)]),
    );
    a.release();
    b.release();
  });

  it("names the byte offset of a line that is not JSON, cut off, or not UTF-8", () => {
    const cases: [Uint8Array, RegExp][] = [
      [encoder.encode('{"calls":[{"prompt_token_ids":[1,2'), /^not JSON at byte 34: cut off/],
      [encoder.encode('{"a":1,}'), /^not JSON at byte 7: unexpected '}'/],
      [encoder.encode('{"a":"é"} x'), /^not JSON at byte 11: unexpected 'x' after the JSON value/],
      [
        new Uint8Array([...encoder.encode('{"é":"'), 0xc3, 0x28, ...encoder.encode('"}')]),
        /^not JSON at byte 7: invalid UTF-8/,
      ],
      [
        new Uint8Array([...encoder.encode('{"a":"'), 0xed, 0xa0, 0x80, ...encoder.encode('"}')]),
        /^not JSON at byte 6: invalid UTF-8/,
      ],
      // Past U+10FFFF, and overlong forms of 3 and 4 bytes:
      [
        new Uint8Array([...encoder.encode('{"a":"'), 0xf4, 0x90, 0x80, 0x80, ...encoder.encode('"}')]),
        /^not JSON at byte 6: invalid UTF-8/,
      ],
      [
        new Uint8Array([...encoder.encode('{"a":"'), 0xe0, 0x80, 0x80, ...encoder.encode('"}')]),
        /^not JSON at byte 6: invalid UTF-8/,
      ],
      [
        new Uint8Array([...encoder.encode('{"a":"'), 0xf0, 0x80, 0x80, 0x80, ...encoder.encode('"}')]),
        /^not JSON at byte 6: invalid UTF-8/,
      ],
      [
        new Uint8Array([...encoder.encode('{"a":"xy'), 0xc1, 0xbf, ...encoder.encode('"}')]),
        /^not JSON at byte 8: invalid UTF-8/,
      ],
      [encoder.encode('{"prompt_token_ids":[1,2]'), /^not JSON at byte 25: cut off/],
      [encoder.encode(""), /^not JSON at byte 0: cut off/],
      [encoder.encode('{"s":"a\tb"}'), /^not JSON at byte 7: unescaped control/],
      [encoder.encode('{"s":"\\x"}'), /^not JSON at byte 7: bad escape/],
      [encoder.encode('\ufeff{"a":1}'), /^not JSON at byte 0: unexpected byte 0xef/],
      [encoder.encode('{"generation_log_probs":[-0.5,]}'), /^not JSON at byte 30: unexpected ']'/],
    ];
    for (const [bytes, message] of cases) {
      const result = scanner.scan(bytes);
      expect(result.ok).toBe(false);
      if (result.ok) continue;
      expect(result.code).toBe("malformed_json");
      expect(result.detail).toMatch(message);
      expect(result.detail).not.toContain("\n");
    }
  });

  it("grows its memory for a large line and stays correct afterwards", () => {
    const tokens = Array.from({ length: 2_000_000 }, (_, i) => (i * 7919) % 200_000);
    const text =
      `{"calls":[{"prompt_token_ids":[${tokens.join(",")}],` +
      `"generation_token_ids":[1],"generation_log_probs":[-0.25]}]}`;
    const value = scannedValue(scan(text)) as { calls: { prompt_token_ids: Int32Array }[] };
    const got = value.calls[0].prompt_token_ids;
    expect(got.length).toBe(tokens.length);
    expect(got[1_999_999]).toBe(tokens[1_999_999]);
    expect(same(got, Int32Array.from(tokens))).toBeNull();
    const small = scannedValue(scan('{"prompt_token_ids":[42]}')) as { prompt_token_ids: Int32Array };
    expect(Array.from(small.prompt_token_ids)).toEqual([42]);
  });
});

describe("LineScanner zero-copy input", () => {
  it("scans a line written straight into its memory, like scan() does", async () => {
    const scanner = await LineScanner.create();
    const text = '{"calls":[{"prompt_token_ids":[1,2,3],"generation_log_probs":[-0.1]}],"x":"é"}';
    const bytes = encoder.encode(text);
    const input = scanner.inputBuffer(bytes.length)!;
    input.set(bytes);
    const value = scannedValue(scanner.scanInput(bytes.length));
    expect(same(value, scannedValue(scanner.scan(bytes)))).toBeNull();
    const bad = encoder.encode('{"a":[1,2}');
    scanner.inputBuffer(bad.length)!.set(bad);
    const result = scanner.scanInput(bad.length);
    expect(result.ok ? "" : result.detail).toMatch(/^not JSON at byte 9: unexpected '}'/);
  });
});

describe("LineScanner memory cap", () => {
  it("rejects a line too large for its maxMemory with rollout_too_large, then goes on", async () => {
    const scanner = await LineScanner.create({ maxMemory: 4 * 1024 * 1024 });
    const tokens = Array.from({ length: 600_000 }, (_, i) => i % 50_000).join(",");
    // Fits as input (~3.5 MB) but not with its parsed arrays (2.4 MB); and one that does not fit at all.
    for (const text of [`{"prompt_token_ids":[${tokens}]}`, `{"prompt_token_ids":[${tokens},${tokens}]}`]) {
      const result = scanner.scan(encoder.encode(text));
      expect(result.ok).toBe(false);
      if (!result.ok) {
        expect(result.code).toBe("rollout_too_large");
        expect(result.detail).toMatch(/^a line of \d+ bytes does not fit/);
      }
    }
    const small = scannedValue(scanner.scan(encoder.encode('{"prompt_token_ids":[1,2]}'))) as {
      prompt_token_ids: Int32Array;
    };
    expect(Array.from(small.prompt_token_ids)).toEqual([1, 2]);
  });
});

describe("LineScanner memory cap, the lines that fit", () => {
  it("reads a line of metadata only in about twice its length, and tokens in what their values need", async () => {
    const scanner = await LineScanner.create({ maxMemory: 64 * 1024 * 1024 });
    // 30.5 MB of text and no array: the line and its metadata text, ~61 MB (more would not fit).
    const text = `{"note":"${"x".repeat(30_500_000)}"}`;
    const meta = scanner.scan(encoder.encode(text));
    expect(meta.ok).toBe(true);
    // 25 MB of two-digit tokens: the line, then 4 bytes a token, ~58 MB (twice the tokens' room
    // would not fit).
    const count = 8_300_000;
    const tokens = Array.from({ length: count }, (_, i) => 10 + (i % 90)).join(",");
    const typed = scanner.scan(encoder.encode(`{"prompt_token_ids":[${tokens}]}`));
    expect(typed.ok).toBe(true);
    if (typed.ok) expect((typed.value as { prompt_token_ids: Int32Array }).prompt_token_ids.length).toBe(count);
  });
});

describe("LineScanner with huge lines", () => {
  it("never grows to the full 4 GiB (its u32 end of memory would wrap to 0 and refuse every later line)", async () => {
    const scanner = await LineScanner.create();
    expect(scanner.inputBuffer(2 ** 32 - 70_000)).toBeNull();
    const small = scannedValue(scanner.scan(encoder.encode('{"prompt_token_ids":[1,2,3]}'))) as {
      prompt_token_ids: Int32Array;
    };
    expect(Array.from(small.prompt_token_ids)).toEqual([1, 2, 3]);
  });

  it("rejects a line whose text without its arrays is longer than a JS string, as rollout_too_large", async () => {
    // 262 MB of `{"prompt_token_ids":[]},`: each `[]` becomes a ~50-byte placeholder, so the
    // metadata text passes V8's longest string although the line does not.
    const item = '{"prompt_token_ids":[]},';
    const body = Buffer.alloc(item.length * 10_900_000, item);
    const scanner = await LineScanner.create();
    const result = scanner.scan([encoder.encode('{"rollout_id":"e","x":['), body, encoder.encode("{}]}")]);
    expect(result).toMatchObject({ ok: false, code: "rollout_too_large" });
    expect(result.ok ? "" : result.detail).toMatch(
      new RegExp(
        /^a line of \d+ bytes: its text without the token arrays \(\d+ bytes\) /.source +
          /is longer than a JavaScript string can be$/.source,
      ),
    );
    expect(scannedValue(scanner.scan(encoder.encode('{"a":[1]}')))).toEqual({ a: [1] });
  });

  it("reads a line whose metadata and array table lie past 2 GiB of linear memory, given in parts", async () => {
    // 540 MB: 270 M logprobs of "0," parse to 1.08 GB; the metadata sits past 1.6 GB and the
    // array table past 2.1 GB (addresses that come back from WebAssembly as negative i32s).
    const count = 270_000_000;
    const head = encoder.encode('{"rollout_id":"big","calls":[{"prompt_token_ids":[7],"generation_log_probs":[');
    const body = Buffer.alloc(count * 2 - 1, "0,");
    const tail = encoder.encode('],"id":"c"}]}');
    const scanner = await LineScanner.create();
    const value = scannedValue(scanner.scan([head, body, tail])) as {
      rollout_id: string;
      calls: { id: string; prompt_token_ids: Int32Array; generation_log_probs: Float32Array }[];
    };
    expect(value.rollout_id).toBe("big");
    expect(value.calls[0].id).toBe("c");
    expect(Array.from(value.calls[0].prompt_token_ids)).toEqual([7]);
    const logprobs = value.calls[0].generation_log_probs;
    expect(logprobs.length).toBe(count);
    expect(logprobs.byteOffset).toBeGreaterThan(2 ** 29);
    expect([logprobs[0], logprobs[count - 1]]).toEqual([0, 0]);
  });
});
