// Gym's `context_history` block (issue 19.2): Gym's keys, values, defaults and validators, from
// YAML or JSON; unknown keys name their path; the policy and compaction ids are Gym's.
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/compaction/errors.js";
import {
  compactionPolicyId,
  contextHistoryOf,
  maxStepsOf,
  normalizeContextHistory,
  parseContextHistory,
} from "../../src/compaction/gym-config.js";
import { recencyPolicy } from "../../src/compaction/policies.js";
import { turnChunked } from "../../src/compaction/schedules.js";

// The seed's example configuration, as Gym's packaged YAML holds it.
const SEED_YAML = `
simple_agent_with_compaction:
  responses_api_agents:
    simple_agent_with_compaction:
      entrypoint: app.py
      resources_server:
        type: resources_servers
        name: <resources-server>
      model_server:
        type: responses_api_models
        name: policy_model
      context_history:
        enabled: true
        policy:
          type: recency
          config:
            images:
              enabled: true
              protect_initial_context: true
              keep_last_groups: 3
            reasoning:
              enabled: true
              keep_first_block: false
              keep_last_blocks: 3
        schedule:
          type: turn_chunked_recency
          actions_per_chunk: 2
`;

describe("context_history", () => {
  it("reads the seed's Gym agent config and gives the runtime's options", () => {
    const { contextHistory, compaction } = parseContextHistory(SEED_YAML);
    expect(contextHistory).toEqual({
      enabled: true,
      policy: {
        type: "recency",
        config: {
          images: {
            enabled: true,
            protect_initial_context: true,
            keep_last_groups: 3,
            omission_marker: "[Earlier image omitted]",
          },
          reasoning: { enabled: true, keep_first_block: false, keep_last_blocks: 3 },
        },
      },
      schedule: { type: "turn_chunked_recency", actions_per_chunk: 2 },
      guards: {
        max_total_tokens: null,
        reserved_generation_tokens: 0,
        max_active_images: null,
        max_vision_tokens: null,
        projected_vision_tokens_per_image: null,
      },
    });
    expect(compaction).not.toBe(false);
    if (compaction === false) return;
    const same = recencyPolicy({
      images: { keepLastGroups: 3, protectInitialContext: true },
      reasoning: { keepFirstBlock: false, keepLastBlocks: 3 },
    });
    expect(compaction.policy.identity).toEqual(same.identity);
    expect(compaction.schedule).toEqual(turnChunked(2));
    expect(compaction.guards).toBeUndefined();
    // the options map back to the same block
    expect(contextHistoryOf(compaction)).toEqual(contextHistory);
  });

  it("takes JSON, and a bare block; enabled defaults to false (a plain agent)", () => {
    expect(parseContextHistory('{"context_history": {"policy": {"type": "identity"}}}').compaction).toBe(false);
    const bare = parseContextHistory(
      "enabled: true\nguards: {max_active_images: 2, max_vision_tokens: 100, projected_vision_tokens_per_image: 25}\n",
    );
    expect(bare.compaction).toMatchObject({
      policy: { name: "identity" },
      schedule: { type: "rolling" },
      guards: { maxActiveImages: 2, maxVisionTokens: 100, projectedVisionTokensPerImage: 25 },
    });
  });

  it("computes Gym's ids: the policy's config_digest and the block's compaction_policy_id", () => {
    // The settings of Gym's own example envelope (context_compacted_response.json, Gym's formats).
    const given = {
      enabled: true,
      policy: {
        type: "recency",
        config: { images: { enabled: true, protect_initial_context: false, keep_last_groups: 1 } },
      },
      schedule: { type: "turn_chunked_recency", actions_per_chunk: 1 },
      guards: { max_active_images: 2 },
    };
    expect(compactionPolicyId(normalizeContextHistory(given))).toBe("compaction-policy-ed4e27a4cb42e78ce3166872");
    const { compaction } = parseContextHistory(JSON.stringify({ context_history: given }));
    expect(compaction === false ? undefined : compaction.policy.identity.config_digest).toBe(
      "6c6b9773ff9f4b425812c584e4cc4d7a97cd51b8068177662bb858968e31764f",
    );
  });

  it("refuses what Gym refuses, naming the key's path", () => {
    const refuse = (block: unknown) => () => normalizeContextHistory(block);
    expect(refuse({ policy: { type: "recency", config: { images: { enabled: true, keep_last_group: 2 } } } })).toThrow(
      new ConfigError(
        "context_history.policy.config.images.keep_last_group",
        "unknown key (expected one of enabled, protect_initial_context, keep_last_groups, omission_marker)",
      ),
    );
    expect(refuse({ enable: true })).toThrow(
      "context_history config: context_history.enable: unknown key (expected one of enabled, policy, schedule, guards)",
    );
    expect(
      refuse({
        policy: { type: "recency", config: { images: { keep_last_groups: 2 }, reasoning: { enabled: true } } },
      }),
    ).toThrow("context_history.policy.config.images.keep_last_groups: is set but images.enabled is false");
    expect(refuse({ policy: { type: "recency", config: {} } })).toThrow(
      "the recency policy requires images.enabled or reasoning.enabled",
    );
    expect(refuse({ schedule: { type: "rolling_recency", actions_per_chunk: 2 } })).toThrow(
      "context_history.schedule.actions_per_chunk: rolling_recency requires 1, got 2",
    );
    expect(refuse({ schedule: { type: "chunked" } })).toThrow(
      "context_history.schedule.type: must be rolling_recency or turn_chunked_recency",
    );
    expect(refuse({ guards: { max_vision_tokens: 10 } })).toThrow(
      "context_history.guards.max_vision_tokens: requires projected_vision_tokens_per_image",
    );
    expect(refuse({ guards: { max_total_tokens: 0 } })).toThrow(
      "context_history.guards.max_total_tokens: must be an integer >= 1, got 0",
    );
    expect(refuse({ policy: { type: "summary" } })).toThrow('context_history.policy.type: unknown policy "summary"');
    expect(refuse({ policy: { type: "identity", config: { images: {} } } })).toThrow(
      "context_history.policy.config.images: unknown key",
    );
    expect(() => parseContextHistory("a: [1, 2")).toThrow(ConfigError);
    expect(() => parseContextHistory("x:\n  context_history: {}\ny:\n  context_history: {}\n")).toThrow(
      "the file holds 2 context_history blocks",
    );
  });
});

