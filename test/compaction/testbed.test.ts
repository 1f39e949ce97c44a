import { decode as decodePng } from "fast-png";
import { encode } from "gpt-tokenizer/encoding/o200k_base";
import { describe, expect, it } from "vitest";
import { compactionBody, plainBody } from "../../src/compaction/client.js";
import type { InputItem, OutputItem, ResponsesResponse } from "../../src/compaction/responses.js";
import { createGridWorld, encodeText, renderPrompt, SPECIAL } from "../../src/compaction/testbed/index.js";
import { withServer } from "./support.js";

const task: InputItem = { type: "message", role: "user", content: [{ type: "input_text", text: "Explore." }] };
const tools = createGridWorld().tools;

/** What an agent resends of an output item: its Responses input form, without token fields. */
function asInput(item: OutputItem): InputItem {
  if (item.type === "reasoning") return { type: "reasoning", id: item.id, summary: [], content: item.content };
  if (item.type === "function_call")
    return { type: "function_call", id: item.id, call_id: item.call_id, name: item.name, arguments: item.arguments };
  return { type: "message", role: "assistant", id: item.id, content: item.content };
}

function tokens(r: ResponsesResponse) {
  const last = r.output[r.output.length - 1];
  return {
    prompt: last.prompt_token_ids!,
    generation: last.generation_token_ids!,
    logprobs: last.generation_log_probs!,
  };
}

function startsWith(whole: number[], prefix: number[]): boolean {
  return prefix.length <= whole.length && prefix.every((t, i) => whole[i] === t);
}

describe("test-bed template", () => {
  it("tokenizes text with the real o200k BPE and drops reasoning an observation follows", () => {
    expect(encodeText("Moved north to (1,0).")).toEqual(encode("Moved north to (1,0)."));
    const reasoning: InputItem = {
      type: "reasoning",
      id: "rs",
      summary: [],
      content: [{ type: "reasoning_text", text: "secret plan" }],
    };
    const call: InputItem = { type: "function_call", id: "fc", call_id: "c1", name: "move", arguments: "{}" };
    const output: InputItem = { type: "function_call_output", call_id: "c1", output: "ok" };
    const withOld = renderPrompt({ input: [task, reasoning, call, output] });
    const without = renderPrompt({ input: [task, call, output] });
    expect(withOld).toEqual(without);
    const trailing = renderPrompt({ input: [task, call, output, reasoning] });
    expect(trailing.length).toBe(without.length + encodeText("secret plan").length + 6);
    expect(withOld.slice(-2)).toEqual([SPECIAL.start, ...encodeText("assistant")]);
  });
});

