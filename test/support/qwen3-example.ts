// Builds examples/qwen3.json, the conversation docs/breaks.md explains with `--tokenizer qwen3`:
// one of the real-template harness's Qwen3 conversations (test/explain/harness), rendered and
// tokenized by Qwen3's own chat template and tokenizer, with the harness's mistakes in it.
// test/examples/qwen3.test.ts checks the shipped file is exactly what this writes
// (CALLFOREST_WRITE_EXAMPLES=1 rewrites it) and that the doc shows what explain prints for it.
import { conversation } from "../explain/harness/agent.js";
import { model } from "../explain/harness/model.js";
import type { Rollout } from "../../src/types.js";
import { exampleText } from "./atif-example.js";

/** The harness's seed: a conversation that adds a newline to every turn, changes its tool list and drops reasoning. */
export const QWEN3_SEED = Number(process.env.QWEN3_SEED ?? 4);

/** The example rollout, with its own rollout_id. */
export function buildQwen3Example(): Rollout {
  const { rollout } = conversation(model("qwen3"), QWEN3_SEED, "render");
  return { ...rollout, rollout_id: "qwen3-harness" };
}

/** The file's text: one rollout, its token arrays on one line each. */
export function qwen3ExampleText(): string {
  return exampleText(buildQwen3Example());
}
