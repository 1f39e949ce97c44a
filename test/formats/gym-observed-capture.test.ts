// Gym's token capture as it is written today (TokenEntry schema 1 to 5, gym-formats README §1):
// the example capture in examples/gym-capture/ (a v5 rollout with delta prompts, and Gym's own v3
// example byte for byte), the token digest's test vectors, and every rejection the reader adds:
// versions, delta chains, digests, cum_len, misfiled entries, conflicting refs.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { init, type Callforest } from "../../src/index.js";
import { toCanonical, type Converted, type TokenSource } from "../../src/formats/index.js";
import { usePlan } from "../../src/plan-imported.js";
import { tokenDirectory } from "../../src/files/tokens-dir.js";
import { Sha256 } from "../../src/formats/gym-capture/sha256.js";
import { tokenDigest } from "../../src/formats/gym-capture/token-digest.js";
import { ROOT } from "../support/fixtures.js";
import { cli, lines, read, tempDir } from "../ingest/cli.js";
import { clone, readJsonl } from "./helpers.js";

const DIR = join(ROOT, "examples", "gym-capture");
const [row, gymRow] = readJsonl(join(DIR, "rollouts.jsonl"));
const entries = readJsonl(join(DIR, "12-0.tokens.jsonl"));
const FILE = "mem/12-0.tokens.jsonl";

/** The example's model_call_ids (uuid4 hex, as Gym mints them) by the names its README uses. */
const ID = {
  L1: "3d6fe9d40bbd1e8d4e8907301427ea88",
  L2: "a424b7d429454f9fae5e697476d71dfc",
  F1: "e911f6c5d13e2a7f073be672ce8ffa2a",
  F2: "7b5419f6220c5bfe7d498fb4bf32416e",
  L3: "ad7af1f7ae0639c7d9b9e920e6178ce3",
  S: "173d978d516c53b2c313c2dc22fbf0ab",
  L4: "5d5de95f66a4cf75901b2670faf431fc",
  L5: "ad2564217745aaf9a150374b69c36a98",
  L6: "30552081b607c8bcdacfd864539e0f73",
};
const NAME = Object.fromEntries(Object.entries(ID).map(([name, id]) => [id, name]));
const names = (ids: readonly string[]) => ids.map((id) => NAME[id] ?? id);
/** The example file's line of each call (1-based): flush order, not ledger order. */
const LINE = Object.fromEntries(entries.map((e, i) => [NAME[e.model_call_id], i + 1]));

let cf: Callforest;
beforeAll(async () => {
  cf = await init();
});

/** Token entries from memory (file lines 1..n). */
function memoryTokens(values: unknown[], rolloutId = "12-0"): TokenSource {
  return {
    describe: (id) => `mem/${id}.tokens.jsonl`,
    load: (id) =>
      id === rolloutId
        ? { file: `mem/${id}.tokens.jsonl`, lines: values.map((value, i) => ({ line: i + 1, value })) }
        : null,
  };
}

function accepted(result: ReturnType<typeof toCanonical>): Converted {
  if (!result.ok) throw new Error(`rejected: ${result.code}: ${result.detail}`);
  return result;
}

const digestOf = (tokens: number[]) => tokenDigest([tokens])!;
const entryOf = (list: any[], name: keyof typeof ID) => list.find((e) => e.model_call_id === ID[name]);

/** A canonical entry of any version: `fields` on top of v1's required ones (plus a created_at). */
function entry(
  id: string,
  prompt: number[],
  generation: number[],
  fields: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    model_call_id: id,
    prompt_token_ids: prompt,
    generation_token_ids: generation,
    generation_log_probs: generation.map(() => -0.5),
    created_at: 1,
    ...fields,
  };
}

/** A one-invocation row listing `ids` by model_call_id, rollout `r-0`. */
function rowFor(ids: string[]): any {
  return {
    reward: 1,
    _ng_task_index: "r",
    _ng_rollout_index: 0,
    response: { id: "resp" },
    ng_agent_observations: {
      source: "test",
      records: [
        { kind: "agent_invocation", invocation_id: "inv", model_calls: ids.map((id) => ({ model_call_id: id })) },
      ],
      gaps: [],
    },
  };
}

function convert(values: Record<string, unknown>[], value = rowFor(values.map((v) => v.model_call_id as string))) {
  return toCanonical(value, "gym-observed", { tokens: memoryTokens(values, "r-0") });
}

