// readRollouts as both entries share it (src/read-rollouts.ts, the browser entry's readRollouts):
// bytes, web streams and Blobs; one value or JSONL by name or by its first line; token entries
// and trajectory files from sources the caller gives, since a browser has no directory.
import { describe, expect, it } from "vitest";
import { readRollouts } from "../src/browser.js";
import type { ReadRejection, ReadRollout, ReadRolloutsOptions } from "../src/read-rollouts.js";
import { filesOf } from "./support/atif-writer.js";

const encode = (text: string) => new TextEncoder().encode(text);
const rollout = (id: string) => ({ rollout_id: id, reward: 1, calls: [] });

async function collect(source: Parameters<typeof readRollouts>[0], options: ReadRolloutsOptions = {}) {
  const rollouts: ReadRollout[] = [];
  const rejections: ReadRejection[] = [];
  for await (const r of readRollouts(source, { ...options, onRejected: (x) => rejections.push(x) })) rollouts.push(r);
  return { rollouts, rejections };
}

describe("readRollouts (browser-safe)", () => {
  it("tells one value from JSONL by the name, else by a first line that is `{` or `[` alone", async () => {
    const pretty = JSON.stringify([rollout("a"), rollout("b")], null, 2);
    expect((await collect(encode(pretty))).rollouts.map((r) => r.rollout_id)).toEqual(["a", "b"]);
    const oneLine = JSON.stringify([rollout("a")]);
    // On one line, an unnamed input is JSONL: the array is one value that is no rollout.
    expect((await collect(encode(oneLine))).rejections.map((r) => r.where)).toEqual(["<input>:1"]);
    expect((await collect(encode(oneLine), { name: "runs.json" })).rollouts.map((r) => r.rollout_id)).toEqual(["a"]);
    const { rejections } = await collect(encode(`${JSON.stringify(rollout("a"))}\n[1,`), { name: "x.jsonl" });
    expect(rejections.map((r) => r.message)).toEqual([
      "x.jsonl:2: rejected (malformed_json): not JSON at byte 3: cut off: the line ends where a value should be",
    ]);
  });

  it("reads a web stream and a Blob chunk by chunk", async () => {
    const text = `${JSON.stringify(rollout("a"))}\n${JSON.stringify(rollout("b"))}`;
    const bytes = encode(text);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < bytes.length; i += 5) controller.enqueue(bytes.subarray(i, i + 5));
        controller.close();
      },
    });
    expect((await collect(stream)).rollouts.map((r) => r.rollout_id)).toEqual(["a", "b"]);
    expect((await collect(new Blob([text]))).rollouts.map((r) => r.rollout_id)).toEqual(["a", "b"]);
  });

  it("takes an ATIF trajectory's files from the caller, and carries import notes", async () => {
    const trajectory = {
      schema_version: "ATIF-v1.6",
      session_id: "s",
      agent: { name: "a", version: "1" },
      steps: [
        {
          step_id: 1,
          source: "agent",
          message: "",
          metrics: { prompt_token_ids: [1], completion_token_ids: [2], logprobs: [-1] },
          observation: { results: [{ subagent_trajectory_ref: [{ session_id: "sub", trajectory_path: "sub.json" }] }] },
        },
      ],
    };
    const sub = { session_id: "sub", agent: {}, steps: [{ step_id: 1, source: "agent", message: "" }] };
    const { rollouts } = await collect(encode(JSON.stringify(trajectory)), {
      trajectories: filesOf(new Map([["sub.json", sub]]), 1),
    });
    expect(rollouts).toEqual([
      {
        rollout_id: "s",
        reward: 1,
        agents: [
          { id: "s", parent: null, mode: "leader" },
          { id: "sub", parent: "s", mode: "subagent" },
        ],
        calls: [
          { id: "s:1", agent: "s", prompt_token_ids: [1], generation_token_ids: [2], generation_log_probs: [-1] },
        ],
        diagnostics: [
          {
            code: "steps_without_token_ids",
            call: null,
            detail: "1 agent steps without metrics.prompt_token_ids/completion_token_ids (sub: 1) are not calls",
          },
        ],
      },
    ]);
    // Without files, the ref is one rejection saying why.
    const { rejections } = await collect(encode(JSON.stringify(trajectory)));
    expect(rejections[0].code).toBe("unresolved_subagent");
  });
});
