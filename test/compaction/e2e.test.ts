// End to end: the grid-world agent against the test-bed servers, scored through the grid world's
// resources server as Gym's agent runs an episode, under every policy, both schedules, with and
// without guards; the evidence becomes a canonical rollout, both core backends plan it, and every
// sampled token is trained exactly once along the recorded lineage.
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { runAgent, type RunAgentResult } from "../../src/compaction/agent.js";
import { canonicalJson } from "../../src/compaction/digest.js";
import { rolloutFromEvidence, validateEvidence } from "../../src/compaction/evidence.js";
import type { GuardConfig } from "../../src/compaction/guards.js";
import { identityPolicy, recencyPolicy, type Policy } from "../../src/compaction/policies.js";
import { rolling, turnChunked, type ScheduleConfig } from "../../src/compaction/schedules.js";
import { createGridWorld } from "../../src/compaction/testbed/index.js";
import { expectTrainsOnceAlongLineage, scoredGridWorld, withServer } from "./support.js";

const KEEP_GROUPS = 2;
const KEEP_BLOCKS = 2;
const images = { keepLastGroups: KEEP_GROUPS, protectInitialContext: true };
const reasoning = { keepLastBlocks: KEEP_BLOCKS, keepFirstBlock: true };
const POLICIES: Record<string, () => Policy> = {
  identity: () => identityPolicy(),
  "image-only recency": () => recencyPolicy({ images }),
  "reasoning-only recency": () => recencyPolicy({ reasoning }),
  "combined recency": () => recencyPolicy({ images, reasoning }),
};
const SCHEDULES: Record<string, () => ScheduleConfig> = {
  rolling: () => rolling(),
  "turnChunked(3)": () => turnChunked(3),
};
// Base of a chunk: the task image + KEEP_GROUPS; a chunk's tail adds up to two more before it is full.
const GUARDS: GuardConfig = {
  maxActiveImages: 4,
  maxVisionTokens: 4 * 25,
  maxTotalTokens: 50_000,
  reserveGenerationTokens: 64,
};
const TURNS = 14;

function checkEvidenceShape(result: RunAgentResult) {
  const e = result.evidence;
  expect(rolloutFromEvidence(validateEvidence(JSON.parse(JSON.stringify(e))))).toEqual(result.rollout);
  expect(e.calls.map((c) => c.turn)).toEqual(e.calls.map((_, i) => i));
  expect(result.response?.id).toBe(e.calls[e.calls.length - 1].response_id);
  const boundaryAt = new Map(e.boundaries.map((b) => [b.first_call, b]));
  e.calls.forEach((call, i) => {
    expect(call.endpoint).toBe("context_compaction");
    const boundary = boundaryAt.get(call.call_id);
    if (i === 0) {
      expect(call).toMatchObject({ segment: 0, parent_call: null, required_prefix_length: 0 });
    } else if (boundary) {
      expect(call).toMatchObject({
        segment: boundary.segment,
        parent_call: null,
        required_prefix_length: 0,
        view_digest: boundary.new_view_digest,
      });
      expect(boundary.previous_call).toBe(e.calls[i - 1].call_id);
      expect(boundary.old_view_digest).toBe(e.calls[i - 1].view_digest);
    } else {
      const previous = e.calls[i - 1];
      expect(call.segment).toBe(previous.segment);
      expect(call.parent_call).toBe(previous.call_id);
      expect(call.required_prefix_length).toBe(previous.prompt_token_ids.length + previous.generation_token_ids.length);
      expect(call.appended_items).toBe(call.view.input_items - previous.view.input_items);
      expect(call.appended_items).toBeGreaterThan(0);
    }
  });
  expect(new Set(e.boundaries.map((b) => b.segment)).size).toBe(e.boundaries.length);
  for (const call of e.calls) {
    // a chunk's tail only appends: it never rewrites, so it never opens a segment
    if (call.decision!.trigger === "chunk_tail") expect(boundaryAt.has(call.call_id)).toBe(false);
    const boundary = boundaryAt.get(call.call_id);
    if (boundary) expect(boundary.trigger).toBe(call.decision!.trigger);
  }
}