describe("token digest (gym-formats README §1.4)", () => {
  it(
    "gives the README's test vectors, " +
      "and the example's first call's stamped digest (Node's SHA-256 and the page's)",
    () => {
      for (const hash of [undefined, new Sha256()]) {
        expect(tokenDigest([[1, 2, 3]], hash)).toBe("bf99633051449f0f3248b4995a7c8468b9561d7732447341916085f12ff9ff54");
      }
      expect(tokenDigest([[]], new Sha256())).toBe("2e222d36d0c6ae1db1ec18b3f96d9a46df5db61b40137bbfbac4cdf0acde9763");
      expect(tokenDigest([[]])).toBe("2e222d36d0c6ae1db1ec18b3f96d9a46df5db61b40137bbfbac4cdf0acde9763");
      expect(tokenDigest([])).toBe("2e222d36d0c6ae1db1ec18b3f96d9a46df5db61b40137bbfbac4cdf0acde9763");
      expect(tokenDigest([[1, 2, 3]])).toBe("bf99633051449f0f3248b4995a7c8468b9561d7732447341916085f12ff9ff54");
      expect(tokenDigest([[1], [], [2, 3]])).toBe("bf99633051449f0f3248b4995a7c8468b9561d7732447341916085f12ff9ff54");
      expect(tokenDigest([new Int32Array([100, 101, 102, 103]), [200, 201, 202]])).toBe(
        "315b791608af017e797e98c799511f5c9c86201751dc01fadcbb360976f60b1e",
      );
    },
  );

  it("encodes each id as a big-endian u64 (ids past 2^32 too); is null for a token no digest covers", () => {
    const ids = [0, 1, 2 ** 31, 2 ** 32 + 5, 2 ** 53 - 1];
    const bytes = Buffer.alloc(15 + 9 + ids.length * 8);
    bytes.write("nemo-gym-tokens");
    bytes.writeUInt8(1, 15);
    bytes.writeBigUInt64BE(BigInt(ids.length), 16);
    ids.forEach((id, i) => bytes.writeBigUInt64BE(BigInt(id), 24 + i * 8));
    expect(tokenDigest([ids])).toBe(createHash("sha256").update(bytes).digest("hex"));
    expect(tokenDigest([ids.slice(0, 2), ids.slice(2)], new Sha256())).toBe(
      createHash("sha256").update(bytes).digest("hex"),
    );
    // Past one 64 KiB chunk of encoded ids, in parts that straddle it.
    const many = Array.from({ length: 20_000 }, (_, i) => (i * 7919) % 150_000);
    const encoded = Buffer.alloc(24 + many.length * 8);
    encoded.write("nemo-gym-tokens");
    encoded.writeUInt8(1, 15);
    encoded.writeBigUInt64BE(BigInt(many.length), 16);
    many.forEach((id, i) => encoded.writeBigUInt64BE(BigInt(id), 24 + i * 8));
    const expected = createHash("sha256").update(encoded).digest("hex");
    expect(tokenDigest([many.slice(0, 8191), new Int32Array(many.slice(8191))])).toBe(expected);
    expect(tokenDigest([many], new Sha256())).toBe(expected);
    for (const bad of [-1, 1.5, 2 ** 53, "7", null]) expect(tokenDigest([[1, bad]])).toBeNull();
  });

  it("SHA-256 agrees with node:crypto across block boundaries and split updates", () => {
    for (const length of [0, 1, 55, 56, 63, 64, 65, 119, 120, 1000, 100_003]) {
      const bytes = new Uint8Array(length).map((_, i) => (i * 131 + length) & 255);
      const cut = Math.floor(length / 3);
      for (const at of [0, 1, 3, cut]) {
        const ours = new Sha256().update(bytes.subarray(0, at)).update(bytes.subarray(at)).hex();
        expect([length, at, ours]).toEqual([length, at, createHash("sha256").update(bytes).digest("hex")]);
      }
    }
  });
});

