// The built rollout's `media`: each image the request showed, at its placeholder run in the prompt
// the server reported — one image or several, after compaction dropped some, in fresh contexts —
// and `[]` when the runtime cannot say (no placeholder token) or the call showed none.
import { describe, expect, it } from "vitest";
import { runAgent, type RunAgentResult } from "../../src/compaction/agent.js";
import { createModelClient } from "../../src/compaction/client.js";
import type { Environment } from "../../src/compaction/environment.js";
import { CompactionError, EvidenceError } from "../../src/compaction/errors.js";
import {
  EVIDENCE_SCHEMA_VERSION,
  rolloutFromEvidence,
  type CallEvidence,
  type EvidenceRecord,
} from "../../src/compaction/evidence.js";
import { identityPolicy, recencyPolicy } from "../../src/compaction/policies.js";
import { rolling } from "../../src/compaction/schedules.js";
import { createGridWorld, SPECIAL } from "../../src/compaction/testbed/index.js";
import type { MediaItem } from "../../src/types.js";
import { png, withServer } from "./support.js";

const B = SPECIAL.imageBegin;
const P = SPECIAL.imagePad;
const E = SPECIAL.imageEnd;

/** An evidence record of one call with this prompt and these media ids. */
function evidenceOf(prompt: number[], media: string[], token: number | null): EvidenceRecord {
  const call = {
    call_id: "a",
    turn: 0,
    agent: "agent",
    endpoint: "context_compaction",
    response_id: "r",
    attempts: 1,
    segment: 0,
    parent_call: null,
    required_prefix_length: 0,
    view_digest: "sha256:0",
    request_digest: "sha256:1",
    decision: null,
    view: {
      input_items: 1,
      retained: { images: media.length, imageGroups: 1, reasoning: 0 },
      omitted: { images: 0, imageGroups: 0, reasoning: 0 },
    },
    media,
    appended_items: 0,
    prompt_token_ids: prompt,
    generation_token_ids: [3],
    generation_log_probs: [-0.5],
  } satisfies CallEvidence;
  return {
    schema_version: EVIDENCE_SCHEMA_VERSION,
    rollout_id: "r1",
    reward: 1,
    agent: "agent",
    stop_reason: "max_turns",
    compaction: { enabled: true, policy: null, schedule: null, guards: null },
    calls: [call],
    attempts: [],
    boundaries: [],
    chunks: [],
    guards: [],
    // (validateEvidence holds every call's media to the table)
    media: [...new Set(call.media)].map((id) => ({ id, mime: "image/png", width: 16, height: 16, byteLength: 1 })),
    image_placeholder_token: token,
  };
}

const mediaOf = (e: EvidenceRecord) => rolloutFromEvidence(e).calls[0].media;

/**
 * Every span of every call covers exactly one run of image pads (imageBegin before it, imageEnd
 * after it: the markers stay outside), the ids are the images the request showed, in order, and
 * no pad is left outside a span.
 */
function expectSpansAtPlaceholderRuns(result: RunAgentResult) {
  result.evidence.calls.forEach((call, i) => {
    const prompt = call.prompt_token_ids;
    const media = result.rollout.calls[i].media as MediaItem[];
    expect(
      media.map((m) => m.id),
      call.call_id,
    ).toEqual(call.media);
    for (const { offset, length } of media) {
      expect([prompt[offset - 1], prompt[offset + length]], `${call.call_id} markers`).toEqual([B, E]);
      expect(
        prompt.slice(offset, offset + length).every((t) => t === P),
        `${call.call_id} pads`,
      ).toBe(true);
    }
    expect(media.reduce((n, m) => n + m.length, 0)).toBe(prompt.filter((t) => t === P).length);
  });
}

describe("media spans from evidence", () => {
  it("the k-th placeholder run is the k-th image shown; the begin and end markers stay outside", () => {
    const prompt = [1, B, P, P, E, 2, B, P, E, 3];
    expect(mediaOf(evidenceOf(prompt, ["sha256:x", "sha256:y"], P))).toEqual([
      { id: "sha256:x", offset: 2, length: 2 },
      { id: "sha256:y", offset: 7, length: 1 },
    ]);
    // the same image twice: equal content, equal id, two occurrences
    expect(mediaOf(evidenceOf([B, P, E, B, P, E], ["sha256:x", "sha256:x"], P))).toEqual([
      { id: "sha256:x", offset: 1, length: 1 },
      { id: "sha256:x", offset: 4, length: 1 },
    ]);
    expect(mediaOf(evidenceOf([1, 2], [], P))).toEqual([]);
  });

  it("gives no media when the evidence names no placeholder token (tokens-only linking, as before)", () => {
    expect(mediaOf(evidenceOf([1, B, P, E], ["sha256:x"], null))).toEqual([]);
    const old = evidenceOf([1, B, P, E], ["sha256:x"], null) as Partial<EvidenceRecord>;
    delete old.image_placeholder_token; // a record written before the field
    expect(rolloutFromEvidence(old).calls[0].media).toEqual([]);
  });

  it("refuses a prompt whose placeholder runs and images shown differ in number", () => {
    expect(() => mediaOf(evidenceOf([1, B, P, E, 2], ["sha256:x", "sha256:y"], P))).toThrow(
      new EvidenceError(
        "evidence calls[0] (a): prompt_token_ids holds 1 run(s) of the image placeholder token 200031 " +
          "for 2 image(s) shown",
      ),
    );
    expect(() => mediaOf(evidenceOf([P, 1, P], ["sha256:x"], P))).toThrow(/holds 2 run\(s\) .* for 1 image\(s\) shown/);
  });
});

