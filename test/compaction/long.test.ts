// 100-turn runs: compaction keeps the active context bounded, and the long compacted rollouts
// still train every sampled token exactly once.
import { beforeAll, describe, expect, it } from "vitest";
import { runAgent, type RunAgentResult } from "../../src/compaction/agent.js";
import { identityPolicy, recencyPolicy } from "../../src/compaction/policies.js";
import { rolling, turnChunked, type ScheduleConfig } from "../../src/compaction/schedules.js";
import { createGridWorld, SPECIAL } from "../../src/compaction/testbed/index.js";
import { expectTrainsOnceAlongLineage, withServer } from "./support.js";

const TURNS = 100;
const KEEP_GROUPS = 3;
const KEEP_BLOCKS = 3;
const CHUNK = 4;
const policy = () =>
  recencyPolicy({
    images: { keepLastGroups: KEEP_GROUPS, protectInitialContext: true },
    reasoning: { keepLastBlocks: KEEP_BLOCKS, keepFirstBlock: false },
  });

async function longRun(compaction: {
  policy: ReturnType<typeof policy>;
  schedule: ScheduleConfig;
}): Promise<RunAgentResult> {
  return withServer({ seed: 21 }, (_server, model) =>
    runAgent({ model, environment: createGridWorld({ seed: 8 }), compaction, maxTurns: TURNS }),
  );
}

const VISION_PER_IMAGE = 25; // an 80x80 grid image in 16-pixel patches
const visionTokens = (prompt: number[]) => prompt.filter((t) => t === SPECIAL.imagePad).length;
const max = (xs: number[]) => Math.max(...xs);
const promptLengths = (r: RunAgentResult) => r.evidence.calls.map((c) => c.prompt_token_ids.length);

describe("100-turn runs", () => {
  let identity: RunAgentResult;
  beforeAll(async () => {
    identity = await longRun({ policy: identityPolicy(), schedule: rolling() });
  });

  it("without compaction the context grows with every turn", async () => {
    const e = identity.evidence;
    expect(e.calls).toHaveLength(TURNS);
    expect(e.calls[TURNS - 1].media).toHaveLength(TURNS); // the task's image and 99 observations
    expect(visionTokens(e.calls[TURNS - 1].prompt_token_ids)).toBe(TURNS * VISION_PER_IMAGE);
    const lengths = promptLengths(identity);
    for (let i = 1; i < TURNS; i++) expect(lengths[i]).toBeGreaterThan(lengths[i - 1]);
    await expectTrainsOnceAlongLineage(e, identity.rollout);
  });

  it.each([
    ["rolling", rolling(), 0],
    [`turnChunked(${CHUNK})`, turnChunked(CHUNK), CHUNK - 1],
  ] as const)(
    "combined recency under %s keeps images, reasoning and vision tokens bounded",
    async (_name, schedule, tail) => {
      const result = await longRun({ policy: policy(), schedule });
      const e = result.evidence;
      expect(e.calls).toHaveLength(TURNS);
      for (const call of e.calls) {
        expect(call.media.length).toBeLessThanOrEqual(1 + KEEP_GROUPS + tail);
        expect(call.view.retained.reasoning).toBeLessThanOrEqual(KEEP_BLOCKS + tail);
      }
      // Only the text of actions and observations still accumulates; images and reasoning do not.
      const lengths = promptLengths(result);
      const identityLengths = promptLengths(identity);
      for (const call of e.calls)
        expect(visionTokens(call.prompt_token_ids)).toBeLessThanOrEqual((1 + KEEP_GROUPS + tail) * VISION_PER_IMAGE);
      const growthSecondHalf = max(lengths.slice(50)) - max(lengths.slice(0, 50));
      const identityGrowth = max(identityLengths.slice(50)) - max(identityLengths.slice(0, 50));
      // over 50 turns identity gained 50 images (and 50 reasoning blocks) that compaction did not
      expect(growthSecondHalf).toBeLessThan(identityGrowth - 50 * VISION_PER_IMAGE);
      expect(e.boundaries.length).toBeGreaterThan(0);
      await expectTrainsOnceAlongLineage(e, result.rollout);
    },
  );
});