describe("the example capture (examples/gym-capture/README.md): v5, delta prompts", () => {
  const tokens = tokenDirectory(DIR);
  const result = accepted(toCanonical(row, "auto", { tokens }));
  const { rollout } = result;
  const call = (name: keyof typeof ID) => rollout.calls.find((c) => c.id === ID[name])!;

  it("reads all nine calls in ledger order (created_at), each in its invocation's agent", () => {
    expect([result.format, rollout.rollout_id, rollout.reward]).toEqual(["gym-observed", "12-0", 1]);
    expect(names(rollout.calls.map((c) => c.id))).toEqual(["L1", "L2", "F1", "F2", "L3", "S", "L4", "L5", "L6"]);
    expect(rollout.calls.map((c) => c.agent)).toEqual([
      "session-7f3a",
      "session-7f3a",
      "agent-fork-2c1e",
      "agent-fork-2c1e",
      ...Array(5).fill("session-7f3a"),
    ]);
    expect(rollout.agents).toEqual([
      { id: "session-7f3a", parent: null },
      { id: "agent-fork-2c1e", parent: "session-7f3a" },
    ]);
  });

  it("rebuilds each delta prompt as full(parent) ++ suffix; full prompts are the stored arrays", () => {
    const full = (name: keyof typeof ID) => [
      ...Array.from(call(name).prompt_token_ids),
      ...Array.from(call(name).generation_token_ids),
    ];
    for (const [child, parent] of [
      ["L2", "L1"],
      ["F1", "L2"],
      ["F2", "F1"],
      ["L3", "L2"],
      ["S", "L3"],
      ["L5", "L4"],
    ] as const) {
      const stored = entryOf(entries, child).prompt_token_ids;
      expect(Array.from(call(child).prompt_token_ids)).toEqual([...full(parent), ...stored]);
      expect(digestOf(full(child))).toBe(entryOf(entries, child).digest);
    }
    const fromMemory = accepted(toCanonical(row, "gym-observed", { tokens: memoryTokens(entries) })).rollout;
    for (const name of ["L1", "L4", "L6"] as const)
      expect(fromMemory.calls.find((c) => c.id === ID[name])!.prompt_token_ids).toBe(
        entryOf(entries, name).prompt_token_ids,
      );
  });

  it("plans by exact tokens: 3 trees, 4 rows, every generated token trained once", () => {
    const plan = cf.plan(rollout);
    try {
      const r = plan.report;
      expect([r.status, r.calls, r.eligible, r.roots, r.leaves, r.rows]).toEqual(["ok", 9, 9, 3, 4, 4]);
      expect(r.trained_tokens).toBe(r.captured_tokens);
      expect(
        plan.rows.map((x) => [NAME[x.leaf], names(x.calls), names(x.trained), names(x.context), x.numTokens]),
      ).toEqual([
        ["F2", ["L1", "L2", "F1", "F2"], ["F1", "F2"], ["L1", "L2"], 138],
        ["S", ["L1", "L2", "L3", "S"], ["L1", "L2", "L3", "S"], [], 142],
        ["L5", ["L4", "L5"], ["L4", "L5"], [], 93],
        ["L6", ["L6"], ["L6"], [], 107],
      ]);
    } finally {
      plan.release();
    }
  });

  it(
    "notes the unresolved call, the compaction's summary call, the records and gaps; " +
      "after planning, the parent Gym recorded that tokens overrule",
    () => {
      const at = (name: keyof typeof ID) => `${join(DIR, "12-0.tokens.jsonl")}:${LINE[name]}`;
      expect(result.diagnostics).toEqual([
        {
          code: "parent_unresolved",
          call: ID.L4,
          detail: `${at("L4")}: parent_resolution "unresolved" (reason "no_match")`,
        },
        {
          code: "context_compaction",
          call: ID.S,
          detail:
            `invocation session-7f3a, trigger auto, outcome completed, before_model_call ${ID.L3}, ` +
            `after_model_call ${ID.L4}, tokens 142 -> 51`,
        },
        { code: "observation_records", call: null, detail: "tool_call: 4" },
        {
          code: "invalid_transcript_record",
          call: null,
          detail: "invocation agent-fork-2c1e: agent-fork-2c1e.jsonl:17",
        },
        { code: "no_sandbox_runtime", call: null },
      ]);
      const report = usePlan(cf, result, 1, (_plan, report) => report);
      expect(report.diagnostics.slice(0, 6)).toEqual([
        ...result.diagnostics,
        {
          code: "recorded_parent_differs",
          call: ID.L6,
          detail: `${at("L6")}: Gym recorded parent "${ID.L5}"; exact tokens make it a root`,
        },
      ]);
    },
  );

  it("reads (model_ref, response_id) refs exactly as model_call_id refs", () => {
    const byId = clone(row);
    for (const record of byId.ng_agent_observations.records) {
      if (record.kind === "agent_invocation")
        record.model_calls = record.model_calls.map((ref: any) => ({ model_call_id: byIdOf(ref.response_id) }));
    }
    expect(accepted(toCanonical(byId, "gym-observed", { tokens })).rollout).toEqual(rollout);
    const byResponse = clone(row);
    for (const record of byResponse.ng_agent_observations.records) {
      if (record.kind === "agent_invocation")
        record.model_calls = record.model_calls.map((ref: any) => ({
          model_ref: ref.model_ref,
          response_id: ref.response_id,
        }));
    }
    expect(accepted(toCanonical(byResponse, "gym-observed", { tokens })).rollout).toEqual(rollout);
  });

  it("passes every Claude Code gap code of gym-formats §2.3 through under its own code, with its detail", () => {
    const codes = [
      "transcript_dir_missing",
      "transcript_dir_unreadable",
      "transcript_unreadable",
      "malformed_transcript_line",
      "invalid_transcript_record",
      "agent_transcript_unavailable",
      "model_response_id_missing",
      "unsupported_assistant_content_block",
      "invalid_assistant_content",
      "assistant_item_id_missing",
      "reasoning_item_id_missing",
      "tool_call_id_missing",
      "unsupported_user_content_block",
      "invalid_user_content",
      "tool_result_id_missing",
      "invocation_outcome_unavailable",
      "conflicting_subagent_parent",
      "cyclic_subagent_parent",
      "ambiguous_subagent_relation",
      "subagent_transcript_missing",
      "subagent_parent_unavailable",
      "compaction_before_model_call_unavailable",
      "compaction_after_model_call_unavailable",
      "compaction_model_call_reference_unavailable",
      "compaction_model_call_match_ambiguous",
      "compaction_outcome_unavailable",
      "compaction_timestamp_missing",
      "ambiguous_tool_artifact",
      "tool_start_missing",
      "tool_result_missing",
      "tool_start_timestamp_missing",
      "tool_result_timestamp_missing",
      "tool_timing_invalid",
      "model_call_ownership_unavailable",
      "observation_parse_failed",
      "no_sandbox_runtime",
    ];
    const value = clone(row);
    value.ng_agent_observations.gaps = codes.map((code, i) => ({
      code,
      invocation_id: i % 2 ? "session-7f3a" : null,
      detail: i % 3 ? `session.jsonl:${i}` : null,
    }));
    const notes = accepted(toCanonical(value, "gym-observed", { tokens })).diagnostics.filter((d) =>
      codes.includes(d.code),
    );
    expect(notes).toEqual(
      codes.map((code, i) => {
        const parts = [...(i % 2 ? ["invocation session-7f3a"] : []), ...(i % 3 ? [`session.jsonl:${i}`] : [])];
        return parts.length > 0 ? { code, call: null, detail: parts.join(": ") } : { code, call: null };
      }),
    );
  });

  it("rows over the folder: both rollouts (this one and Gym's v3 example) plan, with their notes", async () => {
    const dir = tempDir();
    const run = await cli(
      "rows",
      join(DIR, "rollouts.jsonl"),
      "--tokens",
      DIR,
      "-o",
      join(dir, "rows.jsonl"),
      "--report",
      join(dir, "report.jsonl"),
      "--jobs",
      "1",
    );
    expect(run.code).toBe(0);
    const reports = lines(read(join(dir, "report.jsonl"))).map((l) => JSON.parse(l));
    expect(
      reports.map((r) => [r.rollout_id, r.status, r.roots, r.rows, r.trained_tokens === r.captured_tokens]),
    ).toEqual([
      ["12-0", "ok", 3, 4, true],
      ["0-0", "ok", 2, 2, true],
    ]);
    expect(reports[0].diagnostics.map((d: any) => d.code)).toContain("recorded_parent_differs");
    expect(lines(read(join(dir, "rows.jsonl")))).toHaveLength(6);
  });
});

