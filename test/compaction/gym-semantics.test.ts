// Gym's agent semantics the runtime follows (simple_agent_with_compaction, Gym PR #2616): a chunk
// counts model calls, a cut-off response ends the episode, model-server cookies travel within an
// episode and to its /verify, concurrent episodes share nothing, identity comes from the run body,
// and aggregate_metrics is empty when verification is skipped. All against the test bed's strict
// servers.
import { describe, expect, it } from "vitest";
import { runAgent, type RunAgentOptions } from "../../src/compaction/agent.js";
import { createModelClient } from "../../src/compaction/client.js";
import { CompactionError } from "../../src/compaction/errors.js";
import { recencyPolicy } from "../../src/compaction/policies.js";
import { createResourcesServer, jsonObservation } from "../../src/compaction/resources.js";
import { turnChunked } from "../../src/compaction/schedules.js";
import {
  gridWorldRunBody,
  startGridWorldResources,
  startModelServer,
  type ModelServerOptions,
} from "../../src/compaction/testbed/index.js";
import { expectTrainsOnceAlongLineage, failureOf, withResources, withServer } from "./support.js";

const compaction = {
  policy: recencyPolicy({ images: { keepLastGroups: 1 }, reasoning: { keepLastBlocks: 1 } }),
  schedule: turnChunked(2),
};

type Chunk = {
  configured_actions_per_chunk: number;
  actual_action_count: number;
  eligible_action_ids: string[];
  early_close_reason: string | null;
};

