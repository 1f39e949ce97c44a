// The runtime in a Gym setup (issue 19.1, 19.7): an episode scored through a resources server as
// Gym's agent runs it, and Gym's ContextCompactedResponse out, which `rows --from gym-compaction`
// reads back into the same rows as the runtime's own rollout.
import { describe, expect, it } from "vitest";
import { runAgent, type CompactionOptions } from "../../src/compaction/agent.js";
import { ResourcesServerError } from "../../src/compaction/errors.js";
import { identityPolicy, recencyPolicy } from "../../src/compaction/policies.js";
import { createResourcesServer, jsonObservation, metricsRow } from "../../src/compaction/resources.js";
import { rolling, turnChunked } from "../../src/compaction/schedules.js";
import { gridWorldRunBody } from "../../src/compaction/testbed/index.js";
import { fromGymCompaction } from "../../src/formats/gym-compaction.js";
import type { FetchLike } from "../../src/compaction/http.js";
import type { Rollout } from "../../src/index.js";
import { backends, expectTrainsOnceAlongLineage, withResources, withServer } from "./support.js";

const images = { keepLastGroups: 2, protectInitialContext: true };
const compaction = (): CompactionOptions => ({
  policy: recencyPolicy({ images, reasoning: { keepLastBlocks: 2 } }),
  schedule: turnChunked(2),
  guards: { maxActiveImages: 4 },
});

/** The rows' content, without call ids (Gym names calls by completion id) or media ids (Gym's are `media-…`). */
async function rowsOf(rollout: Rollout) {
  const out = [];
  for (const cf of await backends()) {
    const plan = cf.plan(rollout);
    try {
      expect(plan.report.status, `${cf.backend}: ${plan.report.reason} ${plan.report.detail}`).toBe("ok");
      out.push({
        report: {
          roots: plan.report.roots,
          rows: plan.report.rows,
          captured: plan.report.captured_tokens,
          trained: plan.report.trained_tokens,
        },
        rows: plan.rows.map((r) => ({
          tokens: Array.from(r.tokenIds),
          logprobs: Array.from(r.logprobs),
          mask: Array.from(r.lossMask),
          calls: r.calls.length,
          media: r.media.map((m) => [m.offset, m.length]),
        })),
      });
    } finally {
      plan.release();
    }
  }
  return out;
}

describe("scoring through a resources server, as Gym's agent runs an episode", () => {
  it(
    "seeds first, runs tools there, verifies with the run body and the response, " + "and takes the verifier's reward",
    async () => {
      await withResources(async (resources) => {
        await withServer({ seed: 11 }, async (_server, model) => {
          const runBody = await gridWorldRunBody(
            { size: 3, goal: true, seed: 1 },
            { _ng_task_index: 7, expected: "goal" },
          );
          const server = createResourcesServer({ baseUrl: resources.url });
          const result = await runAgent({
            model,
            resources: { server, runBody, observe: jsonObservation },
            compaction: compaction(),
            maxTurns: 12,
          });
          const paths = resources.requests.map((r) => r.path);
          expect(paths[0]).toBe("/seed_session");
          expect(paths[paths.length - 1]).toBe("/verify");
          expect(paths.slice(1, -1).every((p) => p === "/move" || p === "/look")).toBe(true);
          // every request after the seed carries the session cookie it set
          expect(new Set(resources.requests.map((r) => r.session))).toEqual(new Set([null, "1"]));
          expect(resources.requests.slice(1).every((r) => r.session === "1")).toBe(true);
          const verify = resources.requests[resources.requests.length - 1].body as Record<string, unknown>;
          expect(verify).toMatchObject({
            _ng_task_index: 7,
            expected: "goal",
            responses_create_params: runBody.responses_create_params,
          });
          const sent = verify.response as Record<string, unknown[]>;
          expect(sent.completion_evidence).toHaveLength(result.evidence.calls.length);
          expect(sent.agent_input).toHaveLength(1);
          // the reward is the verifier's; the row is Gym's /run answer: the transport projection
          const reward = result.evidence.stop_reason === "environment_done" ? 1 : 0;
          expect(result.evidence.reward).toBe(reward);
          expect(result.rollout.reward).toBe(reward);
          expect(result.row).toMatchObject({ reward, _ng_task_index: 7 });
          const row = result.row!.response as Record<string, unknown>;
          expect(row.completion_evidence).toBeUndefined();
          expect(row.model_call_metadata).toHaveLength(result.evidence.calls.length);
          expect((row.context_compaction_contract as { schema_version: number }).schema_version).toBe(3);
          await expectTrainsOnceAlongLineage(result.evidence, result.rollout);
          // a batch's metrics come from the same server, from the rows Gym's collector would send
          const metrics = await server.aggregateMetrics([result.row!]);
          expect(metrics).toMatchObject({
            agent_metrics: { "mean/reward": reward },
            group_level_metrics: [{ _ng_task_index: 7, "mean/reward": reward }],
          });
          expect(metricsRow(result.row!)).not.toHaveProperty("responses_create_params");
        });
      });
    },
  );

  it("skip_verification: no /verify, Gym's skip reward and the full internal response in the row", async () => {
    await withResources(async (resources) => {
      await withServer({ seed: 11 }, async (_server, model) => {
        const runBody = await gridWorldRunBody({ seed: 2 });
        const server = createResourcesServer({ baseUrl: resources.url });
        const result = await runAgent({
          model,
          resources: {
            server,
            runBody,
            observe: jsonObservation,
            skipVerification: true,
            skipVerificationReward: 0.25,
          },
          compaction: compaction(),
          maxTurns: 3,
        });
        expect(resources.requests.map((r) => r.path)).not.toContain("/verify");
        expect(result.row).toMatchObject({ reward: 0.25, verification_skipped: true });
        expect((result.row!.response as Record<string, unknown>).completion_evidence).toHaveLength(3);
        expect(result.evidence.reward).toBe(0.25);
      });
    });
  });

  it("retries a lost connection to the resources server like a model call, and names a bad verify answer", async () => {
    await withResources(async (resources) => {
      await withServer({ seed: 11 }, async (_server, model) => {
        const runBody = await gridWorldRunBody({ seed: 2 });
        let drops = 0;
        const flaky: FetchLike = async (url, init) => {
          if (url.endsWith("/move") && drops++ === 0)
            throw new TypeError("fetch failed", { cause: new Error("socket hang up") });
          return fetch(url, init) as never;
        };
        const server = createResourcesServer({ baseUrl: resources.url, fetch: flaky });
        const result = await runAgent({
          model,
          resources: { server, runBody, observe: jsonObservation },
          compaction: compaction(),
          maxTurns: 3,
          retryDelayMs: 0,
        });
        expect(drops).toBeGreaterThan(1);
        expect(result.evidence.calls).toHaveLength(3);
        const noReward: FetchLike = async (url, init) => {
          if (url.endsWith("/verify")) return new Response('{"reward":"high"}', { status: 200 }) as never;
          return fetch(url, init) as never;
        };
        const error = await runAgent({
          model,
          resources: {
            server: createResourcesServer({ baseUrl: resources.url, fetch: noReward }),
            runBody,
            observe: jsonObservation,
          },
          maxTurns: 2,
        }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ResourcesServerError);
        expect((error as Error).message).toBe(
          `POST ${resources.url}/verify: the answer's reward is "high", expected a finite number`,
        );
      });
    });
  });
});

