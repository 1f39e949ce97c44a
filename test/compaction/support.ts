// Shared helpers of the compaction tests: a running test-bed server, both core backends, and the
// checks every end-to-end run must pass.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, expect } from "vitest";
import { encode as encodePng } from "fast-png";
import { createModelClient, type ModelClient } from "../../src/compaction/client.js";
import type { EvidenceRecord } from "../../src/compaction/evidence.js";
import type { InputItem } from "../../src/compaction/responses.js";
import {
  gridWorldRunBody,
  startGridWorldResources,
  startModelServer,
  type GridWorldOptions,
  type ModelServer,
  type ModelServerOptions,
  type ResourcesTestServer,
} from "../../src/compaction/testbed/index.js";
import { runAgent, type RunAgentOptions, type RunAgentResult } from "../../src/compaction/agent.js";
import { createResourcesServer, jsonObservation } from "../../src/compaction/resources.js";
import { init, type Callforest, type Rollout } from "../../src/index.js";

/** A one-message input ("hi"). */
export const input: InputItem[] = [{ type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] }];

/**
 * A maker of plain HTTP servers on 127.0.0.1 with the given handler (their base URLs), all closed
 * after each test; call it at a test file's top level.
 */
export function plainServers(): (handler: Parameters<typeof createServer>[1]) => Promise<string> {
  const servers: Server[] = [];
  afterEach(() => {
    for (const server of servers.splice(0)) {
      server.closeAllConnections();
      server.close();
    }
  });
  return async (handler) => {
    const server = createServer(handler);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  };
}

/** What a promise rejects with, or null when it resolves. */
export const failureOf = (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (error: unknown) => error,
  );

export async function withServer<T>(
  options: ModelServerOptions,
  fn: (server: ModelServer, model: ModelClient) => Promise<T>,
): Promise<T> {
  const server = await startModelServer(options);
  try {
    return await fn(
      server,
      createModelClient({
        baseUrl: server.url,
        model: server.model,
        imagePlaceholderToken: server.imagePlaceholderToken,
      }),
    );
  } finally {
    await server.close();
  }
}

export async function withResources<T>(fn: (resources: ResourcesTestServer) => Promise<T>): Promise<T> {
  const resources = await startGridWorldResources();
  try {
    return await fn(resources);
  } finally {
    await resources.close();
  }
}

/** A grid-world episode scored through the test bed's resources server, as Gym's agent runs one. */
export async function scoredGridWorld(
  model: ModelClient,
  grid: GridWorldOptions,
  options: Omit<RunAgentOptions, "model" | "environment" | "resources">,
): Promise<RunAgentResult & { resourceRequests: ResourcesTestServer["requests"] }> {
  return withResources(async (resources) => {
    const runBody = await gridWorldRunBody(grid);
    const result = await runAgent({
      ...options,
      model,
      resources: { server: createResourcesServer({ baseUrl: resources.url }), runBody, observe: jsonObservation },
    });
    return { ...result, resourceRequests: resources.requests };
  });
}

let cores: Promise<Callforest[]> | null = null;
/** The TypeScript and the (default) WebAssembly backend. */
export function backends(): Promise<Callforest[]> {
  cores ??= Promise.all([init({ backend: "ts" }), init()]);
  return cores;
}

/** A small solid-colour PNG. */
export function png(width: number, height: number, shade: number): Uint8Array {
  const data = new Uint8Array(width * height * 3).fill(shade);
  return encodePng({ width, height, data, channels: 3, depth: 8 });
}

export interface PlannedRun {
  roots: string[];
  parents: Map<string, string | null>;
}

/** Calls where a new context starts: the first call and every recorded rewrite boundary. */
export function expectedRoots(evidence: EvidenceRecord): string[] {
  if (evidence.calls.length === 0) return [];
  return [evidence.calls[0].call_id, ...evidence.boundaries.map((b) => b.first_call)];
}

/**
 * Plans the rollout on both backends and checks SPEC's invariant (every sampled token trained
 * exactly once) and that the forest the core links from token prefixes is the lineage the
 * controller recorded: roots exactly at the boundaries, parents exactly the recorded parents.
 */
export async function expectTrainsOnceAlongLineage(evidence: EvidenceRecord, rollout: Rollout): Promise<PlannedRun> {
  const sampled = evidence.calls.reduce((n, c) => n + c.generation_token_ids.length, 0);
  let result: PlannedRun | null = null;
  for (const cf of await backends()) {
    const plan = cf.plan(rollout);
    try {
      expect(plan.report.status, `${cf.backend}: ${plan.report.reason} ${plan.report.detail}`).toBe("ok");
      expect(plan.report.captured_tokens).toBe(sampled);
      expect(plan.report.trained_tokens).toBe(plan.report.captured_tokens);
      const roots = plan.forest.filter((c) => c.root).map((c) => c.id);
      expect(roots, `${cf.backend} roots`).toEqual(expectedRoots(evidence));
      const parents = new Map(plan.forest.map((c) => [c.id, c.parent]));
      for (const call of evidence.calls)
        expect(parents.get(call.call_id), `${cf.backend} parent of ${call.call_id}`).toBe(call.parent_call);
      result = { roots, parents };
    } finally {
      plan.release();
    }
  }
  return result!;
}
