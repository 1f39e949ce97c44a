// Any task input: a Gym dataset row's `input` of any items (system and developer messages, earlier
// turns, function calls and outputs, images) becomes the initial context, protected as Gym's
// `protect_initial_context` says, and runs through the test bed's strict servers.
import { describe, expect, it } from "vitest";
import { runAgent } from "../../src/compaction/agent.js";
import { CompactionError } from "../../src/compaction/errors.js";
import { recencyPolicy } from "../../src/compaction/policies.js";
import { createResourcesServer, jsonObservation } from "../../src/compaction/resources.js";
import { rolling } from "../../src/compaction/schedules.js";
import { taskInputItems } from "../../src/compaction/task-input.js";
import { gridWorldRunBody } from "../../src/compaction/testbed/index.js";
import { expectTrainsOnceAlongLineage, png, withResources, withServer } from "./support.js";

const chart = `data:image/png;base64,${Buffer.from(png(32, 32, 90)).toString("base64")}`;

/** A dataset row's input: a system prompt, a developer note, an earlier turn with a tool call, the task. */
function richInput(task: unknown[]): unknown[] {
  return [
    { role: "system", content: "You move on a grid. Be brief." },
    { type: "message", role: "developer", content: [{ type: "input_text", text: "Prefer moving south." }] },
    {
      role: "user",
      content: [
        { type: "input_text", text: "Earlier you saw this chart:" },
        { type: "input_image", image_url: chart, detail: "auto" },
      ],
    },
    { role: "assistant", content: "I will look first." },
    { type: "function_call", call_id: "call_prev", name: "look", arguments: "{}" },
    { type: "function_call_output", call_id: "call_prev", output: "You see walls to the north." },
    {
      type: "message",
      role: "assistant",
      id: "msg_prev",
      content: [{ type: "output_text", text: "Walls north. Now the task." }],
    },
    ...task,
  ];
}

