import { describe, expect, it, vi } from "vitest";
import { assertBodyKeys, compactionBody, createModelClient, plainBody } from "../../src/compaction/client.js";
import { CompactionError, ModelHttpError } from "../../src/compaction/errors.js";
import type { InputItem } from "../../src/compaction/responses.js";
import { withServer } from "./support.js";

const input: InputItem[] = [{ type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] }];

describe("request bodies", () => {
  it("the plain body carries only the plain keys that have a value", () => {
    expect(plainBody({ model: "m", input })).toEqual({ model: "m", input });
    expect(
      Object.keys(plainBody({ model: "m", input, instructions: undefined, tools: [], maxOutputTokens: undefined })),
    ).toEqual(["model", "input"]);
    expect(
      Object.keys(plainBody({ model: "m", input, instructions: "be brief", maxOutputTokens: 64, temperature: 0 })),
    ).toEqual(["model", "input", "instructions", "max_output_tokens", "temperature"]);
  });

  it("the compaction body adds the prefix key only when there is a prefix", () => {
    expect("required_prefix_token_ids" in compactionBody({ model: "m", input }, null)).toBe(false);
    expect(compactionBody({ model: "m", input }, [1, 2])).toEqual({
      model: "m",
      input,
      required_prefix_token_ids: [1, 2],
    });
  });

  it("the sender refuses a plain body with an extra key, even a null one, before anything is sent", async () => {
    const fetch = vi.fn();
    const client = createModelClient({ baseUrl: "http://127.0.0.1:9", model: "m", fetch });
    const leaky = { ...plainBody({ model: "m", input }), required_prefix_token_ids: null };
    await expect(client.respond({ endpoint: "responses", body: leaky as never })).rejects.toThrow(
      'model client: key "required_prefix_token_ids" is not allowed in a /v1/responses body',
    );
    expect(() => assertBodyKeys("context_compaction", { model: "m", input, required_prefix_token_ids: null })).toThrow(
      'model client: key "required_prefix_token_ids" is null in a /v1/responses/context-compaction body',
    );
    expect(() => assertBodyKeys("responses", { model: "m", input, instructions: undefined })).toThrow(CompactionError);
    expect(fetch).not.toHaveBeenCalled();
  });
});

describe("model client over fetch", () => {
  it(
    "the review's bug is real on the wire: " + "a strict server answers 422 to the leaked key, 200 to the plain body",
    async () => {
      await withServer({}, async (server, model) => {
        const leaky = await fetch(`${server.url}/v1/responses`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: server.model, input, required_prefix_token_ids: null }),
        });
        expect(leaky.status).toBe(422);
        expect(await leaky.json()).toEqual({
          detail: [
            {
              type: "extra_forbidden",
              loc: ["body", "required_prefix_token_ids"],
              msg: "Extra inputs are not permitted",
              input: null,
            },
          ],
        });
        const ok = await model.respond({ endpoint: "responses", body: plainBody({ model: server.model, input }) });
        expect(ok.object).toBe("response");
        expect(server.requests.map((r) => r.status)).toEqual([422, 200]);
      });
    },
  );

  it("marks 5xx and transport failures retryable, 4xx not", async () => {
    await withServer({ faults: { 1: "http_500" } }, async (server, model) => {
      const failure = await model
        .respond({ endpoint: "responses", body: plainBody({ model: server.model, input }) })
        .catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(ModelHttpError);
      expect(failure).toMatchObject({ status: 500, retryable: true });
      const wrongModel = await model
        .respond({ endpoint: "responses", body: plainBody({ model: "other", input }) })
        .catch((e: unknown) => e);
      expect(wrongModel).toMatchObject({ status: 404, retryable: false });
      expect(await model.countTokens({ model: server.model, input })).toBeGreaterThan(5);
    });
    const down = createModelClient({ baseUrl: "http://127.0.0.1:1", model: "m" });
    await expect(down.respond({ endpoint: "responses", body: plainBody({ model: "m", input }) })).rejects.toMatchObject(
      { status: 0, retryable: true },
    );
  });
});