describe("Gym's envelope out", () => {
  it.each([
    ["identity", (): CompactionOptions => ({ policy: identityPolicy(), schedule: rolling() })],
    ["recency, turn-chunked, guarded", compaction],
  ] as const)(
    "%s: the ContextCompactedResponse reads back (bare and as a verified row) into the runtime's own rows",
    async (_name, options) => {
      await withResources(async (resources) => {
        await withServer({ seed: 5 }, async (server, model) => {
          const runBody = await gridWorldRunBody({ seed: 4 });
          const result = await runAgent({
            model,
            resources: { server: createResourcesServer({ baseUrl: resources.url }), runBody, observe: jsonObservation },
            compaction: options(),
            maxTurns: 8,
          });
          const response = result.gymResponse!;
          expect(response).toMatchObject({
            object: "response",
            context_compaction_contract: {
              schema_version: 2,
              mode: "exact_trace_authority",
              rollout_id: result.evidence.rollout_id,
            },
          });
          const evidence = response.completion_evidence as Record<string, unknown>[];
          expect(evidence.map((c) => c.turn_id)).toEqual(result.evidence.calls.map((c) => c.turn + 1));
          expect(evidence.every((c) => (c.completion_id as string).startsWith("completion-"))).toBe(true);
          expect(response.boundary_events).toHaveLength(result.evidence.boundaries.length);
          // Gym's readers: the bare response, and the row /run returns after /verify (transport form)
          const own = await rowsOf(result.rollout);
          const bare = fromGymCompaction(JSON.parse(JSON.stringify(response)), {});
          const row = fromGymCompaction(JSON.parse(JSON.stringify(result.row)), {});
          const withToken = fromGymCompaction(JSON.parse(JSON.stringify(response)), {
            mediaTokens: [server.imagePlaceholderToken],
          });
          for (const read of [bare, row, withToken]) {
            expect(read.rollout.calls.map((c) => c.id)).toEqual(evidence.map((c) => c.completion_id));
            expect(await rowsOf({ ...read.rollout, reward: result.rollout.reward })).toEqual(own);
          }
          expect(row.rollout.reward).toBe(result.evidence.reward);
        });
      });
    },
  );

  it(
    "runAgent returns it without a resources server when asked, " + "and the plain Gym response with compaction off",
    async () => {
      await withServer({ seed: 5 }, async (_server, model) => {
        const { createGridWorld } = await import("../../src/compaction/testbed/index.js");
        const on = await runAgent({
          model,
          environment: createGridWorld({ seed: 4 }),
          compaction: compaction(),
          maxTurns: 3,
          gymResponse: true,
        });
        expect(on.gymResponse?.completion_evidence).toHaveLength(3);
        const off = await runAgent({
          model,
          environment: createGridWorld({ seed: 4 }),
          maxTurns: 3,
          gymResponse: true,
        });
        expect(off.gymResponse).not.toHaveProperty("completion_evidence");
        // the output carries each call's token fields on its last item, as Gym's does
        expect(off.gymResponse!.output.filter((o) => o.generation_token_ids !== undefined)).toHaveLength(3);
        expect(await runAgent({ model, environment: createGridWorld({ seed: 4 }), maxTurns: 1 })).not.toHaveProperty(
          "gymResponse",
        );
      });
    },
  );
});
