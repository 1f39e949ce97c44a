// Issue 18 in the runtime: a failed episode keeps what it recorded (18.4); answers are bounded in
// size, a too-large one is not retried, redirects are refused unless asked (18.5). And issue 19.4:
// the evidence says what generated its tokens, and what the server did not report.
import { describe, expect, it } from "vitest";
import { runAgent } from "../../src/compaction/agent.js";
import { createModelClient, plainBody, type ModelClient } from "../../src/compaction/client.js";
import { EvidenceError, ModelHttpError, ResponseTooLargeError } from "../../src/compaction/errors.js";
import { partialRunOf } from "../../src/compaction/partial.js";
import { identityPolicy, recencyPolicy } from "../../src/compaction/policies.js";
import type { ResponsesResponse } from "../../src/compaction/responses.js";
import { rolling } from "../../src/compaction/schedules.js";
import { createGridWorld } from "../../src/compaction/testbed/index.js";
import { failureOf, input, plainServers, withServer } from "./support.js";

const serve = plainServers();
const respond = (model: ModelClient) =>
  model.respond({ endpoint: "responses", body: plainBody({ model: "m", input }) });

describe("a failed episode keeps its partial evidence (18.4)", () => {
  it("an error at call 5 carries the four good calls' evidence and rollout, marked incomplete", async () => {
    await withServer({ seed: 2, faults: { 5: "logprob_mismatch" } }, async (_server, model) => {
      const compaction = { policy: recencyPolicy({ images: { keepLastGroups: 2 } }), schedule: rolling() };
      const error = await failureOf(
        runAgent({ model, environment: createGridWorld(), compaction, maxTurns: 8, rolloutId: "r-fail" }),
      );
      expect(error).toBeInstanceOf(EvidenceError);
      const partial = partialRunOf(error)!;
      expect(partial).toMatchObject({ complete: false, failed_call: "agent-c4", rollout_error: null });
      expect(partial.evidence).toMatchObject({ rollout_id: "r-fail", stop_reason: "failed" });
      expect(partial.evidence.calls.map((c) => c.call_id)).toEqual(["agent-c0", "agent-c1", "agent-c2", "agent-c3"]);
      expect(partial.rollout!.calls).toHaveLength(4);
      // the same four calls as a run that stopped before the fault
      const clean = await runAgent({
        model,
        environment: createGridWorld(),
        compaction,
        maxTurns: 4,
        rolloutId: "r-fail",
      });
      expect(partial.rollout).toEqual(clean.rollout);
    });
  });

  it("a failure before any call still says so", async () => {
    const broken = { ...createGridWorld(), start: () => Promise.reject(new Error("no task")) };
    const error = await failureOf(runAgent({ model: { model: "m" } as ModelClient, environment: broken, maxTurns: 2 }));
    expect(partialRunOf(error)).toMatchObject({ complete: false, failed_call: null, evidence: { calls: [] } });
  });
});

