// The runtime against servers and models that misbehave: cut or stalled answers, odd /tokenize
// answers, transient preflight failures, malformed output items, bad options; and an episode
// that ends in the middle of a response's tool calls.
import { describe, expect, it, vi } from "vitest";
import { runAgent } from "../../src/compaction/agent.js";
import {
  assertBodyKeys,
  compactionBody,
  createModelClient,
  plainBody,
  type ModelClient,
} from "../../src/compaction/client.js";
import { EvidenceError, ModelHttpError } from "../../src/compaction/errors.js";
import { identityPolicy } from "../../src/compaction/policies.js";
import type { ResponsesResponse } from "../../src/compaction/responses.js";
import { rolling } from "../../src/compaction/schedules.js";
import { createGridWorld, startModelServer } from "../../src/compaction/testbed/index.js";
import { failureOf, input, plainServers } from "./support.js";

const serve = plainServers();

describe("model client", () => {
  it("an answer cut off after its headers is a retryable transport failure", async () => {
    const baseUrl = await serve((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json", "content-length": "1000" });
        // Cut once the headers and the first bytes are handed to the socket (no timer: under load
        // a timer could fire before they are written, or long after).
        res.write('{"id":', () => res.destroy());
      });
    });
    const error = await failureOf(
      createModelClient({ baseUrl, model: "m" }).respond({
        endpoint: "responses",
        body: plainBody({ model: "m", input }),
      }),
    );
    expect(error).toBeInstanceOf(ModelHttpError);
    expect(error).toMatchObject({ status: 0, retryable: true });
  });

  it("a refused connection says why (fetch's own message is only 'fetch failed')", async () => {
    // Port 0: nothing can ever listen there, so the kernel refuses every connection to it (a port
    // freed by a closed server could be taken by any other process before the client connects).
    const baseUrl = "http://127.0.0.1:0";
    const error = await failureOf(
      createModelClient({ baseUrl, model: "m" }).respond({
        endpoint: "responses",
        body: plainBody({ model: "m", input }),
      }),
    );
    expect(error).toMatchObject({ status: 0, retryable: true });
    expect((error as Error).message).toMatch(new RegExp(`^POST ${baseUrl}/v1/responses: fetch failed: .*ECONNREFUSED`));
  });

  it("a name with several addresses (localhost: ::1 and 127.0.0.1) says why for each", async () => {
    const refused = (address: string) =>
      Object.assign(new Error(`connect ECONNREFUSED ${address}`), { code: "ECONNREFUSED" });
    // Node's: no message of its own
    const cause = new AggregateError([refused("::1:8000"), refused("127.0.0.1:8000")], "");
    const fetch = async () => Promise.reject(new TypeError("fetch failed", { cause }));
    const error = await failureOf(
      createModelClient({ baseUrl: "http://localhost:8000", model: "m", fetch }).respond({
        endpoint: "responses",
        body: plainBody({ model: "m", input }),
      }),
    );
    expect((error as Error).message).toBe(
      "POST http://localhost:8000/v1/responses: fetch failed: " +
        "connect ECONNREFUSED ::1:8000; connect ECONNREFUSED 127.0.0.1:8000",
    );
  });

  it("a server that never answers times out as a retryable failure", async () => {
    const baseUrl = await serve((req) => req.resume());
    // (Were timeoutMs ignored, this would wait out the 10-minute default and fail on vitest's timeout.)
    const error = await failureOf(
      createModelClient({ baseUrl, model: "m", timeoutMs: 200 }).respond({
        endpoint: "responses",
        body: plainBody({ model: "m", input }),
      }),
    );
    expect(error).toMatchObject({ status: 0, retryable: true });
    // A fetch of one's own that ignores init.signal still gives up at the deadline.
    const deaf = async () => new Promise<never>(() => {});
    const deafError = await failureOf(
      createModelClient({ baseUrl, model: "m", timeoutMs: 100, fetch: deaf }).respond({
        endpoint: "responses",
        body: plainBody({ model: "m", input }),
      }),
    );
    expect(deafError).toMatchObject({ status: 0, retryable: true });
    expect([(error as Error).message, (deafError as Error).message]).toEqual(
      Array(2).fill(`POST ${baseUrl}/v1/responses: The operation was aborted due to timeout`),
    );
    for (const timeoutMs of [0, 1500.5, 2 ** 31, Number.POSITIVE_INFINITY]) {
      expect(() => createModelClient({ baseUrl, model: "m", timeoutMs })).toThrow(
        /timeoutMs must be a whole number of milliseconds from 1 to 2\^31-1/,
      );
    }
  });

  it("a /tokenize answer without a token count is refused, not read as one", async () => {
    for (const answer of [
      "null",
      '{"count":-3}',
      '{"count":1.5}',
      '{"n":4}',
      '{"tokens":[1,-2]}',
      '{"count":3,"max_model_len":9,"tokens":[1,2]}',
    ]) {
      const baseUrl = await serve((req, res) => {
        req.resume();
        req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end(answer));
      });
      const error = await failureOf(createModelClient({ baseUrl, model: "m" }).countTokens({ model: "m", input }));
      expect([answer, error instanceof ModelHttpError, (error as Error).message]).toEqual([
        answer,
        true,
        expect.stringMatching(/expected \{tokens\} or \{count, max_model_len, tokens\}$/),
      ]);
    }
  });

  it("refuses NaN and Infinity anywhere in a body (JSON would send them as null)", () => {
    for (const value of [Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => assertBodyKeys("responses", { ...plainBody({ model: "m", input }), temperature: value })).toThrow(
        `key "temperature" is ${value} in a /v1/responses body`,
      );
    }
    const tools = [
      {
        type: "function",
        name: "f",
        parameters: { type: "object", properties: { n: { type: "number", maximum: Infinity } } },
      },
    ];
    expect(() => assertBodyKeys("responses", { ...plainBody({ model: "m", input }), tools })).toThrow(
      'key "tools" holds Infinity in a /v1/responses body',
    );
  });

  it("checks a body with a long required prefix (300k tokens) without overflowing the stack", () => {
    const prefix = Array.from({ length: 300_000 }, (_, i) => i % 151_000);
    expect(() => assertBodyKeys("context_compaction", compactionBody({ model: "m", input }, prefix))).not.toThrow();
    prefix[299_999] = Number.NaN;
    expect(() => assertBodyKeys("context_compaction", compactionBody({ model: "m", input }, prefix))).toThrow(
      /required_prefix_token_ids" holds NaN/,
    );
  });
});