function byIdOf(responseId: string): string {
  const found = row.ng_model_call_capture.calls.find((c: any) => c.response_id === responseId);
  return found.model_call_id;
}

describe("Gym's own v3 example (gym-formats README §1.7, copied byte for byte)", () => {
  it("is the shared file unchanged", () => {
    const copy = readFileSync(join(DIR, "0-0.tokens.jsonl"));
    // The reference file's SHA-256, so that a changed copy fails wherever the folder is missing.
    expect(createHash("sha256").update(copy).digest("hex")).toBe(
      "bac688aff483b027a802d419901430a733138950936f99b69adb74e6eecdeb00",
    );
  });

  it("links call 2 to call 1 by tokens, as Gym recorded; call 3 (unresolved, no_match) is a root", () => {
    const result = accepted(toCanonical(gymRow, "auto", { tokens: tokenDirectory(DIR) }));
    const file = join(DIR, "0-0.tokens.jsonl");
    const report = usePlan(cf, result, 2, (plan, report) => {
      expect(plan.forest.map((c) => [c.id.slice(0, 2), c.parent?.slice(0, 2) ?? null])).toEqual([
        ["c1", null],
        ["c2", "c1"],
        ["c3", null],
      ]);
      return report;
    });
    expect(report.diagnostics.filter((d) => d.code !== "empty_generation")).toEqual([
      {
        code: "parent_unresolved",
        call: "c3c2a2b3d4e54f60ab1c2d3e4f506172",
        detail: `${file}:3: parent_resolution "unresolved" (reason "no_match")`,
      },
      {
        code: "context_compaction",
        call: null,
        detail:
          "invocation pi-session-0, trigger overflow, outcome completed, " +
          "before_model_call c2b1f1a2c3d44e5f9a0b1c2d3e4f5061, after_model_call c3c2a2b3d4e54f60ab1c2d3e4f506172",
      },
      { code: "observation_records", call: null, detail: "tool_call: 1" },
      { code: "compaction_summary_unavailable", call: null, detail: "invocation pi-session-0" },
      // SPEC v3: the compacted context resends c1's whole prompt, then parts inside c1's generation
      {
        code: "prefix_break",
        call: "c3c2a2b3d4e54f60ab1c2d3e4f506172",
        near: "c1a0e0f1b2c34d5e8f9a0b1c2d3e4f50",
        at: 4,
        expected: [200, 201, 202],
        found: [400, 401, 402, 500],
      },
    ]);
  });
});

describe("schema versions", () => {
  const [p1, g1] = [
    [1, 2, 3],
    [4, 5],
  ];
  const full1 = [...p1, ...g1];
  const lineage = { parent_call_id: null, cum_len: 5, digest: digestOf(full1) };
  const v3 = {
    ...lineage,
    parent_resolution: "root",
    parent_resolution_reason: "",
    continuation_fingerprint: "",
    continuation_context_len: 1,
    continuation_context_digest: "",
    fingerprint_version: 1,
  };

  it("reads v1 (and no version), v2, v3, v4 and v5 entries to the same calls", () => {
    const shapes: Record<string, unknown>[] = [
      {},
      { schema_version: 1, token_item_index: null, output_items: [], routed_experts: null, model: "" },
      { schema_version: 2, ...lineage },
      { schema_version: 3, ...v3 },
      { schema_version: 4, ...v3, prefix_requested: false, prefix_supplied: false },
      { schema_version: 5, ...v3, prefix_requested: false, prefix_supplied: false, prompt_is_delta: false },
    ];
    for (const fields of shapes) {
      const rollout = accepted(convert([entry("a", p1, g1, fields)])).rollout;
      expect(
        rollout.calls.map((c) => [c.id, Array.from(c.prompt_token_ids), Array.from(c.generation_token_ids)]),
      ).toEqual([["a", p1, g1]]);
    }
  });

  it("refuses a later version, and versions below 1, naming the version; a non-integer is a wrong type", () => {
    for (const version of [6, 0, -1, 100]) {
      const result = convert([entry("a", p1, g1, { schema_version: version })]);
      expect(result).toMatchObject({
        ok: false,
        reason: "invalid_rollout",
        code: "unsupported_schema_version",
        detail:
          `gym-observed: mem/r-0.tokens.jsonl:1 (call "a"): schema_version ${version} ` +
          `is not one callforest reads (TokenEntry 1 to 5)`,
      });
    }
    expect(convert([entry("a", p1, g1, { schema_version: "5" })])).toMatchObject({
      ok: false,
      code: "missing_field",
      detail: 'gym-observed: mem/r-0.tokens.jsonl:1 (call "a"): schema_version is "5", expected an integer',
    });
    expect(convert([entry("a", p1, g1, { schema_version: 4.5 })])).toMatchObject({ ok: false, code: "missing_field" });
  });
});

