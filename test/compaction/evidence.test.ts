import { describe, expect, it } from "vitest";
import { runAgent } from "../../src/compaction/agent.js";
import { EvidenceError, PrefixMismatchError } from "../../src/compaction/errors.js";
import {
  EVIDENCE_SCHEMA_VERSION,
  extractGeneration,
  rolloutFromEvidence,
  validateEvidence,
  type EvidenceRecord,
} from "../../src/compaction/evidence.js";
import { recencyPolicy } from "../../src/compaction/policies.js";
import type { ResponsesResponse } from "../../src/compaction/responses.js";
import { turnChunked } from "../../src/compaction/schedules.js";
import { createGridWorld } from "../../src/compaction/testbed/index.js";
import { withServer } from "./support.js";

function response(fields: Record<string, unknown>): ResponsesResponse {
  return {
    id: "resp_1",
    object: "response",
    model: "m",
    status: "completed",
    output: [{ type: "function_call", id: "fc", call_id: "c", name: "move", arguments: "{}", ...fields }],
  };
}

function record(): EvidenceRecord {
  // b continues a: its prompt starts with a's 3 tokens (prompt + generation), the prefix it required.
  const call = (id: string, parent: string | null) => ({
    call_id: id,
    turn: 0,
    agent: "agent",
    endpoint: "context_compaction" as const,
    response_id: "r",
    attempts: 1,
    segment: 0,
    parent_call: parent,
    required_prefix_length: parent ? 3 : 0,
    view_digest: "sha256:0",
    request_digest: "sha256:1",
    decision: null,
    view: {
      input_items: 1,
      retained: { images: 0, imageGroups: 0, reasoning: 0 },
      omitted: { images: 0, imageGroups: 0, reasoning: 0 },
    },
    media: [],
    appended_items: 0,
    prompt_token_ids: parent ? [1, 2, 3, 4] : [1, 2],
    generation_token_ids: [3],
    generation_log_probs: [-0.5],
  });
  return {
    schema_version: EVIDENCE_SCHEMA_VERSION,
    rollout_id: "r1",
    reward: 1,
    agent: "agent",
    stop_reason: "max_turns",
    compaction: { enabled: true, policy: null, schedule: null, guards: null },
    calls: [call("a", null), call("b", "a")],
    attempts: [],
    boundaries: [],
    chunks: [],
    guards: [],
    media: [],
    image_placeholder_token: null,
  };
}

describe("generation evidence", () => {
  it("takes the token fields from the output item that carries them", () => {
    const g = extractGeneration(
      "c0",
      response({ prompt_token_ids: [1, 2], generation_token_ids: [3, 4], generation_log_probs: [-1, -2] }),
    );
    expect(g).toEqual({ prompt_token_ids: [1, 2], generation_token_ids: [3, 4], generation_log_probs: [-1, -2] });
  });

  it(
    "accepts several output items carrying the same token evidence, " + "and refuses ones that disagree on any field",
    () => {
      const tokens = { prompt_token_ids: [1, 2], generation_token_ids: [3], generation_log_probs: [-1] };
      // a reasoning item and a function call of one response, each carrying token fields
      const both = (reasoning: Record<string, unknown>): ResponsesResponse => {
        const r = response(tokens);
        r.output.unshift({
          type: "reasoning",
          id: "rs",
          content: [{ type: "reasoning_text", text: "hm" }],
          ...reasoning,
        } as never);
        return r;
      };
      expect(extractGeneration("c0", both(tokens))).toEqual(tokens);
      const differ = "call c0 (response resp_1): output items carry different token evidence";
      expect(() => extractGeneration("c0", both({ ...tokens, generation_token_ids: [4] }))).toThrow(differ);
      expect(() => extractGeneration("c0", both({ ...tokens, generation_log_probs: [-2] }))).toThrow(differ);
      expect(() => extractGeneration("c0", both({ ...tokens, prompt_token_ids: [1, 9] }))).toThrow(differ);
    },
  );

  it("rejects malformed evidence with the call, the field and the counts", () => {
    expect(() => extractGeneration("c0", response({ generation_token_ids: [3], generation_log_probs: [-1] }))).toThrow(
      "call c0 (response resp_1): prompt_token_ids is missing",
    );
    expect(() =>
      extractGeneration(
        "c0",
        response({ prompt_token_ids: [1], generation_token_ids: [3, 4, 5], generation_log_probs: [-1, -2] }),
      ),
    ).toThrow("call c0 (response resp_1): 2 generation_log_probs for 3 generation_token_ids");
    expect(() =>
      extractGeneration(
        "c0",
        response({ prompt_token_ids: [1], generation_token_ids: [3.5], generation_log_probs: [-1] }),
      ),
    ).toThrow(/generation_token_ids must be an array of integers/);
    expect(() =>
      extractGeneration(
        "c0",
        response({ prompt_token_ids: [1], generation_token_ids: [3], generation_log_probs: [null] }),
      ),
    ).toThrow(/finite numbers/);
    expect(() => extractGeneration("c0", response({}))).toThrow(/no output item carries prompt_token_ids/);
    expect(() =>
      extractGeneration("c0", response({ prompt_token_ids: [1], generation_token_ids: [], generation_log_probs: [] })),
    ).toThrow(/generation_token_ids is empty/);
  });
});