/**
 * A scripted model: `outputs[n]` is the n-th response's output items (the last carries tokens);
 * `id(n)` names the n-th response (from 1).
 */
function scripted(outputs: ResponsesResponse["output"][], id = (n: number) => `r${n}`): ModelClient {
  let n = 0;
  return {
    model: "fake",
    async respond() {
      const output = outputs[Math.min(n, outputs.length - 1)].map((item) =>
        item && typeof item === "object" ? { ...item } : item,
      );
      n++;
      Object.assign(output[output.length - 1], {
        prompt_token_ids: [1, 2, n],
        generation_token_ids: [5, 6],
        generation_log_probs: [-1, -1],
      });
      return { id: id(n), object: "response", model: "fake", status: "completed", output } as ResponsesResponse;
    },
    async countTokens() {
      return 0;
    },
  };
}

const move = (direction: string, k: number) =>
  ({
    type: "function_call",
    id: `fc${k}`,
    call_id: `call${k}`,
    name: "move",
    arguments: JSON.stringify({ direction }),
  }) as ResponsesResponse["output"][number];

describe("runAgent", () => {
  it("stops at the observation that ends the episode: the response's later calls are not run", async () => {
    const environment = createGridWorld({ size: 2, goal: true });
    const result = await runAgent({
      model: scripted([[move("south", 1)], [move("east", 2), move("west", 3)]]),
      environment,
      maxTurns: 5,
    });
    expect(result.stopReason).toBe("environment_done");
    expect(result.evidence.reward).toBe(1);
    const outputs = result.history.entries().filter((e) => e.kind === "function_output");
    expect(outputs.map((e) => (e as { output: string }).output.split(" ")[0])).toEqual(["Moved", "Moved"]);
  });

  it("names the call and the field of a malformed output item, before anything enters the history", async () => {
    const cases: [ResponsesResponse["output"][number], RegExp][] = [
      [
        { type: "function_call", id: "fc", call_id: "c1" } as never,
        /output\[0\] \(function_call\)\.name is undefined, expected a string$/,
      ],
      [null as never, /output\[0\] is null, expected an object$/],
      [
        { type: "message", id: "m", content: "text" } as never,
        /output\[0\]\.content must be an array of parts with a string text$/,
      ],
    ];
    for (const [item, message] of cases) {
      const error = await failureOf(
        runAgent({
          model: scripted([[item, move("south", 1)]]),
          environment: createGridWorld({ size: 2 }),
          maxTurns: 2,
        }),
      );
      expect(error).toBeInstanceOf(EvidenceError);
      expect((error as Error).message).toMatch(/^call agent-c0 \(response r1\): /);
      expect((error as Error).message).toMatch(message);
    }
  });

  it("refuses an empty agent or rolloutId before sending anything", async () => {
    for (const [option, value] of [
      ["agent", ""],
      ["rolloutId", ""],
      ["agent", 5],
    ] as const) {
      let sent = 0;
      const model = { ...scripted([[move("south", 1)]]), respond: async () => (sent++, {} as ResponsesResponse) };
      await expect(
        runAgent({ model, environment: createGridWorld(), maxTurns: 2, [option]: value } as never),
      ).rejects.toThrow(`runAgent: ${option} must be a non-empty string (got ${JSON.stringify(value)})`);
      expect(sent).toBe(0);
    }
  });

  it(
    "an answer cut off with no action in it ends the episode as output_truncated, " + "not as a final message",
    async () => {
      const reasoning = {
        type: "reasoning",
        id: "rs1",
        summary: [],
        content: [{ type: "reasoning_text", text: "thinking..." }],
      } as unknown as ResponsesResponse["output"][number];
      const model = scripted([[reasoning]]);
      const truncated = {
        ...model,
        respond: async (call: Parameters<ModelClient["respond"]>[0]) =>
          ({ ...(await model.respond(call)), status: "incomplete" }) as ResponsesResponse,
      };
      expect((await runAgent({ model: truncated, environment: createGridWorld(), maxTurns: 3 })).stopReason).toBe(
        "output_truncated",
      );
      expect(
        (await runAgent({ model: scripted([[reasoning]]), environment: createGridWorld(), maxTurns: 3 })).stopReason,
      ).toBe("final_message");
    },
  );

  it("a response without an id is refused (the evidence names every response)", async () => {
    const model = scripted([[move("south", 1)]]);
    const withoutId = {
      ...model,
      respond: async (call: Parameters<ModelClient["respond"]>[0]) => ({
        ...(await model.respond(call)),
        id: undefined as unknown as string,
      }),
    };
    await expect(runAgent({ model: withoutId, environment: createGridWorld(), maxTurns: 1 })).rejects.toThrow(
      /response has no id/,
    );
  });

  it("runs that made no call get different default rollout ids", async () => {
    const environment = () => ({ ...createGridWorld(), tools: createGridWorld().tools });
    const rejectAll = { policy: identityPolicy(), schedule: rolling(), guards: { maxActiveImages: 0 } };
    const ids = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const result = await runAgent({
        model: scripted([[move("south", 1)]]),
        environment: environment(),
        compaction: rejectAll,
        maxTurns: 1,
        onGuardReject: "end_episode",
      });
      expect(result.evidence.calls).toEqual([]);
      ids.add(result.evidence.rollout_id);
    }
    expect(ids.size).toBe(3);
  });

  it("derives the default rollout id from every response id, not only the first", async () => {
    const idOf = async (id?: (n: number) => string) =>
      (await runAgent({ model: scripted([[move("south", 1)]], id), environment: createGridWorld(), maxTurns: 3 }))
        .evidence.rollout_id;
    const same = await idOf();
    expect(await idOf()).toBe(same); // the same run gives the same id
    // the same first response, different later ones: a different rollout
    expect(await idOf((n) => (n === 1 ? "r1" : `other${n}`))).not.toBe(same);
  });

  it("caps the doubling retry delay at 5 s", async () => {
    // Five transient failures, then an answer; the waits are recorded, not slept through.
    const model = scripted([[move("south", 1)]]);
    let failures = 0;
    const flaky: ModelClient = {
      ...model,
      respond: async (call) => {
        if (failures++ < 5) throw new ModelHttpError("HTTP 503: busy", 503, true);
        return model.respond(call);
      },
    };
    const delays: (number | undefined)[] = [];
    const sleep = vi.spyOn(globalThis, "setTimeout").mockImplementation(((resolve: () => void, ms?: number) => {
      delays.push(ms);
      resolve();
      return 0;
    }) as unknown as typeof setTimeout);
    try {
      const result = await runAgent({
        model: flaky,
        environment: createGridWorld(),
        maxTurns: 1,
        retries: 5,
        retryDelayMs: 4000,
      });
      expect(result.evidence.calls[0].attempts).toBe(6);
    } finally {
      sleep.mockRestore();
    }
    expect(delays).toEqual([4000, 5000, 5000, 5000, 5000]);
  });

  it("refuses retries that are not a non-negative integer (NaN retried forever)", async () => {
    for (const retries of [Number.NaN, -1, 1.5]) {
      await expect(
        runAgent({ model: scripted([[move("south", 1)]]), environment: createGridWorld(), maxTurns: 1, retries }),
      ).rejects.toThrow(`runAgent: retries must be a non-negative integer (got ${retries})`);
    }
  });

  it("retries a transient failure of the /tokenize guard preflight like a model call", async () => {
    const server = await startModelServer({ seed: 11 });
    try {
      let tokenizeCalls = 0;
      const flaky: typeof fetch = async (url, init) => {
        if (String(url).endsWith("/tokenize") && ++tokenizeCalls === 3)
          return new Response('{"error":"busy"}', { status: 503 });
        return fetch(url, init);
      };
      const model = createModelClient({ baseUrl: server.url, model: server.model, fetch: flaky });
      const compaction = { policy: identityPolicy(), schedule: rolling(), guards: { maxTotalTokens: 50_000 } };
      const result = await runAgent({
        model,
        environment: createGridWorld({ seed: 4 }),
        compaction,
        maxTurns: 4,
        retryDelayMs: 0,
      });
      expect(tokenizeCalls).toBeGreaterThan(3);
      expect(result.evidence.calls.length).toBeGreaterThan(2);
    } finally {
      await server.close();
    }
  });
});