describe("Gym's agent semantics", () => {
  it("a chunk counts model calls: a response with two function calls is one action", async () => {
    await withServer({ seed: 3, parallelCalls: 2 }, async (server, model) => {
      await withResources(async (resources) => {
        const result = await runAgent({
          model,
          resources: {
            server: createResourcesServer({ baseUrl: resources.url }),
            runBody: await gridWorldRunBody({ seed: 2 }),
            observe: jsonObservation,
          },
          compaction,
          maxTurns: 5,
        });
        const e = result.evidence;
        expect(e.calls).toHaveLength(5);
        // every response ran both of its function calls
        const toolPosts = resources.requests.filter((r) => r.path === "/move" || r.path === "/look");
        expect(toolPosts).toHaveLength(10);
        expect(e.chunks.map((c) => c.actions)).toEqual([2, 2, 1]);
        const chunks = result.gymResponse!.chunk_records as Chunk[];
        expect(chunks.map((c) => c.actual_action_count)).toEqual([2, 2, 1]);
        for (const c of chunks) {
          expect(c.configured_actions_per_chunk).toBe(2);
          expect(c.eligible_action_ids).toHaveLength(c.actual_action_count);
          // a chunk short of its size says why it closed
          expect(c.early_close_reason === null).toBe(c.actual_action_count === 2);
        }
        expect(chunks[2].early_close_reason).toBe("terminal");
        expect(server.requests.every((r) => r.status === 200)).toBe(true);
        await expectTrainsOnceAlongLineage(e, result.rollout);
      });
    });
  });

  it("a cut-off response ends the episode before its function calls run", async () => {
    await withServer({ seed: 3, faults: { 2: "incomplete" } }, async (_server, model) => {
      await withResources(async (resources) => {
        const result = await runAgent({
          model,
          resources: {
            server: createResourcesServer({ baseUrl: resources.url }),
            runBody: await gridWorldRunBody({ seed: 2 }),
            observe: jsonObservation,
          },
          compaction,
          maxTurns: 5,
        });
        expect(result.stopReason).toBe("output_truncated");
        expect(result.evidence.calls).toHaveLength(2);
        // the first response's call ran; the cut-off second one's did not
        expect(resources.requests.map((r) => r.path)).toEqual(["/seed_session", "/move", "/verify"]);
        expect(result.gymResponse).toMatchObject({
          status: "incomplete",
          incomplete_details: { reason: "max_output_tokens" },
        });
      });
    });
  });

  it("carries the model server's cookies between the calls of an episode, never across episodes", async () => {
    const options: ModelServerOptions = { seed: 5, sessionCookie: true };
    const server = await startModelServer(options);
    const resources = await startGridWorldResources();
    try {
      const model = createModelClient({ baseUrl: server.url, model: server.model });
      const guards = { maxTotalTokens: 100_000 }; // the /tokenize preflight carries the cookie too
      const run = async (seed: number) =>
        runAgent({
          model,
          resources: {
            server: createResourcesServer({ baseUrl: resources.url }),
            runBody: await gridWorldRunBody({ seed }),
            observe: jsonObservation,
          },
          compaction: { ...compaction, guards },
          maxTurns: 4,
        });
      const [a, b] = await Promise.all([run(1), run(2)]);
      expect(a.evidence.calls).toHaveLength(4);
      expect(b.evidence.calls).toHaveLength(4);
      expect(server.requests.every((r) => r.status === 200)).toBe(true);
      // one session per episode: only each episode's first request came without its cookie
      const withoutCookie = server.requests.filter((r) => r.cookie === undefined);
      expect(withoutCookie).toHaveLength(2);
      const cookies = new Set(server.requests.flatMap((r) => (r.cookie ? [r.cookie] : [])));
      expect([...cookies].sort()).toEqual(["testbed_session=s1", "testbed_session=s2"]);
      expect(server.requests.filter((r) => r.path === "/tokenize").every((r, i) => i < 2 || r.cookie)).toBe(true);
    } finally {
      await server.close();
      await resources.close();
    }
  });

  it("sends /verify the model server's cookies with the seed's; tools get only the seed's", async () => {
    await withServer({ seed: 5, sessionCookie: true }, async (server, model) => {
      await withResources(async (resources) => {
        await runAgent({
          model,
          resources: {
            server: createResourcesServer({ baseUrl: resources.url }),
            runBody: await gridWorldRunBody({ seed: 1 }),
            observe: jsonObservation,
          },
          compaction,
          maxTurns: 3,
        });
        expect(server.requests.at(-1)?.cookie).toBe("testbed_session=s1");
        const paths = resources.requests.map((r) => r.path);
        expect(paths[0]).toBe("/seed_session");
        expect(paths.at(-1)).toBe("/verify");
        const tools = resources.requests.slice(1, -1);
        expect(tools.length).toBeGreaterThan(0);
        for (const r of tools) expect(r.cookie).toBe("grid_session=1");
        // Gym's /run sends /verify the jar its /v1/responses answer set: resources', then model's.
        expect(resources.requests.at(-1)).toMatchObject({
          status: 200,
          cookie: "grid_session=1; testbed_session=s1",
        });
      });
    });
  });

  it("a model server's cookie wins a name the resources server's shares at /verify", async () => {
    const sent: (string | undefined)[] = [];
    const fetch = async (_url: string, init: { headers: Record<string, string> }) => {
      sent.push(init.headers.cookie);
      return new Response(JSON.stringify({ reward: 1 }), {
        headers: { "content-type": "application/json", "set-cookie": "shared=resources; Path=/" },
      });
    };
    const session = createResourcesServer({ baseUrl: "http://resources.invalid", fetch }).session();
    await session.seed(await gridWorldRunBody({ seed: 1 }));
    const model = new Map([
      ["shared", "model"],
      ["m", "1"],
    ]);
    expect((await session.verify({}, model)).reward).toBe(1);
    expect(sent).toEqual([undefined, "shared=model; m=1"]);
  });

  it("two concurrent rollouts of one agent share no state: each is what it is alone", async () => {
    await withServer({ seed: 9 }, async (_server, model) => {
      await withResources(async (resources) => {
        const options = async (seed: number, task: number): Promise<RunAgentOptions> => ({
          model,
          resources: {
            server: createResourcesServer({ baseUrl: resources.url }),
            runBody: await gridWorldRunBody({ seed }, { _ng_task_index: task, _ng_rollout_index: 0 }),
            observe: jsonObservation,
          },
          compaction,
          maxTurns: 6,
        });
        const alone = [await runAgent(await options(1, 0)), await runAgent(await options(2, 1))];
        const together = await Promise.all([runAgent(await options(1, 0)), runAgent(await options(2, 1))]);
        for (const k of [0, 1]) {
          expect(together[k].evidence).toEqual(alone[k].evidence);
          expect(together[k].row).toEqual(alone[k].row);
        }
        expect(together[0].evidence.rollout_id).toBe("0-0");
        expect(together[1].evidence.rollout_id).toBe("1-0");
      });
    });
  });
});