describe("evidence records", () => {
  it("validate, survive JSON, and turn into a canonical rollout", () => {
    const e = record();
    const back = validateEvidence(JSON.parse(JSON.stringify(e)));
    expect(rolloutFromEvidence(back)).toEqual({
      rollout_id: "r1",
      reward: 1,
      agents: [{ id: "agent", parent: null, mode: "leader" }],
      calls: [
        {
          id: "a",
          agent: "agent",
          prompt_token_ids: [1, 2],
          generation_token_ids: [3],
          generation_log_probs: [-0.5],
          media: [],
        },
        {
          id: "b",
          agent: "agent",
          prompt_token_ids: [1, 2, 3, 4],
          generation_token_ids: [3],
          generation_log_probs: [-0.5],
          media: [],
        },
      ],
    });
  });

  it("are rejected with the path of the first bad field", () => {
    const bad = (mutate: (e: EvidenceRecord & Record<string, unknown>) => void) => {
      const e = record() as EvidenceRecord & Record<string, unknown>;
      mutate(e);
      return () => validateEvidence(e);
    };
    expect(bad((e) => (e.schema_version = 2 as 1))).toThrow(
      "evidence schema_version: unsupported 2 (this reader knows 1)",
    );
    expect(bad((e) => delete (e as Partial<EvidenceRecord>).schema_version)).toThrow(EvidenceError);
    expect(bad((e) => (e.calls[1].call_id = "a"))).toThrow("evidence calls[1].call_id: duplicate call id a");
    expect(bad((e) => (e.calls[1].generation_log_probs = []))).toThrow(
      "evidence calls[1] (b): 0 generation_log_probs for 1 generation_token_ids",
    );
    expect(bad((e) => (e.calls[0].parent_call = "b"))).toThrow(
      "evidence calls[0].parent_call: names b, not an earlier call",
    );
    expect(bad((e) => (e.calls[1].parent_call = "b"))).toThrow(
      "evidence calls[1].parent_call: names b, not an earlier call",
    ); // itself
    expect(bad((e) => (e.calls[0].agent = "other"))).toThrow(
      /calls\[0\].agent: is "other", not the record's agent "agent"/,
    );
    expect(bad((e) => (e.reward = Number.NaN))).toThrow("evidence reward: must be a finite number");
    expect(bad((e) => e.boundaries.push({ first_call: "zz" } as never))).toThrow(
      "evidence boundaries[0].first_call: names zz, not a recorded call",
    );
    expect(bad((e) => (e.calls[1].media = ["", "sha256:aa"]))).toThrow(
      "evidence calls[1].media[0]: must be a non-empty string",
    );
    expect(bad((e) => (e.image_placeholder_token = -1))).toThrow(
      "evidence image_placeholder_token: must be null or an integer in [0, 2^31-1]",
    );
    // written before the field
    expect(bad((e) => delete (e as Partial<EvidenceRecord>).image_placeholder_token)).not.toThrow();
    expect(() => rolloutFromEvidence("nope")).toThrow("evidence record: must be an object");
  });
});