function checkGuards(result: RunAgentResult) {
  const e = result.evidence;
  // Gym's completed_action_count: the calls the measured chunk had completed (0 under rolling)
  const records = result.gymResponse!.guard_records as { applies_to_step: number; completed_action_count: number }[];
  for (const g of e.guards) {
    const at = e.calls.findIndex((c) => c.call_id === g.call_id);
    const before = at < 0 ? e.calls : e.calls.slice(0, at);
    const completed = g.chunk === null ? 0 : before.filter((c) => c.decision?.chunk === g.chunk).length;
    expect(g.completed_actions).toBe(completed);
    const step = (at < 0 ? e.calls.length : at) + 1;
    for (const r of records.filter((x) => x.applies_to_step === step)) expect(r.completed_action_count).toBe(completed);
  }
  if (e.compaction.schedule?.type === "turn_chunked")
    expect(records.some((r) => r.completed_action_count > 0)).toBe(true);
  const evaluated = e.guards.map((g) => g.call_id);
  expect(new Set(evaluated).size).toBe(evaluated.length); // one evaluation per call
  expect(evaluated.slice(0, e.calls.length)).toEqual(e.calls.map((c) => c.call_id));
  for (const g of e.guards) {
    const final = g.rounds[g.rounds.length - 1];
    if (g.outcome === "admit") expect(g.rounds).toHaveLength(1);
    if (g.outcome === "admit_after_compaction") {
      expect(g.rounds).toHaveLength(2);
      expect(g.rounds[0].checks.some((c) => !c.ok)).toBe(true);
      expect(e.calls.find((c) => c.call_id === g.call_id)!.decision!.trigger).toBe("guard_recompaction");
    }
    if (g.outcome === "reject") {
      expect(final.checks.some((c) => !c.ok)).toBe(true);
      expect(g).toBe(e.guards[e.guards.length - 1]);
      expect(e.stop_reason).toBe("guard_rejected");
      expect(e.calls.some((c) => c.call_id === g.call_id)).toBe(false);
      continue;
    }
    expect(final.checks.every((c) => c.ok && c.measured <= c.limit)).toBe(true);
    const call = e.calls.find((c) => c.call_id === g.call_id)!;
    expect(final.view_digest).toBe(call.view_digest);
    // the /tokenize preflight counted exactly the prompt the generation then reported
    const total = final.checks.find((c) => c.guard === "total_tokens")!;
    expect(total.measured - GUARDS.reserveGenerationTokens!).toBe(call.prompt_token_ids.length);
    expect(final.checks.find((c) => c.guard === "active_images")!.measured).toBe(call.media.length);
  }
}

describe.each(Object.keys(POLICIES))("%s", (policyName) => {
  describe.each(Object.keys(SCHEDULES))("under %s", (scheduleName) => {
    it.each([false, true])("with guards: %s", async (guarded) => {
      await withServer({ seed: 11 }, async (_server, model) => {
        const policy = POLICIES[policyName]();
        const schedule = SCHEDULES[scheduleName]();
        const result = await scoredGridWorld(
          model,
          { seed: 4 },
          {
            compaction: { policy, schedule, ...(guarded ? { guards: GUARDS } : {}) },
            maxTurns: TURNS,
            maxOutputTokens: 64,
            // Keep a rejected episode (marked partial) to inspect its records; the default fails it.
            onGuardReject: "end_episode",
          },
        );
        const e = result.evidence;
        const paths = result.resourceRequests.map((r) => r.path);
        expect([paths[0], paths[paths.length - 1]]).toEqual(["/seed_session", "/verify"]);
        expect(result.row?.reward).toBe(e.reward);
        checkEvidenceShape(result);
        await expectTrainsOnceAlongLineage(e, result.rollout);

        const imagesOn = policyName !== "identity" && policyName !== "reasoning-only recency";
        const reasoningOn = policyName !== "identity" && policyName !== "image-only recency";
        const tail = schedule.type === "turn_chunked" ? 2 : 0;
        for (const call of e.calls) {
          if (!imagesOn) expect(call.view.omitted.images).toBe(0);
          else expect(call.media.length).toBeLessThanOrEqual(1 + KEEP_GROUPS + tail);
          if (!reasoningOn) expect(call.view.omitted.reasoning).toBe(0);
          else expect(call.view.retained.reasoning).toBeLessThanOrEqual(1 + KEEP_BLOCKS + tail);
        }
        if (policyName === "identity") expect(e.boundaries).toEqual([]);
        else if (!guarded || imagesOn) expect(e.boundaries.length).toBeGreaterThan(0);
        expect(e.compaction).toMatchObject({
          enabled: true,
          policy: { name: policy.name },
          schedule,
          guards: guarded ? GUARDS : null,
        });

        if (!guarded) {
          expect(e.guards).toEqual([]);
          expect(e.calls).toHaveLength(TURNS);
          return;
        }
        checkGuards(result);
        if (imagesOn) {
          expect(e.stop_reason).toBe("max_turns");
          const recompacted = e.guards.filter((g) => g.outcome === "admit_after_compaction");
          if (schedule.type === "turn_chunked") {
            expect(recompacted.length).toBeGreaterThan(0);
            expect(e.chunks.filter((c) => c.closed_by === "guard")).toHaveLength(recompacted.length);
          } else {
            expect(recompacted).toEqual([]);
          }
        } else {
          // nothing drops images here: the image guard trips and, after any recompaction, rejects
          expect(e.stop_reason).toBe("guard_rejected");
          expect(result.partial).toBe(true);
          expect(result.row).toMatchObject({ partial_episode: "guard_rejected" });
          expect(result.gymResponse).toMatchObject({
            status: "incomplete",
            incomplete_details: { reason: "context_guard_rejected" },
          });
          expect(e.guards[e.guards.length - 1].outcome).toBe("reject");
        }
      });
    });
  });
});

