// With compaction off the agent is a plain agent: the same `POST /v1/responses` bodies, key for
// key, accepted by a server that answers 422 to unknown fields.
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { runAgent } from "../../src/compaction/agent.js";
import { canonicalJson } from "../../src/compaction/digest.js";
import type { Environment } from "../../src/compaction/environment.js";
import type { InputItem, OutputItem, ResponsesResponse } from "../../src/compaction/responses.js";
import { createGridWorld, type RecordedRequest } from "../../src/compaction/testbed/index.js";
import { backends, withServer } from "./support.js";

const TURNS = 6;

/** A minimal plain Responses agent, written independently of the runtime: what it sends is the reference. */
async function plainAgent(url: string, model: string, env: Environment, turns: number): Promise<void> {
  const dataUrl = (bytes: Uint8Array) => `data:image/png;base64,${Buffer.from(bytes).toString("base64")}`;
  const start = await env.start();
  const input: InputItem[] = [
    {
      type: "message",
      role: "user",
      content: [
        { type: "input_text", text: start.text },
        ...(start.images ?? []).map((i) => ({
          type: "input_image" as const,
          image_url: dataUrl(i.bytes),
          detail: "auto" as const,
        })),
      ],
    },
  ];
  for (let turn = 0; turn < turns; turn++) {
    const body = { model, input, instructions: env.instructions, tools: env.tools };
    const answer = await fetch(`${url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    expect(answer.status).toBe(200);
    const response = (await answer.json()) as ResponsesResponse;
    for (const item of response.output as OutputItem[]) {
      if (item.type === "reasoning") input.push({ type: "reasoning", id: item.id, summary: [], content: item.content });
      if (item.type === "function_call")
        input.push({
          type: "function_call",
          id: item.id,
          call_id: item.call_id,
          name: item.name,
          arguments: item.arguments,
        });
    }
    for (const item of response.output) {
      if (item.type !== "function_call") continue;
      const obs = await env.call(item.name, JSON.parse(item.arguments));
      input.push({ type: "function_call_output", call_id: item.call_id, output: obs.text });
      if (obs.images?.length) {
        const images = obs.images.map((i) => ({
          type: "input_image" as const,
          image_url: dataUrl(i.bytes),
          detail: "auto" as const,
        }));
        input.push({
          type: "message",
          role: "user",
          content: [{ type: "input_text", text: `Observation after ${item.name}:` }, ...images],
        });
      }
    }
  }
}

const keysOf = (r: RecordedRequest) => Object.keys(r.body as object).sort();

describe("compaction off", () => {
  it("sends exactly what a plain agent sends, and a strict server accepts every request", async () => {
    const reference = await withServer({ seed: 3 }, async (server) => {
      await plainAgent(server.url, server.model, createGridWorld({ seed: 2 }), TURNS);
      return server.requests;
    });
    for (const compaction of [undefined, false] as const) {
      const { sent, result } = await withServer({ seed: 3 }, async (server, model) => {
        const result = await runAgent({
          model,
          environment: createGridWorld({ seed: 2 }),
          compaction,
          maxTurns: TURNS,
        });
        return { sent: server.requests, result };
      });
      expect(sent.map((r) => [r.path, r.status])).toEqual(reference.map(() => ["/v1/responses", 200]));
      expect(sent.map(keysOf)).toEqual(reference.map(keysOf));
      expect(sent.map(keysOf)[0]).toEqual(["input", "instructions", "model", "tools"]);
      expect(sent.map((r) => r.body)).toEqual(reference.map((r) => r.body));
      expect(sent.some((r) => "required_prefix_token_ids" in (r.body as object))).toBe(false);
      expect(result.evidence.compaction).toEqual({ enabled: false, policy: null, schedule: null, guards: null });
      expect(result.evidence.calls.every((c) => c.endpoint === "responses" && c.decision === null)).toBe(true);
      expect(result.evidence.boundaries).toEqual([]);
      // the evidence names the exact bytes that went over the wire
      expect(result.evidence.calls.map((c) => c.request_digest)).toEqual(
        sent.map((r) => `sha256:${createHash("sha256").update(canonicalJson(r.body)).digest("hex")}`),
      );
    }
  });

  it("still trains every token once; each call is a new root because the template drops old reasoning", async () => {
    for (const [reasoningWords, chained] of [
      [[6, 14], false],
      [[0, 0], true],
    ] as const) {
      const result = await withServer({ seed: 3, reasoningWords: [...reasoningWords] }, (_server, model) =>
        runAgent({ model, environment: createGridWorld({ seed: 2 }), maxTurns: TURNS }),
      );
      for (const cf of await backends()) {
        const plan = cf.plan(result.rollout);
        expect(plan.report.status).toBe("ok");
        expect(plan.report.trained_tokens).toBe(plan.report.captured_tokens);
        // without reasoning nothing is dropped, so the plain trace happens to continue exactly
        expect(plan.report.roots).toBe(chained ? 1 : TURNS);
        plan.release();
      }
    }
  });
});