describe("routed experts: passed through from token entries unchanged", () => {
  it("an nrlre1 envelope string, nested lists (the same object), and null (no field)", () => {
    const envelope = "nrlre1:int16:7x1x2:AAABAAEAAgACAAMAAwAEAAQABQAFAAYABgAHAA==";
    const nested = Array.from({ length: 7 }, (_, t) => [[t, t + 1]]);
    const rollout = accepted(
      convert([
        entry("a", [1, 2, 3], [4, 5], { routed_experts: envelope }),
        entry("b", [1, 2, 3, 4, 5, 6], [7], { routed_experts: nested }),
        entry("c", [9], [8], { routed_experts: null }),
      ]),
    ).rollout as any;
    expect(rollout.calls[0].routed_experts).toBe(envelope);
    expect(rollout.calls[1].routed_experts).toBe(nested);
    expect("routed_experts" in rollout.calls[2]).toBe(false);
  });

  it("vLLM's shape (one entry fewer than the tokens) and unrecorded (all -1) entries plan (SPEC v4)", () => {
    // a routes tokens 0-2 (its last, 3, no prefill saw); b resends a and routes token 3 as a
    // continuation's prefill does, with token 4 not recorded.
    const aRoutes = [[[0]], [[1]], [[2]]];
    const bRoutes = [[[0]], [[1]], [[2]], [[3]], [[-1]]];
    const rollout = accepted(
      convert([
        entry("a", [1, 2, 3], [4], { routed_experts: aRoutes }),
        entry("b", [1, 2, 3, 4, 5], [6], { routed_experts: bRoutes }),
      ]),
    ).rollout as any;
    expect(rollout.calls[0].routed_experts).toBe(aRoutes);
    const plan = cf.plan(rollout);
    expect(plan.report).toMatchObject({ status: "ok", roots: 1, rows: 1, diagnostics: [] });
    expect(Array.from(plan.rows[0].routedExperts!.data)).toEqual([0, 1, 2, 3, -1, -1]);
    plan.release();
  });

  it("a delta entry's routed experts too (they cover its full sequence; the planner checks that)", () => {
    const rollout = accepted(
      convert([
        entry("a", [1, 2], [3], { schema_version: 5, parent_resolution: "root" }),
        entry("b", [4], [5], {
          schema_version: 5,
          parent_resolution: "resolved",
          parent_call_id: "a",
          prompt_is_delta: true,
          routed_experts: "nrlre1:int8:5x1x1:AAECAwQ=",
        }),
      ]),
    ).rollout as any;
    expect(Array.from(rollout.calls[1].prompt_token_ids)).toEqual([1, 2, 3, 4]);
    expect(rollout.calls[1].routed_experts).toBe("nrlre1:int8:5x1x1:AAECAwQ=");
  });
});

