import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { canonicalJson } from "../../src/compaction/digest.js";
import { materialize } from "../../src/compaction/materialize.js";
import { OMISSION_MARKER, identityPolicy, recencyPolicy } from "../../src/compaction/policies.js";
import { sampleHistory } from "./fixtures.js";

describe("materialization", () => {
  it("turns a view into Responses input items, byte-for-byte deterministic", async () => {
    const { history, media, images } = await sampleHistory(2);
    const plan = identityPolicy().plan(history.entries());
    const a = await materialize(plan, history.entries(), media);
    const b = await materialize(identityPolicy().plan(history.entries()), history.entries(), media);
    expect(Buffer.from(a.bytes).equals(Buffer.from(b.bytes))).toBe(true);
    expect(a.digest).toBe(`sha256:${createHash("sha256").update(a.bytes).digest("hex")}`);
    expect(new TextDecoder().decode(a.bytes)).toBe(`[${a.itemKeys.join(",")}]`);
    expect(a.itemKeys).toEqual(a.input.map((item) => canonicalJson(item)));
    expect(a.mediaIds).toEqual(images);
    expect(a.input[0]).toEqual({
      type: "message",
      role: "user",
      content: [
        { type: "input_text", text: "Task." },
        { type: "input_image", image_url: media.dataUrl(images[0]), detail: "auto" },
      ],
    });
    expect(a.input[1]).toEqual({
      type: "reasoning",
      id: "rs_0",
      summary: [],
      content: [{ type: "reasoning_text", text: "thinking 0" }],
    });
    expect(a.input[2]).toEqual({
      type: "function_call",
      id: "fc_0",
      call_id: "call_0",
      name: "move",
      arguments: `{"direction":"north"}`,
    });
    expect(a.input[3]).toEqual({ type: "function_call_output", call_id: "call_0", output: "moved 0" });
  });

  it("puts the marker where an omitted run starts and drops the rest of the run", async () => {
    const { history, media, images } = await sampleHistory(4);
    const plan = recencyPolicy({ images: { keepLastGroups: 1 }, reasoning: { keepLastBlocks: 1 } }).plan(
      history.entries(),
    );
    const view = await materialize(plan, history.entries(), media);
    expect(view.mediaIds).toEqual([images[0], images[4]]);
    const users = view.input.filter((i) => i.type === "message" && i.role === "user");
    expect(users.map((u) => (u.type === "message" && u.role === "user" ? u.content.map((c) => c.type) : []))).toEqual([
      ["input_text", "input_image"],
      ["input_text"],
      ["input_image"],
    ]);
    expect(users[1]).toEqual({
      type: "message",
      role: "user",
      content: [{ type: "input_text", text: OMISSION_MARKER }],
    });
    expect(view.input.filter((i) => i.type === "reasoning").map((i) => i.type === "reasoning" && i.id)).toEqual([
      "rs_3",
    ]);
    const full = await materialize(identityPolicy().plan(history.entries()), history.entries(), media);
    expect(view.digest).not.toBe(full.digest);
  });
});