describe("task input", () => {
  it("reads every item kind Gym's agent passes through, naming the item it refuses", () => {
    const items = taskInputItems(richInput([]), "input");
    expect(items.map((i) => i.kind)).toEqual([
      "user",
      "user",
      "user",
      "message",
      "function_call",
      "function_output",
      "message",
    ]);
    expect(items[0]).toEqual({
      kind: "user",
      role: "system",
      parts: [{ type: "text", text: "You move on a grid. Be brief." }],
    });
    expect(items[2].kind === "user" && items[2].parts[1].type).toBe("image");
    expect(items[6]).toEqual({ kind: "message", id: "msg_prev", text: "Walls north. Now the task." });
    expect(taskInputItems("hello", "input")).toEqual([{ kind: "user", parts: [{ type: "text", text: "hello" }] }]);
    const refusals: [unknown, RegExp][] = [
      [[{ role: "tool", content: "x" }], /^input\[0\]: role "tool" is not one of user, system, developer, assistant$/],
      [[{ role: "user", content: [{ type: "input_audio" }] }], /^input\[0\]\.content\[0\]: "input_audio" is not/],
      [[{ type: "function_call", call_id: "c", name: "n" }], /^input\[0\]: arguments is missing$/],
      [[{ type: "web_search_call" }], /^input\[0\]: item type "web_search_call" is not message/],
      [
        [{ role: "user", content: [{ type: "input_image", image_url: "https://x/y.png" }] }],
        /^input\[0\]\.content\[0\]: image_url is not a base64 PNG, JPEG or WebP data URL$/,
      ],
      [[], /^input must be a string or a non-empty array of input items$/],
    ];
    for (const [input, message] of refusals) {
      expect(() => taskInputItems(input, "input")).toThrow(CompactionError);
      expect(() => taskInputItems(input, "input")).toThrow(message);
    }
  });

  it("reads a tool output given as text and image parts: its text, then its images in a user message", () => {
    const output = [
      { type: "input_text", text: "The map: " },
      { type: "input_image", image_url: chart, detail: "auto" },
      { type: "input_text", text: "walls north." },
    ];
    const items = taskInputItems(
      [
        { type: "function_call", call_id: "call_map", name: "map", arguments: "{}" },
        { type: "function_call_output", call_id: "call_map", output },
        { type: "function_call_output", call_id: "call_other", output: [{ type: "input_image", image_url: chart }] },
        { type: "function_call_output", call_id: "call_text", output: [{ type: "input_text", text: "ok" }] },
      ],
      "input",
    );
    expect(items.map((i) => i.kind)).toEqual([
      "function_call",
      "function_output",
      "user",
      "function_output",
      "user",
      "function_output",
    ]);
    expect(items[1]).toEqual({ kind: "function_output", callId: "call_map", output: "The map: walls north." });
    expect(items[2].kind === "user" && items[2].parts.map((p) => (p.type === "text" ? p.text : p.image.mime))).toEqual([
      "Observation after map:",
      "image/png",
    ]);
    expect(items[3]).toEqual({ kind: "function_output", callId: "call_other", output: "" });
    expect(items[4].kind === "user" && items[4].parts[0]).toEqual({
      type: "text",
      text: "Observation after call_other:",
    });
    expect(items[5]).toEqual({ kind: "function_output", callId: "call_text", output: "ok" });
    const refusals: [unknown, RegExp][] = [
      [{ type: "function_call_output", call_id: "c", output: 3 }, /^input\[0\]: output must be a string or an array/],
      [
        { type: "function_call_output", call_id: "c", output: [{ type: "input_file" }] },
        /^input\[0\]\.output\[0\]: "input_file" is not a input_text or input_image part$/,
      ],
      [
        { type: "function_call_output", call_id: "c", output: [{ type: "input_image", image_url: "https://x/y.png" }] },
        /^input\[0\]\.output\[0\]: image_url is not a base64 PNG, JPEG or WebP data URL$/,
      ],
    ];
    for (const [item, message] of refusals) expect(() => taskInputItems([item], "input")).toThrow(message);
  });

  it.each([true, false])(
    "runs a row whose earlier tool output shows an image; initial images protected: %s",
    async (protectInitialContext) => {
      await withServer({ seed: 22 }, async (server, model) => {
        await withResources(async (resources) => {
          const body = await gridWorldRunBody({ seed: 4 });
          const task = body.responses_create_params.input as unknown[];
          const input = [
            { role: "system", content: "You move on a grid. Be brief." },
            { type: "function_call", call_id: "call_map", name: "map", arguments: "{}" },
            {
              type: "function_call_output",
              call_id: "call_map",
              output: [
                { type: "input_text", text: "The map:" },
                { type: "input_image", image_url: chart, detail: "auto" },
              ],
            },
            ...task,
          ];
          const runBody = { ...body, responses_create_params: { ...body.responses_create_params, input } };
          const result = await runAgent({
            model,
            resources: { server: createResourcesServer({ baseUrl: resources.url }), runBody, observe: jsonObservation },
            compaction: {
              policy: recencyPolicy({ images: { keepLastGroups: 1, protectInitialContext } }),
              schedule: rolling(),
            },
            maxTurns: 5,
          });
          expect(server.requests.every((r) => r.status === 200)).toBe(true);
          const first = server.requests[0].body as { input: Record<string, unknown>[] };
          expect(first.input[2]).toEqual({ type: "function_call_output", call_id: "call_map", output: "The map:" });
          expect(first.input[3]).toEqual({
            type: "message",
            role: "user",
            content: [
              { type: "input_text", text: "Observation after map:" },
              { type: "input_image", image_url: chart, detail: "auto" },
            ],
          });
          const e = result.evidence;
          const chartId = e.calls[0].media[0];
          expect(chartId).toBeDefined();
          expect(e.calls[e.calls.length - 1].media.includes(chartId)).toBe(protectInitialContext);
          await expectTrainsOnceAlongLineage(e, result.rollout);
          expect(result.gymResponse!.agent_input).toEqual(input);
        });
      });
    },
  );

  it.each([true, false])(
    "runs a row with a system message and earlier turns; initial images protected: %s",
    async (protectInitialContext) => {
      await withServer({ seed: 21 }, async (server, model) => {
        await withResources(async (resources) => {
          const body = await gridWorldRunBody({ seed: 3 });
          const task = body.responses_create_params.input as unknown[];
          const input = richInput(task);
          const runBody = { ...body, responses_create_params: { ...body.responses_create_params, input } };
          const result = await runAgent({
            model,
            resources: {
              server: createResourcesServer({ baseUrl: resources.url }),
              runBody,
              observe: jsonObservation,
            },
            compaction: {
              policy: recencyPolicy({ images: { keepLastGroups: 1, protectInitialContext } }),
              schedule: rolling(),
            },
            maxTurns: 5,
          });
          expect(server.requests.every((r) => r.status === 200)).toBe(true);
          const first = server.requests[0].body as { input: Record<string, unknown>[] };
          // the initial context, in order, before anything the episode adds
          expect(first.input.slice(0, 3).map((i) => i.role)).toEqual(["system", "developer", "user"]);
          expect(first.input.slice(3, 7).map((i) => i.type)).toEqual([
            "message",
            "function_call",
            "function_call_output",
            "message",
          ]);
          expect(first.input.slice(0, 8)).toHaveLength(8);
          const e = result.evidence;
          expect(e.calls).toHaveLength(5);
          const chartId = e.calls[0].media[0];
          const later = e.calls[e.calls.length - 1];
          expect(later.media.includes(chartId)).toBe(protectInitialContext);
          await expectTrainsOnceAlongLineage(e, result.rollout);
          // the envelope keeps the task's input as given
          expect(result.gymResponse!.agent_input).toEqual(input);
        });
      });
    },
  );
});