describe("recorded lineage: evidence next to exact tokens", () => {
  const v5 = (fields: Record<string, unknown>) => ({ schema_version: 5, ...fields });

  it(
    "a recorded parent that is not the exact-prefix parent is noted with both ids; " + "a kept: false parent says so",
    () => {
      // b continues a by tokens, but Gym recorded x (a retry nobody kept) as its parent.
      const values = [
        entry("a", [1, 2], [3], v5({ parent_resolution: "root" })),
        entry("x", [1, 2], [9], v5({ parent_resolution: "root" })),
        entry("b", [1, 2, 3, 4], [5], v5({ parent_resolution: "resolved", parent_call_id: "x" })),
        entry("c", [1, 2, 3, 4, 5, 6], [7], v5({ parent_resolution: "resolved", parent_call_id: "b" })),
        entry("d", [50], [51], v5({ parent_resolution: "resolved", parent_call_id: "ghost" })),
      ];
      const result = accepted(convert(values, rowFor(["a", "b", "c", "d"])));
      const report = usePlan(cf, result, 1, (_plan, report) => report);
      expect(report.diagnostics.filter((d) => d.code === "recorded_parent_differs")).toEqual([
        {
          code: "recorded_parent_differs",
          call: "b",
          detail: 'mem/r-0.tokens.jsonl:3: Gym recorded parent "x" (not kept); exact tokens link it to "a"',
        },
        {
          code: "recorded_parent_differs",
          call: "d",
          detail: 'mem/r-0.tokens.jsonl:5: Gym recorded parent "ghost" (no token entry); exact tokens make it a root',
        },
      ]);
    },
  );

  it("notes what Gym's validator would refuse and a v3+ entry without a decision; never rejects for them", () => {
    const values = [
      entry("a", [1], [2], { schema_version: 3 }),
      entry("b", [1, 2], [3], v5({ parent_resolution: "resolved" })),
      entry("c", [1, 2, 3], [4], v5({ parent_resolution: "root", parent_call_id: "b" })),
      entry("d", [7], [8], v5({ parent_resolution: "unresolved", parent_resolution_reason: "" })),
    ];
    const result = accepted(convert(values));
    expect(result.diagnostics.filter((d) => d.call !== null)).toEqual([
      {
        code: "parent_resolution_missing",
        call: "a",
        detail: "mem/r-0.tokens.jsonl:1: schema_version 3 without parent_resolution",
      },
      {
        code: "recorded_lineage_invalid",
        call: "b",
        detail: 'mem/r-0.tokens.jsonl:2: parent_resolution "resolved" with no parent_call_id',
      },
      {
        code: "recorded_lineage_invalid",
        call: "c",
        detail: 'mem/r-0.tokens.jsonl:3: parent_resolution "root" with parent_call_id "b"',
      },
      {
        code: "parent_unresolved",
        call: "d",
        detail: 'mem/r-0.tokens.jsonl:4: parent_resolution "unresolved" (no reason recorded)',
      },
    ]);
    // The tokens link c to b all the same.
    usePlan(cf, result, 1, (plan) => expect(plan.forest.map((c) => c.parent)).toEqual([null, "a", "b", null]));
  });
});