describe("evidence the planner would reject is refused where it is taken (issue 18.3, 19.6)", () => {
  const bad = (mutate: (e: EvidenceRecord) => void) => {
    const e = record();
    mutate(e);
    return () => validateEvidence(e);
  };

  it("applies the planner's float32 and token-range rules, naming the call, the field and the value", () => {
    // -1e39 is finite as a double but -Infinity as the planner's float32
    expect(() =>
      extractGeneration(
        "c0",
        response({ prompt_token_ids: [1], generation_token_ids: [3], generation_log_probs: [-1e39] }),
      ),
    ).toThrow(
      "call c0 (response resp_1): generation_log_probs must be an array of finite numbers in float32 range " +
        "(generation_log_probs[0]: -1e+39 overflows float32)",
    );
    expect(() =>
      extractGeneration(
        "c0",
        response({ prompt_token_ids: [1, 2 ** 31], generation_token_ids: [3], generation_log_probs: [-1] }),
      ),
    ).toThrow(
      "call c0 (response resp_1): prompt_token_ids must be an array of integers in [0, 2^31-1] " +
        "(prompt_token_ids[1] is 2147483648)",
    );
    expect(bad((e) => (e.calls[1].generation_log_probs = [-3.5e38]))).toThrow(
      "evidence calls[1] (b): generation_log_probs must be an array of finite numbers in float32 range " +
        "(generation_log_probs[0]: -3.5e+38 overflows float32)",
    );
    // the largest float32 is still one
    expect(bad((e) => (e.calls[1].generation_log_probs = [-3.4028234663852886e38]))).not.toThrow();
  });

  it("a continuation must start with its parent's exact tokens, and record that many as its prefix", () => {
    expect(bad((e) => (e.calls[1].prompt_token_ids = [1, 9, 3, 4]))).toThrow(
      "evidence calls[1] (b).prompt_token_ids: does not start with parent_call a's 3 tokens " +
        "(first difference at token 1)",
    );
    expect(bad((e) => (e.calls[1].prompt_token_ids = [1, 2]))).toThrow(
      "evidence calls[1] (b).prompt_token_ids: does not start with parent_call a's 3 tokens (it is shorter)",
    );
    expect(bad((e) => (e.calls[1].required_prefix_length = 2))).toThrow(
      "evidence calls[1] (b).required_prefix_length: is 2, but parent_call a holds 3 tokens",
    );
    expect(bad((e) => (e.calls[0].required_prefix_length = 2))).toThrow(
      "evidence calls[0] (a).required_prefix_length: is 2 but the call has no parent_call",
    );
  });

  it("media must come from the media table; boundaries and chunks must name recorded calls", () => {
    expect(bad((e) => (e.calls[1].media = ["sha256:aa"]))).toThrow(
      "evidence calls[1] (b).media[0]: sha256:aa is not in the media table",
    );
    expect(bad((e) => e.boundaries.push({ first_call: "b", previous_call: "zz" } as never))).toThrow(
      "evidence boundaries[0].previous_call: names zz, not a recorded call",
    );
    expect(
      bad((e) =>
        e.chunks.push({ chunk: 0, base_entries: 1, first_call: "a", last_call: "q", actions: 1, closed_by: "full" }),
      ),
    ).toThrow("evidence chunks[0].last_call: names q, not a recorded call");
    expect(
      bad((e) =>
        e.chunks.push({ chunk: 0, base_entries: 1, first_call: null, last_call: null, actions: 0, closed_by: "end" }),
      ),
    ).not.toThrow();
  });
});

describe("malformed evidence from the server is not carried forward", () => {
  const compaction = { policy: recencyPolicy({ images: { keepLastGroups: 2 } }), schedule: turnChunked(3) };

  it("a logprob count mismatch stops the run with a clear error", async () => {
    await withServer({ seed: 2, faults: { 3: "logprob_mismatch" } }, async (_server, model) => {
      await expect(runAgent({ model, environment: createGridWorld(), compaction, maxTurns: 5 })).rejects.toThrow(
        /^call agent-c2 \(response resp_[0-9a-f]+\): (\d+) generation_log_probs for (\d+) generation_token_ids$/,
      );
    });
  });

  it("missing prompt ids stop the run with a clear error", async () => {
    await withServer({ seed: 2, faults: { 1: "missing_prompt_ids" } }, async (_server, model) => {
      const run = runAgent({ model, environment: createGridWorld(), compaction, maxTurns: 5 });
      await expect(run).rejects.toThrow(EvidenceError);
      await expect(runAgent({ model, environment: createGridWorld(), compaction, maxTurns: 5 })).resolves.toBeTruthy();
    });
  });

  it("a server that ignores the required prefix is caught, naming both counts", async () => {
    await withServer({ seed: 2, faults: { 2: "ignore_prefix" } }, async (_server, model) => {
      const error = await runAgent({ model, environment: createGridWorld(), compaction, maxTurns: 5 }).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(PrefixMismatchError);
      const { requiredLength, observedLength, message } = error as PrefixMismatchError;
      expect(requiredLength).toBeGreaterThan(0);
      expect(message).toBe(
        `call agent-c1: observed prompt_token_ids (${observedLength} tokens) does not start with ` +
          `required_prefix_token_ids (${requiredLength} tokens); ${
            /first difference at token \d+|observed prompt is shorter/.exec(message)![0]
          }`,
      );
    });
  });
});