describe("max_steps", () => {
  const withSteps = (value: string) =>
    SEED_YAML.replace("      context_history:\n", `      max_steps: ${value}\n      context_history:\n`);

  it("reads the agent's max_steps next to its context_history; null or 0 is Gym's no limit", () => {
    expect(maxStepsOf(withSteps("4"))).toBe(4);
    expect(maxStepsOf(withSteps('"7"'))).toBe(7); // pydantic's lax mode takes an int's digits
    expect(maxStepsOf(withSteps("null"))).toBeNull();
    expect(maxStepsOf(withSteps("0"))).toBeNull();
    expect(maxStepsOf(SEED_YAML)).toBeNull();
    expect(maxStepsOf("enabled: true\n")).toBeNull(); // a bare block has no agent
    expect(maxStepsOf(JSON.stringify({ max_steps: 3, context_history: { enabled: true } }))).toBe(3);
    // another agent's max_steps is not this one's
    expect(maxStepsOf(`other:\n  max_steps: 2\n${SEED_YAML}`)).toBeNull();
    // found where parseContextHistory finds the block, inside a list too
    const listed = JSON.stringify({ agents: [{ max_steps: 5, context_history: { enabled: true } }] });
    expect(parseContextHistory(listed).contextHistory.enabled).toBe(true);
    expect(maxStepsOf(listed)).toBe(5);
  });

  it("refuses what is not a step count, naming its path", () => {
    const path = "simple_agent_with_compaction.responses_api_agents.simple_agent_with_compaction";
    for (const [value, shown] of [
      ["-1", "-1"],
      ["2.5", "2.5"],
      ["ten", '"ten"'],
      ["true", "true"],
    ])
      expect(() => maxStepsOf(withSteps(value))).toThrow(
        `agent config: ${path}.max_steps: must be an integer >= 0 or null, got ${shown}`,
      );
  });
});