describe("test-bed model server", () => {
  it("is deterministic and reports token evidence on the last output item", async () => {
    await withServer({ seed: 5 }, async (server, model) => {
      const body = plainBody({ model: server.model, input: [task], tools });
      const a = await model.respond({ endpoint: "responses", body });
      const b = await model.respond({ endpoint: "responses", body });
      expect(a).toEqual(b);
      expect(a.output.map((o) => o.type)).toEqual(["reasoning", "function_call"]);
      const t = tokens(a);
      expect(t.logprobs).toHaveLength(t.generation.length);
      expect(t.prompt).toEqual(renderPrompt({ input: [task], tools }));
      expect(t.generation[0]).toBe(SPECIAL.channel);
      expect(t.generation[t.generation.length - 1]).toBe(SPECIAL.call);
      expect(a.output[0].prompt_token_ids).toBeUndefined();
    });
  });

  it(
    "breaks the prefix for real on the plain endpoint, " +
      "and honours required_prefix_token_ids on the compaction endpoint",
    async () => {
      await withServer({ seed: 5 }, async (server, model) => {
        const first = await model.respond({
          endpoint: "responses",
          body: plainBody({ model: server.model, input: [task], tools }),
        });
        const t1 = tokens(first);
        const call = first.output.find((o) => o.type === "function_call")!;
        const next: InputItem[] = [
          task,
          ...first.output.map(asInput),
          { type: "function_call_output", call_id: call.type === "function_call" ? call.call_id : "", output: "ok" },
        ];
        const full = [...t1.prompt, ...t1.generation];

        const plain = tokens(
          await model.respond({ endpoint: "responses", body: plainBody({ model: server.model, input: next, tools }) }),
        );
        expect(startsWith(plain.prompt, full)).toBe(false); // the template dropped the first call's reasoning
        expect(startsWith(plain.prompt, t1.prompt)).toBe(true);

        const body = compactionBody({ model: server.model, input: next, tools }, full);
        const honoured = tokens(await model.respond({ endpoint: "context_compaction", body }));
        expect(startsWith(honoured.prompt, full)).toBe(true);
        expect(honoured.prompt.length).toBeGreaterThan(full.length);
        expect(
          await model.countTokens({ model: server.model, input: next, tools, required_prefix_token_ids: full }),
        ).toBe(honoured.prompt.length);
        expect(await model.countTokens({ model: server.model, input: next, tools })).toBe(plain.prompt.length);

        const wrong = [...full.slice(0, -1), 7];
        const refused = await model
          .respond({
            endpoint: "context_compaction",
            body: compactionBody({ model: server.model, input: next, tools }, wrong),
          })
          .catch((e: unknown) => e);
        expect(refused).toMatchObject({ status: 400 });
        expect(String((refused as Error).message)).toMatch(
          /required_prefix_token_ids does not match the input items \(matched \d+ of \d+ prefix tokens/,
        );
      });
    },
  );

  it("answers 422 to unknown fields when strict (the default) and ignores them when lenient", async () => {
    const body = { model: "testbed-model", input: [task], seed: 3 };
    const post = (url: string, path: string) => fetch(url + path, { method: "POST", body: JSON.stringify(body) });
    await withServer({}, async (server) => {
      for (const path of ["/v1/responses", "/v1/responses/context-compaction", "/tokenize"])
        expect((await post(server.url, path)).status).toBe(422);
      expect((await fetch(server.url + "/v1/responses", { method: "POST", body: "{" })).status).toBe(422);
      expect((await fetch(server.url + "/v1/models", { method: "POST", body: "{}" })).status).toBe(404);
    });
    await withServer({ strict: false }, async (server) => {
      expect((await post(server.url, "/v1/responses")).status).toBe(200);
    });
  });

  it(
    "answers /tokenize as Gym's adapter does ({tokens}) " +
      "and as vLLM does ({count, max_model_len, tokens}), and 422s any other shape",
    async () => {
      await withServer({ maxModelLen: 4096 }, async (server) => {
        const post = async (body: unknown) => {
          const answer = await fetch(server.url + "/tokenize", { method: "POST", body: JSON.stringify(body) });
          return { status: answer.status, body: (await answer.json()) as Record<string, unknown> };
        };
        const adapter = await post({
          model: server.model,
          input: [task],
          tools,
          temperature: 0.5,
          parallel_tool_calls: true,
        });
        expect(adapter.status).toBe(200);
        expect(Object.keys(adapter.body)).toEqual(["tokens"]);
        expect(adapter.body.tokens).toEqual(renderPrompt({ input: [task], tools }));
        // the same request in the chat form Gym's adapter forwards upstream to vLLM
        const chatTools = tools.map((t) => ({
          type: "function",
          function: { name: t.name, description: t.description, parameters: t.parameters },
        }));
        const chat = await post({
          model: server.model,
          messages: [{ role: "user", content: [{ type: "text", text: "Explore." }] }],
          tools: chatTools,
          add_generation_prompt: true,
        });
        expect(chat).toEqual({
          status: 200,
          body: { count: (adapter.body.tokens as number[]).length, max_model_len: 4096, tokens: adapter.body.tokens },
        });
        expect((await post({ prompt: "Moved north." })).body).toEqual({
          count: encodeText("Moved north.").length,
          max_model_len: 4096,
          tokens: encodeText("Moved north."),
        });
        for (const bad of [
          { model: server.model },
          { prompt: "x", messages: [] },
          { prompt: "x", echo: true },
          { messages: [{ role: "narrator", content: "x" }] },
          { model: server.model, input: [task], seed: 1 },
        ]) {
          expect((await post(bad)).status, JSON.stringify(bad)).toBe(422);
        }
        expect((await post({ model: "other", prompt: "x" })).status).toBe(404);
      });
    },
  );

  it("takes every Responses create parameter Gym's adapter takes, and nothing else", async () => {
    await withServer({}, async (server) => {
      const post = (path: string, body: unknown) =>
        fetch(server.url + path, { method: "POST", body: JSON.stringify(body) }).then((r) => r.status);
      const params = {
        model: server.model,
        input: [task],
        tools,
        top_p: 0.9,
        tool_choice: "auto",
        parallel_tool_calls: true,
        metadata: { k: "v" },
        store: false,
      };
      expect(await post("/v1/responses", params)).toBe(200);
      expect(await post("/v1/responses/context-compaction", { ...params, required_prefix_token_ids: null })).toBe(200);
      expect(await post("/v1/responses", { ...params, required_prefix_token_ids: null })).toBe(422);
      expect(
        await post("/v1/responses", {
          ...params,
          input: [{ type: "message", role: "user", content: [{ type: "image", url: "x" }] }],
        }),
      ).toBe(422);
    });
  });

  it("reports provenance only when told to (vLLM reports none)", async () => {
    const body = plainBody({ model: "testbed-model", input: [task] });
    await withServer({}, async (_server, model) =>
      expect((await model.respond({ endpoint: "responses", body })).generation_provenance).toBeUndefined(),
    );
    await withServer(
      { provenance: { tokenizer: "o200k_base", chat_template: "harmony-testbed" } },
      async (_server, model) =>
        expect((await model.respond({ endpoint: "responses", body })).generation_provenance).toEqual({
          tokenizer: "o200k_base",
          chat_template: "harmony-testbed",
        }),
    );
  });

  it("rejects prompts longer than the model's context", async () => {
    await withServer({ maxModelLen: 10 }, async (server, model) => {
      await expect(
        model.respond({ endpoint: "responses", body: plainBody({ model: server.model, input: [task] }) }),
      ).rejects.toThrow(/maximum context length is 10 tokens/);
    });
  });
});

describe("grid world", () => {
  it("renders a PNG per step, blocks at walls and edges, and ends at the goal", async () => {
    const world = createGridWorld({ size: 3, seed: 1, goal: true });
    const start = await world.start();
    const image = decodePng(start.images![0].bytes);
    expect([image.width, image.height, image.channels]).toEqual([48, 48, 3]);
    const again = createGridWorld({ size: 3, seed: 1, goal: true });
    expect(Buffer.from((await again.start()).images![0].bytes).equals(Buffer.from(start.images![0].bytes))).toBe(true);
    expect((await world.call("move", { direction: "north" })).text).toBe("Blocked moving north; still at (0,0).");
    expect((await world.call("move", { direction: "up" })).text).toMatch(/move needs direction/);
    expect((await world.call("dance", {})).text).toBe("error: unknown tool dance");
    expect(world.reward()).toBe(0);
    expect(world.steps).toBe(3);
    const open = createGridWorld({ size: 2, goal: true }); // too small for walls
    await open.start();
    expect((await open.call("move", { direction: "east" })).done).toBe(false);
    expect(await open.call("move", { direction: "south" })).toMatchObject({
      text: "Moved south to (1,1). Goal reached.",
      done: true,
    });
    expect(open.reward()).toBe(1);
  });
});
