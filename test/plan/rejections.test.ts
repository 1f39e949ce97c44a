// Every rejection code of SPEC, through the API (TS and WASM backends) and through the CLI
// `rows` command: a rejected rollout gives one report line naming the call, and the other
// rollouts of the same input still give their rows, unchanged.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from "vitest";
import { init, type Callforest } from "../../src/index.js";
import { main } from "../../src/cli/main.js";
import { fromBase64, maskToInts, rowToJson } from "../../src/output/jsonl.js";
import type { Report, Rollout } from "../../src/types.js";
import { generateRollout, generateSmallRollouts } from "../../bench/generate.js";
import { REJECTION_CODES, invalidRolloutArb, toJsonValue, type InvalidCase } from "../support/arbitraries.js";
import { expectNamesCall } from "../support/names-call.js";
import { reference, type RefRow } from "../support/reference.js";

const SEED = 20261130;

let backends: { name: string; cf: Callforest }[] = [];
let dir = "";

beforeAll(async () => {
  backends = [
    { name: "ts", cf: await init({ backend: "ts" }) },
    { name: "wasm", cf: await init() },
  ];
  dir = mkdtempSync(join(tmpdir(), "callforest-rejections-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

const workedExample = (): Rollout =>
  JSON.parse(readFileSync(new URL("../../examples/login-bug.json", import.meta.url), "utf8")) as Rollout;

/** A call with sensible defaults; `over` replaces or (with undefined) removes fields. */
function call(
  id: string,
  prompt: number[],
  generation: number[],
  over: Record<string, unknown> = {},
): Record<string, unknown> {
  const c: Record<string, unknown> = {
    id,
    agent: "L",
    prompt_token_ids: prompt,
    generation_token_ids: generation,
    generation_log_probs: generation.map(() => -0.5),
    ...over,
  };
  for (const key of Object.keys(over)) if (over[key] === undefined) delete c[key];
  return c;
}

const AGENTS = [
  { id: "L", parent: null, mode: "leader" },
  { id: "A", parent: "L", mode: "fresh" },
  { id: "B", parent: "L", mode: "fresh" },
  { id: "C", parent: "L", mode: "fork" },
];

function rollout(calls: unknown[], over: Record<string, unknown> = {}): Record<string, unknown> {
  const r: Record<string, unknown> = { rollout_id: "r1", reward: 1, agents: AGENTS, calls, ...over };
  for (const key of Object.keys(over)) if (over[key] === undefined) delete r[key];
  return r;
}

interface Case {
  name: string;
  input: unknown;
  code: string;
  /** The call the detail must name (null: none). */
  call: string | null;
  /** Not expressible in JSON (BigInt): API only. */
  apiOnly?: boolean;
}

const ok1 = call("ok1", [1, 2], [3]);

/** An object that refers to itself: not JSON, but the API must still reject it, not throw. */
function circular(): Record<string, unknown> {
  const o: Record<string, unknown> = { length: 1 };
  o.self = o;
  return o;
}

/** An Int32Array whose buffer was transferred away (it reads as empty, and copying it throws). */
function detached(): Int32Array {
  const array = Int32Array.of(1, 2, 3);
  structuredClone(array.buffer, { transfer: [array.buffer] });
  return array;
}

/** Hand-written cases: one or more per code, and the validation order SPEC's checks imply. */
const CASES: Case[] = [
  // invalid_rollout: rollout level
  { name: "rollout_id missing", input: rollout([ok1], { rollout_id: undefined }), code: "invalid_rollout", call: null },
  { name: "rollout_id empty", input: rollout([ok1], { rollout_id: "" }), code: "invalid_rollout", call: null },
  { name: "reward a string", input: rollout([ok1], { reward: "1" }), code: "invalid_rollout", call: null },
  { name: "reward missing", input: rollout([ok1], { reward: undefined }), code: "invalid_rollout", call: null },
  { name: "calls missing", input: rollout([], { calls: undefined }), code: "invalid_rollout", call: null },
  { name: "calls an object", input: rollout([], { calls: { ok1 } }), code: "invalid_rollout", call: null },
  { name: "agents not an array", input: rollout([ok1], { agents: "L" }), code: "invalid_rollout", call: null },
  { name: "rollout an array", input: [ok1], code: "invalid_rollout", call: null },
  // invalid_rollout: call level
  {
    name: "call without id",
    input: rollout([ok1, call("x", [1], [2], { id: undefined })]),
    code: "invalid_rollout",
    call: null,
  },
  {
    name: "call id a number",
    input: rollout([ok1, call("x", [1], [2], { id: 7 })]),
    code: "invalid_rollout",
    call: null,
  },
  { name: "call not an object", input: rollout([ok1, "c2"]), code: "invalid_rollout", call: null },
  {
    name: "agent a number",
    input: rollout([ok1, call("c2", [1], [2], { agent: 3 })]),
    code: "invalid_rollout",
    call: "c2",
  },
  {
    name: "prompt missing",
    input: rollout([ok1, call("c2", [1], [2], { prompt_token_ids: undefined })]),
    code: "invalid_rollout",
    call: "c2",
  },
  {
    name: "generation a string",
    input: rollout([ok1, call("c2", [1], [2], { generation_token_ids: "2" })]),
    code: "invalid_rollout",
    call: "c2",
  },
  {
    name: "logprobs missing",
    input: rollout([ok1, call("c2", [1], [2], { generation_log_probs: undefined })]),
    code: "invalid_rollout",
    call: "c2",
  },
  {
    name: "kept a string",
    input: rollout([ok1, call("c2", [1], [2], { kept: "false" })]),
    code: "invalid_rollout",
    call: "c2",
  },
  {
    name: "a hole in the calls array",
    input: rollout([ok1, , call("c3", [1, 2, 3], [4])]),
    code: "invalid_rollout",
    call: null,
  },
  {
    name: "tokens in a BigInt64Array",
    input: rollout([ok1, call("c2", [], [2], { prompt_token_ids: BigInt64Array.of(1n) })]),
    code: "invalid_rollout",
    call: "c2",
    apiOnly: true,
  },
  {
    name: "prompt a detached Int32Array",
    input: rollout([ok1, call("c2", [], [2], { prompt_token_ids: detached() })]),
    code: "invalid_rollout",
    call: "c2",
    apiOnly: true,
  },
  {
    name: "logprobs a detached Float32Array",
    input: rollout([
      ok1,
      call("c2", [1], [2], {
        generation_log_probs: (() => {
          const a = Float32Array.of(-1);
          structuredClone(a.buffer, { transfer: [a.buffer] });
          return a;
        })(),
      }),
    ]),
    code: "invalid_rollout",
    call: "c2",
    apiOnly: true,
  },
  {
    name: "prompt a self-referencing object",
    input: rollout([ok1, call("c2", [], [2], { prompt_token_ids: circular() })]),
    code: "invalid_rollout",
    call: "c2",
    apiOnly: true,
  },
  // duplicate_call_id (an unkept call's id counts too)
  {
    name: "two calls share an id",
    input: rollout([ok1, call("c2", [1], [2]), call("c2", [1, 2], [3])]),
    code: "duplicate_call_id",
    call: "c2",
  },
  {
    name: "unkept call shares an id",
    input: rollout([call("c2", [1], [2], { kept: false }), call("c2", [1], [2])]),
    code: "duplicate_call_id",
    call: "c2",
  },
  // unknown_agent
  {
    name: "agent not listed",
    input: rollout([ok1, call("c2", [1], [2], { agent: "Z" })]),
    code: "unknown_agent",
    call: "c2",
  },
  {
    name: 'default agent "" not listed',
    input: rollout([ok1, call("c2", [1], [2], { agent: undefined })]),
    code: "unknown_agent",
    call: "c2",
  },
  {
    name: "unkept call's agent not listed",
    input: rollout([ok1, call("c2", [1], [2], { agent: "Z", kept: false })]),
    code: "unknown_agent",
    call: "c2",
  },
  {
    name: "an empty agents list lists nobody",
    input: rollout([ok1], { agents: [] }),
    code: "unknown_agent",
    call: "ok1",
  },
  {
    name: "an empty agents list lists no default agent either",
    input: rollout([call("c1", [1], [2], { agent: undefined })], { agents: [] }),
    code: "unknown_agent",
    call: "c1",
  },
  // invalid_token
  { name: "negative token", input: rollout([ok1, call("c2", [1, -1], [2])]), code: "invalid_token", call: "c2" },
  { name: "token 2^31", input: rollout([ok1, call("c2", [1], [2 ** 31])]), code: "invalid_token", call: "c2" },
  { name: "fractional token", input: rollout([ok1, call("c2", [1.5], [2])]), code: "invalid_token", call: "c2" },
  {
    name: "token a string",
    input: rollout([ok1, call("c2", ["7"] as unknown as number[], [2])]),
    code: "invalid_token",
    call: "c2",
  },
  {
    name: "token null",
    input: rollout([ok1, call("c2", [1], [null] as unknown as number[])]),
    code: "invalid_token",
    call: "c2",
  },
  {
    name: "negative in an Int32Array",
    input: rollout([
      ok1,
      call("c2", [], [], {
        prompt_token_ids: Int32Array.of(4, -3),
        generation_token_ids: Int32Array.of(1),
        generation_log_probs: [-1],
      }),
    ]),
    code: "invalid_token",
    call: "c2",
  },
  {
    name: "unkept call with a bad token",
    input: rollout([ok1, call("c2", [1], [-2], { kept: false })]),
    code: "invalid_token",
    call: "c2",
  },
  {
    name: "unkept call with a bad token in an Int32Array generation",
    input: rollout([
      ok1,
      call("c2", [], [], {
        kept: false,
        prompt_token_ids: Int32Array.of(1),
        generation_token_ids: Int32Array.of(3, -2),
        generation_log_probs: [-1, -1],
      }),
    ]),
    code: "invalid_token",
    call: "c2",
  },
  // logprob_length_mismatch
  {
    name: "one logprob short",
    input: rollout([ok1, call("c2", [1], [2, 3], { generation_log_probs: [-1] })]),
    code: "logprob_length_mismatch",
    call: "c2",
  },
  {
    name: "logprobs for an empty generation",
    input: rollout([ok1, call("c2", [1], [], { generation_log_probs: [-1] })]),
    code: "logprob_length_mismatch",
    call: "c2",
  },
  {
    name: "one logprob too many, Float32Array",
    input: rollout([ok1, call("c2", [1], [2], { generation_log_probs: Float32Array.of(-1, -2) })]),
    code: "logprob_length_mismatch",
    call: "c2",
  },
  // invalid_logprob
  {
    name: "NaN logprob",
    input: rollout([ok1, call("c2", [1], [2, 3], { generation_log_probs: [-1, Number.NaN] })]),
    code: "invalid_logprob",
    call: "c2",
  },
  {
    name: "infinite logprob",
    input: rollout([ok1, call("c2", [1], [2], { generation_log_probs: [Number.NEGATIVE_INFINITY] })]),
    code: "invalid_logprob",
    call: "c2",
  },
  {
    name: "logprob overflowing float32",
    input: rollout([ok1, call("c2", [1], [2], { generation_log_probs: [-1e39] })]),
    code: "invalid_logprob",
    call: "c2",
  },
  {
    name: "Float64Array logprob overflowing float32",
    input: rollout([ok1, call("c2", [1], [2], { generation_log_probs: Float64Array.of(1e39) })]),
    code: "invalid_logprob",
    call: "c2",
  },
  {
    name: "logprob a string",
    input: rollout([ok1, call("c2", [1], [2], { generation_log_probs: ["-1"] })]),
    code: "invalid_logprob",
    call: "c2",
  },
  {
    name: "logprob a bigint",
    input: rollout([ok1, call("c2", [1], [2], { generation_log_probs: [-1n] })]),
    code: "invalid_logprob",
    call: "c2",
    apiOnly: true,
  },
  {
    name: "logprob null",
    input: rollout([ok1, call("c2", [1], [2], { generation_log_probs: [null] })]),
    code: "invalid_logprob",
    call: "c2",
  },
  // invalid_routed_experts (SPEC "Input", calls[].routed_experts)
  {
    name: "routed experts not an envelope",
    input: rollout([ok1, call("c2", [1], [2], { routed_experts: "nrlre2:int16:2x1x1:AAAAAA==" })]),
    code: "invalid_routed_experts",
    call: "c2",
  },
  {
    name: "routed experts with a payload of the wrong size",
    input: rollout([ok1, call("c2", [1], [2], { routed_experts: "nrlre1:int16:2x1x2:AAABAAIA" })]),
    code: "invalid_routed_experts",
    call: "c2",
  },
  {
    // SPEC v4: S ≥ len(full(c)) − 1 (vLLM's shape), so a call of 3 tokens needs 2 entries
    name: "routed experts covering too few tokens",
    input: rollout([ok1, call("c2", [1, 2], [3], { routed_experts: "nrlre1:int16:1x1x2:AAABAA==" })]),
    code: "invalid_routed_experts",
    call: "c2",
  },
  {
    name: "routed experts ragged lists",
    input: rollout([ok1, call("c2", [1], [2], { routed_experts: [[[0, 1]], [[2]]] })]),
    code: "invalid_routed_experts",
    call: "c2",
  },
  {
    name: "routed experts a number",
    input: rollout([ok1, call("c2", [1], [2], { routed_experts: 5 })]),
    code: "invalid_routed_experts",
    call: "c2",
  },
  {
    name: "routed experts given by one eligible call and not another",
    input: rollout([call("c1", [1], [2], { routed_experts: [[[1]], [[2]]] }), call("c2", [1, 2], [3])]),
    code: "invalid_routed_experts",
    call: "c2",
  },
  {
    name: "routed experts of another L x K",
    input: rollout([
      call("c1", [1], [2], { routed_experts: [[[1]], [[2]]] }),
      call("c2", [1, 2], [3], { routed_experts: [[[1, 2]], [[2, 3]], [[3, 4]]] }),
    ]),
    code: "invalid_routed_experts",
    call: "c2",
  },
  {
    // SPEC v3: L and K each the same for every call; L × K alone is not enough (1x4 is not 2x2)
    name: "routed experts of the same L x K product but another L and K",
    input: rollout([
      call("c1", [1], [2], { routed_experts: [[[1, 2, 3, 4]], [[2, 3, 4, 5]]] }),
      call("c2", [1, 2], [3], { routed_experts: "nrlre1:int16:3x2x2:" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }),
    ]),
    code: "invalid_routed_experts",
    call: "c2",
  },
  {
    name: "routed experts of the same L x K product, as lists",
    input: rollout([
      call("c1", [1], [2], {
        routed_experts: [
          [[1], [2]],
          [[3], [4]],
        ],
      }),
      call("c2", [1, 2], [3], { routed_experts: [[[1, 2]], [[2, 3]], [[3, 4]]] }),
    ]),
    code: "invalid_routed_experts",
    call: "c2",
  },
  {
    // standard base64, as NeMo RL writes it: 4 bytes are "AAAAAA==", never "AAAAAA"
    name: "routed experts in unpadded base64",
    input: rollout([ok1, call("c2", [1], [2], { routed_experts: "nrlre1:int16:2x1x1:AAAAAA" })]),
    code: "invalid_routed_experts",
    call: "c2",
  },
  {
    name: "routed experts in base64 with a padding character short",
    input: rollout([ok1, call("c2", [1], [2], { routed_experts: "nrlre1:int16:2x1x1:AAAAAA=" })]),
    code: "invalid_routed_experts",
    call: "c2",
  },
  {
    name: "routed experts in base64 whose last character carries stray bits",
    input: rollout([ok1, call("c2", [1], [2], { routed_experts: "nrlre1:int16:2x1x1:AAAAAB==" })]),
    code: "invalid_routed_experts",
    call: "c2",
  },
  {
    name: "routed experts in base64 with padding inside",
    input: rollout([ok1, call("c2", [1], [2], { routed_experts: "nrlre1:int16:2x1x1:AA==AA==" })]),
    code: "invalid_routed_experts",
    call: "c2",
  },
  {
    name: "bad routed experts before bad media",
    input: rollout([ok1, call("c2", [1], [2], { routed_experts: 5, media: 5 })]),
    code: "invalid_routed_experts",
    call: "c2",
  },
  {
    name: "bad logprob before bad routed experts",
    input: rollout([ok1, call("c2", [1], [2], { routed_experts: 5, generation_log_probs: [Number.NaN] })]),
    code: "invalid_logprob",
    call: "c2",
  },
  // invalid_media (SPEC "Input", calls[].media): each rule, on kept and unkept calls
  ...(
    [
      ["not an array", "sha256:aa"],
      ["an object, not a list", { id: "x", offset: 0, length: 1 }],
      ["an item not an object", [null]],
      ["an item a list", [["x", 0, 1]]],
      ["id missing", [{ offset: 0, length: 1 }]],
      ["id empty", [{ id: "", offset: 0, length: 1 }]],
      ["id a number", [{ id: 7, offset: 0, length: 1 }]],
      ["offset missing", [{ id: "x", length: 1 }]],
      ["offset fractional", [{ id: "x", offset: 0.5, length: 1 }]],
      ["offset a string", [{ id: "x", offset: "0", length: 1 }]],
      ["offset negative", [{ id: "x", offset: -1, length: 1 }]],
      ["length 0", [{ id: "x", offset: 0, length: 0 }]],
      ["length negative", [{ id: "x", offset: 0, length: -2 }]],
      ["length not an integer", [{ id: "x", offset: 0, length: 1.5 }]],
      [
        "spans unordered",
        [
          { id: "x", offset: 2, length: 1 },
          { id: "y", offset: 0, length: 1 },
        ],
      ],
      [
        "spans overlapping",
        [
          { id: "x", offset: 0, length: 2 },
          { id: "y", offset: 1, length: 1 },
        ],
      ],
      ["span past the prompt", [{ id: "x", offset: 2, length: 2 }]],
      ["span starting at the prompt's end", [{ id: "x", offset: 3, length: 1 }]],
    ] as const
  ).flatMap(([what, media]): Case[] => [
    {
      name: `media ${what}`,
      input: rollout([ok1, call("c2", [1, 2, 3], [4], { media })]),
      code: "invalid_media",
      call: "c2",
    },
    {
      name: `media ${what}, unkept call`,
      input: rollout([ok1, call("c2", [1, 2, 3], [4], { media, kept: false })]),
      code: "invalid_media",
      call: "c2",
    },
  ]),
  ...(
    [
      ["a negative version", -1],
      ["a version past 2^31-1", 2 ** 31],
      ["a fraction", 1.5],
      ["a string", "7"],
      ["one version too many", [7, 7]],
      ["none for the generated token", []],
      ["a bad per-token version", [-3]],
    ] as const
  ).flatMap(([what, weight_version]): Case[] => [
    {
      name: `weight_version: ${what}`,
      input: rollout([ok1, call("c2", [1, 2, 3], [4], { weight_version })]),
      code: "invalid_weight_version",
      call: "c2",
    },
  ]),
  {
    name: "bad weight_version before bad media (SPEC's order)",
    input: rollout([ok1, call("c2", [1, 2, 3], [4], { weight_version: "x", media: 5 })]),
    code: "invalid_weight_version",
    call: "c2",
  },
  {
    name: "media on typed arrays",
    input: rollout([
      ok1,
      call("c2", [], [], {
        prompt_token_ids: Int32Array.of(1, 2),
        generation_token_ids: Int32Array.of(3),
        generation_log_probs: Float32Array.of(-1),
        media: [{ id: "x", offset: 1, length: 2 }],
      }),
    ]),
    code: "invalid_media",
    call: "c2",
  },
  {
    name: "bad logprob before bad media",
    input: rollout([ok1, call("c2", [1, 2, 3], [4], { generation_log_probs: [Number.NaN], media: 5 })]),
    code: "invalid_logprob",
    call: "c2",
  },
  {
    name: "bad Float64Array logprob before bad media",
    input: rollout([ok1, call("c2", [1, 2, 3], [4], { generation_log_probs: Float64Array.of(1e39), media: 5 })]),
    code: "invalid_logprob",
    call: "c2",
  },
  {
    name: "bad token in an Int32Array before bad media",
    input: rollout([
      ok1,
      call("c2", [], [], {
        prompt_token_ids: Int32Array.of(1, -2),
        generation_token_ids: Int32Array.of(3),
        generation_log_probs: Float32Array.of(-1),
        media: 5,
      }),
    ]),
    code: "invalid_token",
    call: "c2",
  },
  {
    name: "logprob count before bad media",
    input: rollout([ok1, call("c2", [1], [2], { generation_log_probs: [], media: 5 })]),
    code: "logprob_length_mismatch",
    call: "c2",
  },
  {
    name: "bad media before a later ambiguity",
    input: rollout([
      ok1,
      call("a1", [9], [8], { agent: "A" }),
      call("b1", [9], [8], { agent: "B", media: [{ id: "x", offset: 1, length: 1 }] }),
      call("c1", [9, 8], [6], { agent: "C" }),
    ]),
    code: "invalid_media",
    call: "b1",
  },
  // ambiguous_parent: twins A and B; C (parent agent L) continues their shared full sequence
  {
    name: "twins continued by a sibling agent",
    input: rollout([
      ok1,
      call("a1", [9], [8], { agent: "A" }),
      call("b1", [9], [8], { agent: "B" }),
      call("c1", [9, 8, 7], [6], { agent: "C" }),
    ]),
    code: "ambiguous_parent",
    call: "c1",
  },
  {
    name: "two calls of one agent with one full sequence, continued by that agent",
    input: rollout([
      ok1,
      call("a1", [9], [8], { agent: "A" }),
      call("a2", [9], [8], { agent: "A" }),
      call("a3", [9, 8], [6], { agent: "A" }),
    ]),
    code: "ambiguous_parent",
    call: "a3",
  },
  {
    name: "twins without an agents list, continued by a third agent",
    input: rollout(
      [
        call("a1", [9], [8], { agent: "A" }),
        call("b1", [9], [8], { agent: "B" }),
        call("c1", [9, 8], [6], { agent: "C" }),
      ],
      { agents: undefined },
    ),
    code: "ambiguous_parent",
    call: "c1",
  },
  // no_trainable_calls
  { name: "no calls", input: rollout([]), code: "no_trainable_calls", call: null },
  {
    name: "only unkept calls",
    input: rollout([call("c1", [1], [2], { kept: false })]),
    code: "no_trainable_calls",
    call: null,
  },
  {
    name: "only empty generations",
    input: rollout([call("c1", [1], []), call("c2", [1, 2], [])]),
    code: "no_trainable_calls",
    call: null,
  },
  // the first problem in ledger order is the reason; within a call, SPEC's order of checks
  {
    name: "rollout fields before calls: reward missing, ids duplicated",
    input: rollout([ok1, ok1], { reward: undefined }),
    code: "invalid_rollout",
    call: null,
  },
  {
    name: "rollout fields before calls: agents listed twice, agent unknown",
    input: rollout([call("c1", [1], [2], { agent: "Z" })], { agents: [AGENTS[0], AGENTS[0]] }),
    code: "invalid_rollout",
    call: null,
  },
  {
    name: "structure before duplicate id",
    input: rollout([ok1, call("ok1", [1], [2], { kept: 1 })]),
    code: "invalid_rollout",
    call: "ok1",
  },
  {
    name: "duplicate id before unknown agent",
    input: rollout([ok1, call("ok1", [1], [2], { agent: "Z" })]),
    code: "duplicate_call_id",
    call: "ok1",
  },
  {
    name: "unknown agent before bad token",
    input: rollout([ok1, call("c2", [-1], [2], { agent: "Z" })]),
    code: "unknown_agent",
    call: "c2",
  },
  {
    name: "bad token before logprob count",
    input: rollout([ok1, call("c2", [1], [2, -2], { generation_log_probs: [-1] })]),
    code: "invalid_token",
    call: "c2",
  },
  {
    name: "bad token in an Int32Array before logprob count",
    input: rollout([
      ok1,
      call("c2", [], [], {
        prompt_token_ids: Int32Array.of(-7),
        generation_token_ids: Int32Array.of(2),
        generation_log_probs: [],
      }),
    ]),
    code: "invalid_token",
    call: "c2",
  },
  {
    name: "logprob count before bad logprob",
    input: rollout([ok1, call("c2", [1], [2], { generation_log_probs: [Number.NaN, -1] })]),
    code: "logprob_length_mismatch",
    call: "c2",
  },
  {
    name: "ambiguous call before a later bad token",
    input: rollout([
      ok1,
      call("a1", [9], [8], { agent: "A" }),
      call("b1", [9], [8], { agent: "B" }),
      call("c1", [9, 8], [6], { agent: "C" }),
      call("c2", [-1], [1]),
    ]),
    code: "ambiguous_parent",
    call: "c1",
  },
  {
    name: "earlier call's bad logprob before later duplicate",
    input: rollout([call("c1", [1], [2], { generation_log_probs: [1e39] }), call("c1", [1], [2])]),
    code: "invalid_logprob",
    call: "c1",
  },
  {
    name: "later call's problem even with no eligible call",
    input: rollout([call("c1", [1], [], {}), call("c2", [1], [2], { kept: false, agent: "Z" })]),
    code: "unknown_agent",
    call: "c2",
  },
];

function expectRejectedPlan(cf: Callforest, input: unknown, code: string, callId: string | null, line: number): Report {
  const plan = cf.plan(input, { line });
  try {
    expect({ status: plan.report.status, reason: plan.report.reason }).toEqual({ status: "rejected", reason: code });
    expect(plan.report.line).toBe(line);
    expect(plan.rows).toEqual([]);
    expect(plan.report.detail).toBeTypeOf("string");
    expect(plan.report.detail!.length).toBeGreaterThan(0);
    expect(plan.report.detail).not.toContain("\n");
    if (callId !== null) expectNamesCall(plan.report.detail, callId);
    const id = (input as { rollout_id?: unknown } | null)?.rollout_id;
    if (typeof id === "string" && id.length > 0) expect(plan.report.rollout_id).toBe(id);
    return plan.report;
  } finally {
    plan.release();
  }
}

describe("API: every rejection code on both backends", () => {
  test("the reference gives each hand-written case its code", () => {
    for (const c of CASES) {
      const ref = reference(c.input);
      expect({ name: c.name, reason: ref.status === "rejected" ? ref.reason : "accepted" }).toEqual({
        name: c.name,
        reason: c.code,
      });
    }
    // every code but malformed_json (CLI only) is covered by hand
    expect(new Set(CASES.map((c) => c.code))).toEqual(new Set(REJECTION_CODES));
  });

  for (const c of CASES) {
    test(`${c.code}: ${c.name}`, () => {
      for (const { name, cf } of backends) {
        try {
          expectRejectedPlan(cf, c.input, c.code, c.call, 4);
        } catch (error) {
          (error as Error).message = `[backend ${name}] ${(error as Error).message}`;
          throw error;
        }
      }
    });
  }

  test("generated faults: each code, injected at any call of a realistic rollout", () => {
    fc.assert(
      fc.property(invalidRolloutArb(), fc.integer({ min: 1, max: 99 }), (c, line) => {
        for (const { cf } of backends) expectRejectedPlan(cf, c.rollout, c.code, c.call, line);
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  test("a rejected report has no diagnostics (SPEC): not the empty generations, not a prefix_break read before", () => {
    const input = rollout([call("c1", [1], []), call("c2", [1, 2], [2], { kept: false }), call("c3", [1, 2], [])]);
    // c2 resends c1's prompt and parts inside its generation: a prefix_break, until c3 or the capacity rejects.
    const broken = [call("c1", [1, 2], [3, 4]), call("c2", [1, 2, 3, 9], [5])];
    for (const { name, cf } of backends) {
      const report = expectRejectedPlan(cf, input, "no_trainable_calls", null, 1);
      expect([name, report.diagnostics, report.detail]).toEqual([
        name,
        [],
        "none of the 3 calls is kept with generated tokens",
      ]);
      const ok = cf.plan(rollout(broken));
      expect(ok.report.diagnostics.map((d) => d.code)).toEqual(["prefix_break"]);
      ok.release();
      const invalid = expectRejectedPlan(cf, rollout([...broken, call("c3", [-1], [2])]), "invalid_token", "c3", 1);
      expect([name, invalid.diagnostics]).toEqual([name, []]);
      const full = cf.plan(rollout(broken), { capacity: 3, line: 1 });
      expect([name, full.report.reason, full.report.diagnostics]).toEqual([name, "row_exceeds_capacity", []]);
      full.release();
      expect(expectRejectedPlan(cf, rollout([]), "no_trainable_calls", null, 1).detail).toBe(
        "the rollout lists no calls",
      );
      expect(expectRejectedPlan(cf, rollout([call("c1", [1], [])]), "no_trainable_calls", null, 1).detail).toBe(
        "its one call is not kept with generated tokens",
      );
      // A problem stops reading: the calls read before it leave no diagnostics either.
      const stopped = expectRejectedPlan(
        cf,
        rollout([call("c1", [1], []), call("c2", [-1], [2]), call("c3", [1], [])]),
        "invalid_token",
        "c2",
        1,
      );
      expect([name, stopped.diagnostics]).toEqual([name, []]);
    }
  });

  test("array lengths that are not arrays never size the core: invalid_rollout on every backend", () => {
    // Sizes are reserved up front from the calls' arrays; a fake `length` must not count (it
    // once made the WASM core reserve 6 GB and answer rollout_too_large).
    const fake = { length: 1.5e9 };
    for (const field of ["prompt_token_ids", "generation_token_ids"]) {
      const call = {
        id: "c",
        prompt_token_ids: [1],
        generation_token_ids: [2],
        generation_log_probs: [-0.5],
        [field]: fake,
      };
      for (const { name, cf } of backends) {
        const plan = cf.plan({ rollout_id: "r", reward: 0, calls: [call] });
        expect([name, plan.report.reason, plan.report.detail]).toEqual([
          name,
          "invalid_rollout",
          `call "c" (calls[0]): ${field} must be an array, got {"length":1500000000}`,
        ]);
      }
    }
  });

  test("a rejection is not an exception, and the backend plans the next rollout normally", () => {
    for (const { cf } of backends) {
      for (const c of CASES) cf.plan(c.input).release();
      const plan = cf.plan(workedExample());
      expect(plan.report.status).toBe("ok");
      expect(plan.rows.map((r) => r.leaf)).toEqual(["C4", "C6", "C9", "C10", "C12"]);
      plan.release();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// CLI

interface CliResult {
  code: number;
  stderr: string;
  rows: string[];
  reports: Report[];
}

let fileCounter = 0;
function writeInput(name: string, lines: string[]): string {
  const path = join(dir, `${fileCounter++}-${name}`);
  writeFileSync(path, lines.map((l) => l + "\n").join(""));
  return path;
}

async function runRows(args: string[]): Promise<CliResult> {
  const out = join(dir, `rows-${fileCounter}.jsonl`);
  const reportFile = join(dir, `report-${fileCounter++}.jsonl`);
  let stderr = "";
  const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    stderr += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
    return true;
  });
  let code: number;
  try {
    code = await main(["rows", ...args, "-o", out, "--report", reportFile]);
  } finally {
    spy.mockRestore();
  }
  const lines = (path: string) => {
    try {
      return readFileSync(path, "utf8")
        .split("\n")
        .filter((l) => l.length > 0);
    } catch {
      return [];
    }
  };
  // The report's last line is the run record (docs/cli.md), not a rollout's.
  const reports = lines(reportFile).filter((l) => !l.startsWith('{"run":'));
  return { code, stderr, rows: lines(out), reports: reports.map((l) => JSON.parse(l) as Report) };
}

/** Valid rollouts to surround the rejected lines with: the worked example and generated ones. */
function validRollouts(): Rollout[] {
  const list: Rollout[] = [{ ...workedExample(), rollout_id: "valid-example" }];
  generateSmallRollouts(3, 100, { arrays: "plain" }).forEach((r, i) => list.push({ ...r, rollout_id: `valid-${i}` }));
  list.push({ ...generateRollout({ calls: 40, seed: 7 }), rollout_id: "valid-typed" });
  return list;
}

/** The rows the API gives for one rollout, as the CLI must write them. */
function apiRowLines(cf: Callforest, r: Rollout): string[] {
  const plan = cf.plan(r);
  try {
    return plan.rows.map((row) => rowToJson(row));
  } finally {
    plan.release();
  }
}

/** Written rows against the reference: tokens, float32 logprobs, the base64 bitset. */
function expectRowsMatchReference(lines: string[], r: Rollout): void {
  const ref = reference(r);
  if (ref.status !== "ok") throw new Error(`reference rejected ${r.rollout_id}: ${ref.message}`);
  expect(lines.length).toBe(ref.rows.length);
  for (const line of lines) expectRowMatches(line, ref.rows);
}

function expectRowMatches(line: string, refRows: RefRow[]): void {
  const row = JSON.parse(line) as {
    row: number;
    leaf: string;
    token_ids: number[];
    logprobs: number[];
    loss_mask: string;
    num_tokens: number;
  };
  const want = refRows[row.row];
  expect(row.leaf).toBe(want.leaf);
  expect(row.token_ids).toEqual(want.token_ids);
  expect(row.logprobs.map((x) => Math.fround(x))).toEqual(want.logprobs);
  expect(Array.from(maskToInts(fromBase64(row.loss_mask), row.num_tokens))).toEqual(want.loss_mask);
}

describe("CLI rows: rejected lines are reported, the other rollouts still give their rows", () => {
  const MALFORMED = ['{"rollout_id": "broken", "reward": 1,', "not json at all", '{"rollout_id": "x"}}'];

  for (const backend of ["wasm", "ts"] as const) {
    test(`every code in one .jsonl among valid rollouts (--backend ${backend})`, async () => {
      const valid = validRollouts();
      // each hand-written case and a few generated ones per code, each followed by a valid rollout
      const generated = REJECTION_CODES.flatMap((code) =>
        fc.sample(invalidRolloutArb(code), { seed: SEED, numRuns: 3 }),
      );
      const bad: { text: string; code: string; call: string | null }[] = [
        ...MALFORMED.map((text) => ({ text, code: "malformed_json", call: null })),
        ...CASES.filter((c) => !c.apiOnly).map((c) => ({
          text: JSON.stringify(toJsonValue(c.input)),
          code: c.code,
          call: c.call,
        })),
        ...generated.map((c: InvalidCase) => ({
          text: JSON.stringify(toJsonValue(c.rollout)),
          code: c.code,
          call: c.call,
        })),
      ];
      const lines: string[] = [];
      const expected: ({ ok: Rollout } | { bad: (typeof bad)[number] })[] = [];
      bad.forEach((b, i) => {
        const v = valid[i % valid.length];
        lines.push(b.text, JSON.stringify(toJsonValue(v)));
        expected.push({ bad: b }, { ok: v });
      });
      const input = writeInput("mixed.jsonl", lines);
      const result = await runRows([input, "--backend", backend]);
      expect(result.stderr).toBe("");
      expect(result.code).toBe(0);
      // one report line per input line, in order
      expect(result.reports.map((r) => r.line)).toEqual(lines.map((_, i) => i + 1));
      const rowsById = new Map<string, string[]>();
      for (const line of result.rows) {
        const id = (JSON.parse(line) as { rollout_id: string }).rollout_id;
        rowsById.set(id, [...(rowsById.get(id) ?? []), line]);
      }
      const cf = backends[0].cf;
      const wantRows = new Map(valid.map((v) => [v, apiRowLines(cf, v)]));
      expected.forEach((e, i) => {
        const report = result.reports[i];
        if ("bad" in e) {
          // JSON cannot carry NaN/Infinity: the case must still fail with the same code
          if (e.bad.code !== "malformed_json") {
            const ref = reference(JSON.parse(e.bad.text));
            expect(ref.status === "rejected" && ref.reason).toBe(e.bad.code);
          }
          expect({ line: i + 1, status: report.status, reason: report.reason }).toEqual({
            line: i + 1,
            status: "rejected",
            reason: e.bad.code,
          });
          expect(report.detail).toBeTypeOf("string");
          if (e.bad.call !== null) expectNamesCall(report.detail, e.bad.call);
        } else {
          expect({ line: i + 1, status: report.status, rollout_id: report.rollout_id }).toEqual({
            line: i + 1,
            status: "ok",
            rollout_id: e.ok.rollout_id,
          });
          expect(report.rows).toBe(wantRows.get(e.ok)!.length);
        }
      });
      // the valid rollouts' rows, unchanged: as the API writes them alone, and as SPEC gives them
      for (const v of valid) {
        const want = wantRows.get(v)!;
        const got = rowsById.get(v.rollout_id) ?? [];
        const times = expected.filter((e) => "ok" in e && e.ok === v).length;
        expect(got.length).toBe(want.length * times);
        for (let k = 0; k < times; k++) expect(got.slice(k * want.length, (k + 1) * want.length)).toEqual(want);
        expectRowsMatchReference(want, v);
      }
      // no row was written for a rejected rollout
      const validIds = new Set(valid.map((v) => v.rollout_id));
      expect([...rowsById.keys()].filter((id) => !validIds.has(id))).toEqual([]);
    });
  }

  test("a missing field is said to be missing, in the same words on both backends and every reader", async () => {
    const good = call("c1", [1, 2], [3]);
    const cases: [Record<string, unknown>, string][] = [
      [{ reward: 1, calls: [good] }, "rollout_id is missing (it must be a non-empty string)"],
      [{ rollout_id: "r", calls: [good] }, "reward is missing (it must be a finite number)"],
      [
        { rollout_id: "r", reward: 1, calls: [call("c1", [1], [3], { prompt_token_ids: undefined })] },
        'call "c1" (calls[0]): prompt_token_ids is missing (it must be an array)',
      ],
      [
        { rollout_id: "r", reward: 1, calls: [call("c1", [1], [3], { id: undefined })] },
        "calls[0]: id is missing (it must be a non-empty string)",
      ],
      [
        { rollout_id: "r", reward: 1, calls: [good], agents: [{ parent: null }] },
        "agents[0].id is missing (it must be a string)",
      ],
      [
        { rollout_id: "r", reward: 1, calls: [call("c1", [1], [3], { generation_log_probs: null })] },
        'call "c1" (calls[0]): generation_log_probs must be an array, got null',
      ],
      [
        { rollout_id: "r", reward: 1, calls: [good], agents: [{ id: "L", parent: null, mode: 5 }] },
        'agents[0] ("L"): mode must be a string',
      ],
    ];
    const want = cases.map(([, detail]) => detail);
    for (const { name, cf } of backends)
      expect([name, ...cases.map(([r]) => cf.plan(r).report.detail)]).toEqual([name, ...want]);
    const input = writeInput(
      "missing.jsonl",
      cases.map(([r]) => JSON.stringify(r)),
    );
    for (const args of [
      ["--backend", "wasm"],
      ["--backend", "ts"],
      ["--reader", "json"],
    ]) {
      const r = await runRows([input, ...args]);
      expect([args.join(" "), ...r.reports.map((report) => report.detail)]).toEqual([args.join(" "), ...want]);
    }
  });

  test("the first bad token is named whichever array it is in: a typed prompt's before a plain generation's", () => {
    const input = rollout([
      call("c1", [], [], {
        prompt_token_ids: Int32Array.of(4, -3),
        generation_token_ids: [1.5],
        generation_log_probs: [-1],
      }),
    ]);
    for (const { name, cf } of backends) {
      expect([name, cf.plan(input).report.detail]).toEqual([
        name,
        'call "c1" (calls[0]): prompt_token_ids[1] is -3, not an integer in [0, 2^31-1]',
      ]);
    }
  });

  test("the same valid rollouts alone give the same rows file", async () => {
    const valid = validRollouts();
    const alone = await runRows([
      writeInput(
        "valid.jsonl",
        valid.map((v) => JSON.stringify(toJsonValue(v))),
      ),
    ]);
    const mixedLines = valid.flatMap((v, i) => [
      JSON.stringify(toJsonValue(CASES[i].input)),
      MALFORMED[i % MALFORMED.length],
      JSON.stringify(toJsonValue(v)),
    ]);
    const mixed = await runRows([writeInput("mixed2.jsonl", mixedLines)]);
    expect(alone.code).toBe(0);
    expect(mixed.code).toBe(0);
    expect(mixed.rows).toEqual(alone.rows);
    expect(mixed.reports.filter((r) => r.status === "ok").map(({ line: _line, ...r }) => r)).toEqual(
      alone.reports.map(({ line: _line, ...r }) => r),
    );
  });

  test(
    'SPEC\'s "unknown fields are ignored": ' + "extra fields never turn a canonical rollout into a rejection",
    async () => {
      // fields other formats use (a kept Gym `response`, `object`, `ng_agent_observations`) are
      // unknown fields of a canonical rollout: it has rollout_id, reward and calls[]
      const example = workedExample();
      const extras: Record<string, unknown>[] = [
        { response: { id: "resp_1", output: [] } },
        { object: "response" },
        { ng_agent_observations: { records: [] } },
        { notes: "kept for debugging", response_id: "resp_2" },
      ];
      const lines = extras.map((extra) => JSON.stringify({ ...example, ...extra }));
      const result = await runRows([writeInput("unknown-fields.jsonl", lines)]);
      const plain = apiRowLines(backends[0].cf, example);
      expect(result.code).toBe(0);
      expect(
        result.reports.map((r) => ({ line: r.line, rollout_id: r.rollout_id, status: r.status, reason: r.reason })),
      ).toEqual(
        lines.map((_, i) => ({ line: i + 1, rollout_id: example.rollout_id, status: "ok", reason: undefined })),
      );
      expect(result.rows).toEqual(extras.flatMap(() => plain));
    },
  );

  test("a .json file that is not JSON: one malformed_json report, exit 0", async () => {
    const result = await runRows([writeInput("broken.json", ['{"rollout_id": "r", "calls": ['])]);
    expect(result.code).toBe(0);
    expect(result.reports.length).toBe(1);
    expect({ status: result.reports[0].status, reason: result.reports[0].reason }).toEqual({
      status: "rejected",
      reason: "malformed_json",
    });
    expect(result.rows).toEqual([]);
  });

  test("--strict: exit 1 when any rollout was rejected, reports and rows still written", async () => {
    const valid = validRollouts();
    const input = writeInput("strict.jsonl", [
      JSON.stringify(toJsonValue(valid[0])),
      MALFORMED[0],
      JSON.stringify(toJsonValue(CASES[0].input)),
    ]);
    const result = await runRows([input, "--strict"]);
    expect(result.code).toBe(1);
    expect(result.reports.map((r) => r.status)).toEqual(["ok", "rejected", "rejected"]);
    expect(result.rows).toEqual(apiRowLines(backends[0].cf, valid[0]));
    expect(result.stderr.trim().split("\n").length).toBe(1);
    const clean = await runRows([writeInput("strict-ok.jsonl", [JSON.stringify(toJsonValue(valid[1]))]), "--strict"]);
    expect(clean.code).toBe(0);
  });

  test("an unreadable input: exit 2, one line on stderr naming the file", async () => {
    const missing = join(dir, "no-such-file.jsonl");
    const result = await runRows([missing]);
    expect(result.code).toBe(2);
    expect(result.stderr.endsWith("\n")).toBe(true);
    expect(result.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(result.stderr).toContain(missing);
    expect(result.stderr).not.toMatch(/\s+at\s/); // no stack trace

    const folder = join(dir, "a-directory.jsonl");
    mkdirSync(folder);
    const asDir = await runRows([folder]);
    expect(asDir.code).toBe(2);
    expect(asDir.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(asDir.stderr).toContain(folder);
  });
});