describe("rejections: one line naming file:line and the call", () => {
  type Case = [name: string, values: () => Record<string, unknown>[], code: string, detail: string];
  const root = (id: string, prompt: number[], generation: number[], extra: Record<string, unknown> = {}) =>
    entry(id, prompt, generation, {
      schema_version: 5,
      parent_resolution: "root",
      cum_len: prompt.length + generation.length,
      digest: digestOf([...prompt, ...generation]),
      ...extra,
    });
  const delta = (
    id: string,
    parent: string | null,
    suffix: number[],
    generation: number[],
    full: number[],
    extra: Record<string, unknown> = {},
  ) =>
    entry(id, suffix, generation, {
      schema_version: 5,
      parent_resolution: "resolved",
      parent_call_id: parent,
      prompt_is_delta: true,
      cum_len: full.length,
      digest: digestOf(full),
      ...extra,
    });
  const cases: Case[] = [
    [
      "a delta whose parent has no entry",
      () => [root("a", [1, 2], [3]), delta("b", "gone", [4], [5], [1, 2, 3, 4, 5])],
      "delta_parent_missing",
      'mem/r-0.tokens.jsonl:2 (call "b"): prompt_is_delta, ' +
        'but parent_call_id "gone" has no entry in mem/r-0.tokens.jsonl',
    ],
    [
      "a delta with no parent_call_id",
      () => [root("a", [1, 2], [3]), delta("b", null, [4], [5], [1, 2, 3, 4, 5])],
      "delta_parent_missing",
      'mem/r-0.tokens.jsonl:2 (call "b"): prompt_is_delta, but parent_call_id is null',
    ],
    [
      "a delta whose parent is a delta that cannot be rebuilt (named at the entry that needs it)",
      () => [delta("c", "b", [6], [7], [1, 2, 3, 4, 5, 6, 7]), delta("b", "gone", [4], [5], [1, 2, 3, 4, 5])],
      "delta_parent_unreadable",
      'mem/r-0.tokens.jsonl:1 (call "c"): prompt_is_delta, but its parent "b" cannot be rebuilt: ' +
        'at mem/r-0.tokens.jsonl:2 (call "b") parent_call_id "gone" has no entry in mem/r-0.tokens.jsonl',
    ],
    [
      "delta entries whose parents loop",
      () => [delta("a", "b", [1], [2], [1, 2]), delta("b", "a", [3], [4], [3, 4])],
      "delta_parent_unreadable",
      'mem/r-0.tokens.jsonl:1 (call "a"): prompt_is_delta, but its parent "b" cannot be rebuilt: ' +
        'at mem/r-0.tokens.jsonl:2 (call "b") the delta chain loops back to call "a" (mem/r-0.tokens.jsonl:1)',
    ],
    [
      "a digest that does not match the tokens",
      () => [root("a", [1, 2], [3], { digest: digestOf([1, 2, 4]) })],
      "token_digest_mismatch",
      `mem/r-0.tokens.jsonl:1 (call "a"): digest ${digestOf([1, 2, 4])} does not match its prompt and generation ` +
        `(they hash to ${digestOf([1, 2, 3])})`,
    ],
    [
      "a delta whose rebuilt prompt does not hash to its digest (one token of the parent's changed)",
      () => [root("a", [1, 2], [3]), delta("b", "a", [4], [5], [1, 2, 9, 4, 5])],
      "token_digest_mismatch",
      `mem/r-0.tokens.jsonl:2 (call "b"): digest ${digestOf([1, 2, 9, 4, 5])} ` +
        `does not match its prompt (rebuilt from its delta chain) and generation ` +
        `(they hash to ${digestOf([1, 2, 3, 4, 5])})`,
    ],
    [
      "a parent whose own digest fails is named, not its delta child",
      () => [delta("b", "a", [4], [5], [1, 2, 3, 4, 5]), root("a", [1, 2], [3], { digest: digestOf([7]) })],
      "token_digest_mismatch",
      `mem/r-0.tokens.jsonl:2 (call "a"): digest ${digestOf([7])} does not match its prompt and generation ` +
        `(they hash to ${digestOf([1, 2, 3])})`,
    ],
    [
      "a cum_len that is not the length of prompt + generation",
      () => [root("a", [1, 2], [3], { cum_len: 4 })],
      "token_cum_len_mismatch",
      'mem/r-0.tokens.jsonl:1 (call "a"): cum_len is 4, but its prompt and generation hold 3 tokens',
    ],
    [
      "a delta's cum_len counts the full sequence, not the stored suffix",
      () => [root("a", [1, 2], [3]), delta("b", "a", [4], [5], [1, 2, 3, 4, 5], { cum_len: 2 })],
      "token_cum_len_mismatch",
      'mem/r-0.tokens.jsonl:2 (call "b"): cum_len is 2, ' +
        "but its prompt (rebuilt from its delta chain) and generation hold 5 tokens",
    ],
    [
      "a digest that is not 64 lowercase hex digits",
      () => [root("a", [1, 2], [3], { digest: digestOf([1, 2, 3]).toUpperCase() })],
      "missing_field",
      `mem/r-0.tokens.jsonl:1 (call "a"): digest is "${digestOf([1, 2, 3]).toUpperCase().slice(0, 36)}..., ` +
        `expected 64 lowercase hex digits or null`,
    ],
    [
      "an entry of another rollout",
      () => [root("a", [1, 2], [3], { rollout_id: "r-1" })],
      "token_entry_rollout_mismatch",
      'mem/r-0.tokens.jsonl:1 (call "a"): rollout_id is "r-1", but the file holds rollout "r-0"',
    ],
    [
      "a parent_resolution Gym does not write",
      () => [root("a", [1, 2], [3], { parent_resolution: "guessed" })],
      "missing_field",
      'mem/r-0.tokens.jsonl:1 (call "a"): parent_resolution is "guessed", ' +
        'expected "root", "resolved", "unresolved" or null',
    ],
    [
      "prompt_is_delta that is not a boolean",
      () => [root("a", [1, 2], [3], { prompt_is_delta: "yes" })],
      "missing_field",
      'mem/r-0.tokens.jsonl:1 (call "a"): prompt_is_delta is "yes", expected true or false',
    ],
    [
      "a parent_call_id that is not a string",
      () => [root("a", [1, 2], [3], { parent_call_id: 7 })],
      "missing_field",
      'mem/r-0.tokens.jsonl:1 (call "a"): parent_call_id is 7, expected a string or null',
    ],
    [
      "a cum_len that is not a count",
      () => [root("a", [1, 2], [3], { cum_len: -1 })],
      "missing_field",
      'mem/r-0.tokens.jsonl:1 (call "a"): cum_len is -1, expected a non-negative integer or null',
    ],
  ];
  for (const [name, values, code, detail] of cases) {
    it(name, () => {
      const list = values();
      const result = convert(list, rowFor(list.map((v) => v.model_call_id as string)));
      expect(result.ok).toBe(false);
      if (result.ok) return;
      expect([result.code, result.reason, result.detail]).toEqual([code, "invalid_rollout", `gym-observed: ${detail}`]);
      expect(result.detail).not.toContain("\n");
      expect(result.rolloutId).toBe("r-0");
    });
  }

  it("a delta whose parent's line is not JSON is named at its own line; without such a delta, the bad line is", () => {
    const source = (withDelta: boolean): TokenSource => ({
      describe: () => FILE,
      load: () => ({
        file: FILE,
        lines: [
          { line: 1, error: "not JSON at byte 40: unexpected end of input" },
          { line: 2, value: withDelta ? delta("b", "a", [4], [5], [1, 2, 3, 4, 5]) : root("b", [4], [5]) },
        ],
      }),
    });
    const value = { ...rowFor(["b"]), _ng_task_index: 12 };
    expect(toCanonical(value, "gym-observed", { tokens: source(true) })).toMatchObject({
      ok: false,
      code: "delta_parent_unreadable",
      detail:
        `gym-observed: ${FILE}:2 (call "b"): prompt_is_delta, but its parent "a" has no readable entry ` +
        `(${FILE}:1: not JSON at byte 40: unexpected end of input)`,
    });
    expect(toCanonical(value, "gym-observed", { tokens: source(false) })).toMatchObject({
      ok: false,
      code: "malformed_token_entry",
      detail: `gym-observed: ${FILE}:1: not JSON at byte 40: unexpected end of input`,
    });
  });

  it("a token no digest covers is left to the planner, which names it and its token entry", () => {
    const values = [
      entry("a", [1, -2], [3], { schema_version: 5, parent_resolution: "root", digest: digestOf([1, 2, 3]) }),
    ];
    const report = usePlan(cf, accepted(convert(values)), 1, (_plan, report) => report);
    expect(report).toMatchObject({ status: "rejected", reason: "invalid_token" });
    expect(report.detail).toContain("(token entry mem/r-0.tokens.jsonl:1)");
  });

  it("a ref whose model_call_id and response_id name different captured calls", () => {
    const value = clone(row);
    value.ng_agent_observations.records[0].model_calls[0].response_id =
      value.ng_model_call_capture.calls[1].response_id;
    const result = toCanonical(value, "gym-observed", { tokens: tokenDirectory(DIR) });
    expect(result).toMatchObject({
      ok: false,
      reason: "invalid_rollout",
      code: "model_call_ref_conflict",
      detail:
        `gym-observed: ng_agent_observations.records[0].model_calls[0] (invocation "session-7f3a"): ` +
        `model_call_id "${ID.L1}" is ng_model_call_capture.calls[0], ` +
        `whose response_id is "${value.ng_model_call_capture.calls[0].response_id}", ` +
        `not "${value.ng_model_call_capture.calls[1].response_id}"`,
    });
  });

  it("a ref whose model_ref disagrees with its captured call", () => {
    const value = clone(row);
    value.ng_agent_observations.records[0].model_calls[0].model_ref = { type: "responses_api_models", name: "judge" };
    expect(toCanonical(value, "gym-observed", { tokens: tokenDirectory(DIR) })).toMatchObject({
      ok: false,
      code: "model_call_ref_conflict",
    });
  });
});