describe("retries", () => {
  it("a boundary pending on a failed call is the same boundary when the call is retried, recorded once", async () => {
    const run = (faults: Record<number, "http_500">) =>
      withServer({ seed: 11, faults }, async (server, model) => {
        const result = await scoredGridWorld(
          model,
          { seed: 4 },
          { compaction: { policy: recencyPolicy({ images }), schedule: rolling() }, maxTurns: 8 },
        );
        return { ...result, requests: server.requests };
      });
    const clean = await run({});
    const first = clean.evidence.boundaries[0];
    const turn = clean.evidence.calls.findIndex((c) => c.call_id === first.first_call);
    const retried = await run({ [turn + 1]: "http_500", [turn + 2]: "http_500" });
    expect(retried.evidence.boundaries).toEqual(clean.evidence.boundaries);
    expect(retried.rollout).toEqual(clean.rollout);
    expect(retried.evidence.calls[turn].attempts).toBe(3);
    expect(retried.evidence.attempts.filter((a) => a.call_id === first.first_call).map((a) => a.status)).toEqual([
      "failed",
      "failed",
      "ok",
    ]);
    expect(retried.evidence.attempts.filter((a) => a.status === "failed")[0].error).toMatch(/HTTP 500/);
    // the retries resent the same bytes, and the evidence names the bytes that got the answer
    const sent = retried.requests.filter((r) => r.path === "/v1/responses/context-compaction");
    expect(sent.map((r) => r.status)).toEqual(sent.map((_, i) => (i === turn || i === turn + 1 ? 500 : 200)));
    expect(sent[turn].body).toEqual(sent[turn + 2].body);
    const digests = sent
      .filter((r) => r.status === 200)
      .map((r) => `sha256:${createHash("sha256").update(canonicalJson(r.body)).digest("hex")}`);
    expect(retried.evidence.calls.map((c) => c.request_digest)).toEqual(digests);
    expect(sent.filter((r) => r.status === 200).map((r) => "required_prefix_token_ids" in (r.body as object))).toEqual(
      retried.evidence.calls.map((c) => c.parent_call !== null),
    );
    await expectTrainsOnceAlongLineage(retried.evidence, retried.rollout);
  });

  it("gives up after the configured retries with the server's error", async () => {
    await withServer({ seed: 11, faults: { 2: "http_500", 3: "http_500" } }, async (_server, model) => {
      const compaction = { policy: identityPolicy(), schedule: rolling() };
      await expect(
        runAgent({ model, environment: createGridWorld(), compaction, maxTurns: 4, retries: 1 }),
      ).rejects.toThrow(/HTTP 500: .*injected failure/);
    });
  });
});

describe("the request's header", () => {
  it(
    "tools that change mid-episode open a boundary (header_rewritten): " +
      "the next call is not sent as a continuation",
    async () => {
      await withServer({ seed: 5 }, async (_server, model) => {
        const world = createGridWorld({ seed: 4 });
        let actions = 0;
        const extra = {
          type: "function" as const,
          name: "wait",
          description: "do nothing",
          parameters: { type: "object", properties: {} },
        };
        // The environment offers one more tool once it has taken its first action.
        const environment = {
          ...world,
          start: () => world.start(),
          reward: () => world.reward(),
          get tools() {
            return actions === 0 ? world.tools : [...world.tools, extra];
          },
          call: async (name: string, args: unknown) => {
            actions++;
            return world.call(name, args);
          },
        };
        const result = await runAgent({
          model,
          environment,
          compaction: { policy: identityPolicy(), schedule: rolling() },
          maxTurns: 4,
        });
        const [boundary, ...others] = result.evidence.boundaries;
        expect([boundary.first_call, boundary.reason, others]).toEqual(["agent-c1", "header_rewritten", []]);
        // The items only grew (the tool's answer appended): the header alone broke the continuation.
        expect(boundary.changed_ranges).toEqual([
          {
            old_start: boundary.old_items,
            old_end: boundary.old_items,
            new_start: boundary.old_items,
            new_end: boundary.new_items,
          },
        ]);
        expect(result.evidence.calls.map((c) => c.parent_call)).toEqual([null, null, "agent-c1", "agent-c2"]);
        await expectTrainsOnceAlongLineage(result.evidence, result.rollout);
      });
    },
  );
});
