// The packed evidence envelope (issue 19.5): on the 100-turn runs of the test bed it is at most a
// tenth of the full record, expands back byte-identical, and plans the same rows.
import { describe, expect, it } from "vitest";
import { runAgent, type CompactionOptions } from "../../src/compaction/agent.js";
import { expandEvidence, packEvidence } from "../../src/compaction/evidence-packing.js";
import { rolloutFromEvidence, validateEvidence } from "../../src/compaction/evidence.js";
import { identityPolicy, recencyPolicy } from "../../src/compaction/policies.js";
import { rolling, turnChunked } from "../../src/compaction/schedules.js";
import { EvidenceError } from "../../src/compaction/errors.js";
import { createGridWorld } from "../../src/compaction/testbed/index.js";
import { withServer } from "./support.js";

const recency = () =>
  recencyPolicy({
    images: { keepLastGroups: 3, protectInitialContext: true },
    reasoning: { keepLastBlocks: 3, keepFirstBlock: false },
  });
const RUNS: [string, () => CompactionOptions][] = [
  ["identity", () => ({ policy: identityPolicy(), schedule: rolling() })],
  ["combined recency, rolling", () => ({ policy: recency(), schedule: rolling() })],
  ["combined recency, turnChunked(4)", () => ({ policy: recency(), schedule: turnChunked(4) })],
];

describe("the packed envelope of a 100-turn run", () => {
  it.each(RUNS)("%s: at most 10% of the full record, expanded back byte-identical", async (name, compaction) => {
    const result = await withServer({ seed: 21 }, (_server, model) =>
      runAgent({ model, environment: createGridWorld({ seed: 8 }), compaction: compaction(), maxTurns: 100 }),
    );
    const full = JSON.stringify(result.evidence);
    const packed = JSON.stringify(packEvidence(result.evidence));
    console.log(
      `${name}: full ${full.length} bytes, packed ${packed.length} bytes ` +
        `(${((100 * packed.length) / full.length).toFixed(1)}%)`,
    );
    expect(packed.length).toBeLessThanOrEqual(full.length / 10);
    expect(JSON.stringify(expandEvidence(JSON.parse(packed)))).toBe(full);
    // the readers take the packed form as it is
    expect(JSON.stringify(validateEvidence(JSON.parse(packed)))).toBe(full);
    expect(rolloutFromEvidence(JSON.parse(packed))).toEqual(result.rollout);
  });
});

describe("packing", () => {
  it("stores a continuation as its parent's sequence and the tokens it adds", async () => {
    const result = await withServer({ seed: 3 }, (_server, model) =>
      runAgent({
        model,
        environment: createGridWorld({ seed: 2 }),
        compaction: { policy: identityPolicy(), schedule: rolling() },
        maxTurns: 4,
      }),
    );
    const packed = packEvidence(result.evidence) as unknown as { calls: Record<string, unknown>[] };
    const [first, second] = result.evidence.calls;
    expect(packed.calls[0].prompt_token_ids).toEqual(first.prompt_token_ids);
    // one copy of the whole required prefix, then what the call adds (new tokens, and copies of
    // runs it repeats: an image's pads)
    const delta = packed.calls[1].prompt_delta as {
      base_call: string;
      pieces: { copy?: number[]; tokens?: number[] }[];
    };
    expect(delta.base_call).toBe(first.call_id);
    expect(delta.pieces[0]).toEqual({ copy: [0, second.required_prefix_length] });
    expect(delta.pieces.slice(1).some((p) => p.tokens)).toBe(true);
    expect(Object.keys(packed.calls[1])).not.toContain("prompt_token_ids");
  });

  it("refuses a packed record whose pieces do not fit, naming the call and the piece", async () => {
    const result = await withServer({ seed: 3 }, (_server, model) =>
      runAgent({
        model,
        environment: createGridWorld({ seed: 2 }),
        compaction: { policy: identityPolicy(), schedule: rolling() },
        maxTurns: 2,
      }),
    );
    const packed = JSON.parse(JSON.stringify(packEvidence(result.evidence)));
    packed.calls[1].prompt_delta.pieces[0].copy[1] += 1_000_000;
    expect(() => validateEvidence(packed)).toThrow(EvidenceError);
    expect(() => validateEvidence(packed)).toThrow(
      /^evidence calls\[1\] \(agent-c1\)\.prompt_delta\.pieces\[0\]\.copy \[0, \d+\] runs past the base's \d+ tokens$/,
    );
    packed.calls[1].prompt_delta.base_call = "agent-c9";
    expect(() => validateEvidence(packed)).toThrow(
      'evidence calls[1] (agent-c1).prompt_delta.base_call names "agent-c9", not an earlier call',
    );
  });
});