describe("delta chains: memory for the tokens the file holds (issue 31)", () => {
  /** A v5 chain: a root [1] → [2], then each entry a one-token delta with one generated token. */
  function chain(length: number, digests: boolean): Record<string, unknown>[] {
    const values: Record<string, unknown>[] = [];
    const full: number[] = [];
    for (let i = 0; i < length; i++) {
      const suffix = [2 * i + 1];
      const generation = [2 * i + 2];
      full.push(...suffix, ...generation);
      values.push(
        entry(`c${i}`, suffix, generation, {
          schema_version: 5,
          parent_resolution: i === 0 ? "root" : "resolved",
          parent_call_id: i === 0 ? null : `c${i - 1}`,
          prompt_is_delta: i > 0,
          cum_len: full.length,
          ...(digests ? { digest: digestOf(full) } : {}),
        }),
      );
    }
    return values;
  }

  it("a chain's rebuilt prompts are views of one shared buffer, each the right tokens", () => {
    const values = chain(300, true);
    const { rollout } = accepted(convert(values));
    const prompts = rollout.calls.map((c) => c.prompt_token_ids as Int32Array);
    prompts.forEach((prompt, i) => {
      expect(Array.from(prompt)).toEqual(Array.from({ length: 2 * i + 1 }, (_, t) => t + 1));
    });
    // Buffers double as the chain grows: a few of them, holding ~2x its 600 tokens, not 300 prompts.
    const buffers = new Set(prompts.slice(1).map((p) => p.buffer));
    expect(buffers.size).toBeLessThanOrEqual(8);
    expect([...buffers].reduce((n, b) => n + b.byteLength, 0)).toBeLessThan(4 * 600 * 4);
    expect(cf.plan(rollout).report).toMatchObject({ status: "ok", rows: 1 });
  });

  it("a fork copies its parent's tokens once: both branches rebuilt right, and checked by digest", () => {
    const values = [
      ...chain(3, true),
      entry("fork", [9], [10], {
        schema_version: 5,
        parent_resolution: "resolved",
        parent_call_id: "c1",
        prompt_is_delta: true,
        cum_len: 6,
        digest: digestOf([1, 2, 3, 4, 9, 10]),
      }),
      entry("fork-child", [11], [12], {
        schema_version: 5,
        parent_resolution: "resolved",
        parent_call_id: "fork",
        prompt_is_delta: true,
        cum_len: 8,
        digest: digestOf([1, 2, 3, 4, 9, 10, 11, 12]),
      }),
    ];
    const { rollout } = accepted(convert(values));
    expect(rollout.calls.map((c) => Array.from(c.prompt_token_ids as ArrayLike<number>))).toEqual([
      [1],
      [1, 2, 3],
      [1, 2, 3, 4, 5],
      [1, 2, 3, 4, 9],
      [1, 2, 3, 4, 9, 10, 11],
    ]);
    expect(cf.plan(rollout).report).toMatchObject({ status: "ok", rows: 2 });
  });

  it("a chain that expands past 2^28 tokens is refused up front with rollout_too_large, naming the size", () => {
    // Entry i's full sequence holds 2(i + 1) tokens: n entries expand to n(n + 1) tokens.
    const n = 16_400;
    const result = convert(chain(n, false));
    expect(result).toMatchObject({
      ok: false,
      reason: "rollout_too_large",
      code: "expanded_prompts_too_large",
      detail:
        `gym-observed: mem/r-0.tokens.jsonl: its ${n} entries' full sequences, delta prompts rebuilt, add up to ` +
        `${n * (n + 1)} tokens, more than the ${2 ** 28} one rollout may expand to`,
    });
  });
});
