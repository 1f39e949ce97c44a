// What the JSONL writers write for numbers that JSON.stringify would change: every number reads
// back as the value planned, the sign of zero included (rewards as logprobs).
import { describe, expect, test } from "vitest";
import { init } from "../../src/index.js";
import { packedToJson, rowToJson } from "../../src/output/jsonl.js";
import { RowSerializer } from "../../src/ingest/serialize.js";

describe("a reward of -0", () => {
  test("is written as -0 by rowToJson, packedToJson and the WASM row writer", async () => {
    const cf = await init();
    const plan = cf.plan(
      {
        rollout_id: "r",
        reward: -0,
        calls: [{ id: "c", prompt_token_ids: [1], generation_token_ids: [2], generation_log_probs: [-0] }],
      },
      { trees: true },
    );
    const row = rowToJson(plan.rows[0]);
    expect(row).toContain('"logprobs":[0,-0]');
    expect(row).toContain('"reward":-0,');
    expect(Object.is(JSON.parse(row).reward, -0)).toBe(true);
    expect(packedToJson(plan.trees[0])).toContain('"reward":-0');
    const serializer = await RowSerializer.create();
    const chunks: Uint8Array[] = [];
    serializer.writeRow(plan.rows[0], "bits", (chunk) => chunks.push(chunk.slice()));
    expect(Buffer.concat(chunks).toString()).toBe(row + "\n");
    plan.release();
  });
});