/** The grid world, with a second image (a minimap) in every observation after the first. */
function twoImagesPerStep(): Environment {
  const world = createGridWorld({ seed: 4 });
  const minimap = { bytes: png(16, 16, 90), mime: "image/png" as const };
  return {
    ...world,
    tools: world.tools,
    start: () => world.start(),
    reward: () => world.reward(),
    call: async (name, args) => {
      const obs = await world.call(name, args);
      return obs.images ? { ...obs, images: [...obs.images, minimap] } : obs;
    },
  };
}

describe("media spans of the runtime's rollouts", () => {
  it("one image: the task's screenshot at its pad run in the first call", async () => {
    const result = await withServer({ seed: 11 }, (_server, model) =>
      runAgent({ model, environment: createGridWorld({ seed: 4 }), maxTurns: 1 }),
    );
    expect(result.evidence.image_placeholder_token).toBe(P);
    const [media] = result.rollout.calls.map((c) => c.media as MediaItem[]);
    expect(media).toEqual([{ id: result.evidence.media[0].id, offset: expect.any(Number), length: 25 }]);
    expectSpansAtPlaceholderRuns(result);
  });

  it("several images, two in one message: one span each, in prompt order", async () => {
    const compaction = { policy: identityPolicy(), schedule: rolling() };
    const result = await withServer({ seed: 11 }, (_server, model) =>
      runAgent({ model, environment: twoImagesPerStep(), compaction, maxTurns: 4 }),
    );
    const counts = result.rollout.calls.map((c) => c.media!.length);
    expect(counts).toEqual([1, 3, 5, 7]);
    expectSpansAtPlaceholderRuns(result);
    // a continued call repeats its parent's spans, then adds its own
    const [, second, third] = result.rollout.calls;
    expect(third.media!.slice(0, 3)).toEqual(second.media);
  });

  it("images dropped by compaction leave the spans, and fresh contexts are located anew", async () => {
    const compaction = {
      policy: recencyPolicy({ images: { keepLastGroups: 1, protectInitialContext: false } }),
      schedule: rolling(),
    };
    const result = await withServer({ seed: 11 }, (_server, model) =>
      runAgent({ model, environment: createGridWorld({ seed: 4 }), compaction, maxTurns: 6 }),
    );
    const e = result.evidence;
    expectSpansAtPlaceholderRuns(result);
    const fresh = e.calls.filter((c, i) => i > 0 && c.required_prefix_length === 0);
    expect(fresh.length).toBeGreaterThan(0);
    for (const call of fresh) {
      expect(call.view.omitted.images).toBeGreaterThan(0);
      const media = result.rollout.calls.find((c) => c.id === call.call_id)!.media!;
      // only the newest group is shown: an earlier call's images are gone from the spans
      expect(media.map((m) => m.id)).toEqual(call.media);
      expect(media).toHaveLength(1);
    }
  });

  it("gives every call `media: []` when the model client names no placeholder token", async () => {
    const result = await withServer({ seed: 11 }, (server) =>
      runAgent({
        model: createModelClient({ baseUrl: server.url, model: server.model }),
        environment: createGridWorld({ seed: 4 }),
        maxTurns: 3,
      }),
    );
    expect(result.evidence.image_placeholder_token).toBeNull();
    expect(result.evidence.calls.every((c) => c.media.length > 0)).toBe(true);
    expect(result.rollout.calls.map((c) => c.media)).toEqual([[], [], []]);
  });

  it("stops at the call whose prompt does not hold the placeholder runs of the images it showed", async () => {
    const run = withServer({ seed: 11 }, (server) =>
      runAgent({
        model: createModelClient({ baseUrl: server.url, model: server.model, imagePlaceholderToken: 7 }),
        environment: createGridWorld({ seed: 4 }),
        maxTurns: 3,
      }),
    );
    await expect(run).rejects.toThrow(
      new EvidenceError(
        "call agent-c0: prompt_token_ids holds 0 run(s) of the image placeholder token 7 for 1 image(s) shown",
      ),
    );
  });

  it(
    "refuses a placeholder token that is not a token id, " + "from createModelClient or a client of one's own",
    async () => {
      expect(() => createModelClient({ baseUrl: "http://127.0.0.1:9", model: "m", imagePlaceholderToken: -1 })).toThrow(
        new CompactionError(
          "model client: imagePlaceholderToken must be a token id (an integer in [0, 2^31-1]), got -1",
        ),
      );
      const model = {
        model: "m",
        imagePlaceholderToken: 1.5,
        respond: async () => Promise.reject(new Error("sent")),
        countTokens: async () => 0,
      };
      await expect(runAgent({ model, environment: createGridWorld(), maxTurns: 1 })).rejects.toThrow(
        "runAgent: the model client's imagePlaceholderToken must be a token id (an integer in [0, 2^31-1]), got 1.5",
      );
    },
  );
});