describe("bounded answers (18.5)", () => {
  it("aborts an answer as it passes maxResponseBytes, and does not retry it", async () => {
    let requests = 0;
    let sent = 0;
    // an endless body: 64 KiB chunks until the client goes away
    const baseUrl = await serve((req, res) => {
      requests++;
      req.resume();
      res.writeHead(200, { "content-type": "application/json" });
      const chunk = Buffer.alloc(65536, 0x20);
      const pump = () => {
        while (!res.destroyed && sent < 64 * 1024 * 1024 && res.write(chunk)) sent += chunk.length;
        if (!res.destroyed && sent < 64 * 1024 * 1024) res.once("drain", pump);
      };
      pump();
    });
    const model = createModelClient({ baseUrl, model: "m", maxResponseBytes: 1 << 20 });
    const error = await failureOf(respond(model));
    expect(error).toBeInstanceOf(ResponseTooLargeError);
    expect(error).toMatchObject({ retryable: false, limit: 1 << 20 });
    expect((error as Error).message).toMatch(
      new RegExp(
        `^POST ${baseUrl}/v1/responses: the answer is larger than maxResponseBytes ` +
          `\\(1048576 bytes; aborted after \\d+ bytes\\)$`,
      ),
    );
    expect(sent).toBeLessThan(16 << 20); // the server stopped soon after: the body was not read to its end
    const run = await failureOf(runAgent({ model, environment: createGridWorld(), maxTurns: 2, retryDelayMs: 0 }));
    expect(run).toBeInstanceOf(ResponseTooLargeError);
    expect(requests).toBe(2); // one for respond(), one for the run: no retry
  });

  it("refuses at once an answer whose content-length is past the limit", async () => {
    const baseUrl = await serve((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "application/json", "content-length": String(10 << 20) });
      res.write("{");
    });
    const error = await failureOf(respond(createModelClient({ baseUrl, model: "m", maxResponseBytes: 1 << 20 })));
    expect((error as Error).message).toMatch(/content-length 10485760\)$/);
  });

  it("refuses redirects unless asked, naming where it pointed", async () => {
    const baseUrl = await serve((req, res) => {
      req.resume();
      if (req.url === "/v1/responses") res.writeHead(307, { location: "/elsewhere" }).end();
      else
        res
          .writeHead(200, { "content-type": "application/json" })
          .end('{"id":"r","object":"response","model":"m","status":"completed","output":[]}');
    });
    const error = await failureOf(respond(createModelClient({ baseUrl, model: "m" })));
    expect(error).toBeInstanceOf(ModelHttpError);
    expect(error).toMatchObject({
      status: 307,
      retryable: false,
      message: `POST ${baseUrl}/v1/responses: HTTP 307 redirect to /elsewhere refused (followRedirects is off)`,
    });
    expect(await respond(createModelClient({ baseUrl, model: "m", followRedirects: true }))).toMatchObject({ id: "r" });
    expect(() => createModelClient({ baseUrl, model: "m", maxResponseBytes: 0 })).toThrow(
      /maxResponseBytes must be a positive whole number of bytes, got 0/,
    );
  });
});

describe("provenance (19.4)", () => {
  const compaction = { policy: identityPolicy(), schedule: rolling() };

  it("records the model, and says which identities the server did not report, in Gym's words", async () => {
    const result = await withServer({ seed: 1 }, (_server, model) =>
      runAgent({ model, environment: createGridWorld(), compaction, maxTurns: 2, gymResponse: true }),
    );
    expect(result.evidence.provenance).toEqual({
      model: "testbed-model",
      tokenizer: null,
      chat_template: null,
      processor: null,
      complete: false,
      incomplete_reasons: [
        "exact_tokenizer_identity_not_reported_by_generation_server",
        "exact_chat_template_identity_not_reported_by_generation_server",
        "exact_multimodal_processor_fingerprint_not_reported_by_generation_server",
      ],
    });
    const contract = (
      result.gymResponse!.context_compaction_contract as { generation_contract: Record<string, unknown> }
    ).generation_contract;
    expect(contract).toMatchObject({
      training_eligible: false,
      incomplete_reasons: result.evidence.provenance!.incomplete_reasons,
    });
  });

  it("records what the server reports, and refuses an identity that changes mid-rollout", async () => {
    const reported = { tokenizer: "o200k_base@4.0.0", chat_template: "harmony-testbed/1", processor: "patch16" };
    const result = await withServer({ seed: 1, provenance: reported }, (_server, model) =>
      runAgent({ model, environment: createGridWorld(), compaction, maxTurns: 2, gymResponse: true }),
    );
    expect(result.evidence.provenance).toEqual({
      model: "testbed-model",
      ...reported,
      complete: true,
      incomplete_reasons: [],
    });
    expect(
      (result.gymResponse!.context_compaction_contract as { generation_contract: { training_eligible: boolean } })
        .generation_contract.training_eligible,
    ).toBe(true);
    await withServer({ seed: 1, provenance: reported }, async (_server, model) => {
      let n = 0;
      const drifting: ModelClient = {
        ...model,
        respond: async (call) => {
          const r = (await model.respond(call)) as ResponsesResponse;
          return n++ === 1 ? { ...r, generation_provenance: { ...reported, tokenizer: "other" } } : r;
        },
      };
      await expect(
        runAgent({ model: drifting, environment: createGridWorld(), compaction, maxTurns: 3 }),
      ).rejects.toThrow(
        new RegExp(
          /^call agent-c1 \(response resp_[0-9a-f]+\): generation_provenance.tokenizer is "other", /.source +
            /earlier calls reported "o200k_base@4.0.0"$/.source,
        ),
      );
    });
  });
});