describe("contract identity", () => {
  const scored = async (extra: Record<string, unknown>, skipVerification = false) =>
    withServer({ seed: 4 }, async (_server, model) =>
      withResources(async (resources) =>
        runAgent({
          model,
          resources: {
            server: createResourcesServer({ baseUrl: resources.url }),
            runBody: await gridWorldRunBody({ seed: 1 }, extra),
            observe: jsonObservation,
            skipVerification,
          },
          compaction,
          maxTurns: 2,
        }),
      ),
    );

  it("derives the rollout id as Gym does: <task>-<rollout>, -a<attempt> past the first attempt", async () => {
    const first = await scored({ _ng_task_index: 7, _ng_rollout_index: 2, _ng_attempt_index: 0 });
    expect(first.evidence.rollout_id).toBe("7-2");
    expect((first.gymResponse!.context_compaction_contract as { rollout_id: string }).rollout_id).toBe("7-2");
    expect((first.gymResponse!.completion_evidence as { rollout_id: string }[])[0].rollout_id).toBe("7-2");
    const retry = await scored({ _ng_task_index: 7, _ng_rollout_index: 2, _ng_attempt_index: 1 });
    expect(retry.evidence.rollout_id).toBe("7-2-a1");
  });

  it("context_compaction_* fields name the rollout and fill the contract /run returns", async () => {
    const identity = {
      _ng_task_index: 7,
      _ng_rollout_index: 0,
      context_compaction_rollout_id: "rollout-7-0",
      context_compaction_group_id: "group-7",
      context_compaction_task_id: "task-7",
      context_compaction_rollout_index: 0,
      context_compaction_attempt_index: 0,
    };
    const contract = {
      rollout_id: "rollout-7-0",
      group_id: "group-7",
      task_id: "task-7",
      rollout_index: 0,
      attempt_index: 0,
    };
    for (const skip of [false, true]) {
      const result = await scored(identity, skip);
      expect(result.evidence.rollout_id).toBe("rollout-7-0");
      const row = result.row as { response: { context_compaction_contract: Record<string, unknown> } };
      expect(row.response.context_compaction_contract).toMatchObject({
        ...contract,
        schema_version: skip ? 2 : 3,
      });
    }
  });

  it("refuses identity fields Gym's run request would reject, before any request", async () => {
    for (const [extra, message] of [
      [{ context_compaction_rollout_index: -1 }, /context_compaction_rollout_index must be a non-negative integer/],
      [{ context_compaction_attempt_index: 1.5 }, /context_compaction_attempt_index must be a non-negative integer/],
      [{ context_compaction_group_id: 3 }, /context_compaction_group_id must be a string/],
      [{ context_compaction_rollout_id: "" }, /context_compaction_rollout_id must not be empty/],
    ] as const) {
      await withServer({ seed: 4 }, async (server, model) =>
        withResources(async (resources) => {
          const error = await failureOf(
            runAgent({
              model,
              resources: {
                server: createResourcesServer({ baseUrl: resources.url }),
                runBody: await gridWorldRunBody({ seed: 1 }, extra),
              },
              compaction,
              maxTurns: 2,
            }),
          );
          expect(error).toBeInstanceOf(CompactionError);
          expect((error as Error).message).toMatch(message);
          expect(server.requests).toEqual([]);
          expect(resources.requests).toEqual([]);
        }),
      );
    }
  });
});

describe("aggregate_metrics", () => {
  it("is Gym's empty AggregateMetrics when verification was skipped, without asking the server", async () => {
    await withResources(async (resources) => {
      const server = createResourcesServer({ baseUrl: resources.url });
      const rows = [{ _ng_task_index: 0, reward: 0.25, verification_skipped: true }];
      expect(await server.aggregateMetrics(rows)).toEqual({
        group_level_metrics: [],
        agent_metrics: {},
        key_metrics: {},
      });
      expect(resources.requests).toEqual([]);
      // verified rows still go to the resources server
      const verified = await server.aggregateMetrics([{ _ng_task_index: 0, reward: 1 }]);
      expect(verified.key_metrics).toEqual({ "mean/reward": 1 });
    });
  });
});
