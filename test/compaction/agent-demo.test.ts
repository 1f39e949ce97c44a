import { describe, expect, it, vi } from "vitest";
import { main } from "../../src/cli/main.js";
import { agentDemo, type AgentDemoOptions } from "../../src/cli/commands/agent-demo.js";
import { UsageError } from "../../src/cli/errors.js";
import { tempDirs } from "../support/temp-dirs.js";
import { captureOutput } from "../support/capture.js";

const tempDir = tempDirs("agent-demo");

const defaults: AgentDemoOptions = { turns: "10", policy: "combined", schedule: "chunked", seed: "0", backend: "wasm" };

describe("callforest agent-demo", () => {
  it("prints the invariant's figures docs/compaction.md quotes (issue 39)", async () => {
    const { readFileSync } = await import("node:fs");
    const docs = readFileSync(new URL("../../docs/compaction.md", import.meta.url), "utf8");
    const quoted = /`callforest agent-demo`[^"]*\("(every sampled token trained exactly once: \d+ of \d+)"\)/.exec(
      docs,
    );
    expect(quoted, "docs/compaction.md quotes the line agent-demo prints").not.toBeNull();
    const run = await captureOutput(() => main(["agent-demo"]));
    expect(run.code).toBe(0);
    expect(run.stdout.split("\n")).toContain(quoted![1]);
  });

  it("prints the boundaries and the rows, with roots exactly at the boundaries", async () => {
    const out = await agentDemo(defaults);
    const lines = out.split("\n");
    expect(lines[0]).toBe(
      "agent-demo: 10 calls, policy combined (recency/2), schedule turn_chunked(3), stop max_turns",
    );
    const boundaryCount = Number(/^boundaries \((\d+)\): where a rewrite starts a new context$/m.exec(out)![1]);
    expect(boundaryCount).toBeGreaterThan(0);
    const start = lines.findIndex((l) => l.startsWith("boundaries ("));
    const firstCalls = lines.slice(start + 2, start + 2 + boundaryCount).map((l) => l.trim().split(/\s+/)[1]);
    expect(lines.find((l) => l.startsWith("roots: "))).toBe(`roots: agent-c0 ${firstCalls.join(" ")}`);
    expect(out).toMatch(/^rows \(backend wasm\)$/m);
    const report = /^report: ok, calls 10, roots (\d+), rows (\d+), captured (\d+), trained (\d+)$/m.exec(out)!;
    expect(Number(report[1])).toBe(boundaryCount + 1);
    expect(report[3]).toBe(report[4]);
    // the invariant in words, the legends, and images stored vs shown
    expect(out).toContain(`every sampled token trained exactly once: ${report[4]} of ${report[3]}\n`);
    expect(out).toMatch(/^ {2}tokens: the row's length; trained: its tokens with loss mask 1/m);
    expect(out).toMatch(/^ {2}reason: why the context is not a continuation/m);
    expect(out).toMatch(
      new RegExp(
        /^images: \d+ distinct images stored, each once by content; /.source +
          /the last request showed \d+ images \(a repeated image counts each time it is shown\)$/.source,
        "m",
      ),
    );
    expect(await agentDemo(defaults)).toBe(out); // deterministic
  });

  it("runs every policy and schedule on the TypeScript backend", async () => {
    for (const policy of ["identity", "images", "reasoning"]) {
      const out = await agentDemo({ ...defaults, turns: "4", policy, schedule: "rolling", backend: "ts" });
      expect(out).toMatch(/^report: ok, calls 4,/m);
    }
  });

  it("takes its options: --actions-per-chunk, --seed, and each policy's own omissions", async () => {
    // A chunk opens every N actions: new roots only at multiples of N (of 2 here, of 3 by default).
    const rootsOf = (out: string) =>
      /^roots: (.*)$/m
        .exec(out)![1]
        .split(" ")
        .map((id) => Number(id.slice("agent-c".length)));
    const chunked = await agentDemo({ ...defaults, actionsPerChunk: "2" });
    expect(chunked.split("\n")[0]).toBe(
      "agent-demo: 10 calls, policy combined (recency/2), schedule turn_chunked(2), stop max_turns",
    );
    const [twos, threes] = [rootsOf(chunked), rootsOf(await agentDemo(defaults))];
    expect([twos.length > 2, twos.every((call) => call % 2 === 0), threes.every((call) => call % 3 === 0)]).toEqual([
      true,
      true,
      true,
    ]);
    expect(twos).not.toEqual(threes);
    // Another seed, another episode.
    const seeded = await Promise.all(["0", "1"].map((seed) => agentDemo({ ...defaults, seed })));
    expect(seeded[0].replace(/agent-demo-\d/g, "")).not.toBe(seeded[1].replace(/agent-demo-\d/g, ""));
    // Omitted images/reasoning at the boundaries: each policy omits its own kind only.
    const omitted = async (policy: string) => {
      const out = await agentDemo({ ...defaults, policy });
      const columns = [...out.matchAll(/ (\d+)\/(\d+)$/gm)].map((m) => [Number(m[1]), Number(m[2])]);
      return [columns.some(([i]) => i > 0), columns.some(([, r]) => r > 0)];
    };
    expect(await omitted("reasoning")).toEqual([false, true]);
    expect(await omitted("images")).toEqual([true, false]);
    expect(await omitted("combined")).toEqual([true, true]);
  });

  it("takes the keep counts and Gym's guards", async () => {
    const keepOne = await agentDemo({ ...defaults, keepImages: "1", keepReasoning: "0", schedule: "rolling" });
    const shown = (out: string) =>
      [...out.matchAll(/^ {2}\d+ +agent-c\d+ +agent-c\d+ .* \d+>(\d+) +(\d+)\/\d+$/gm)].map((m) => Number(m[1]));
    expect(Math.max(...shown(keepOne))).toBeLessThanOrEqual(2); // the task's image and the newest group
    const guarded = await agentDemo({
      ...defaults,
      guards: "max_active_images=3,max_vision_tokens=100,projected_vision_tokens_per_image=25",
    });
    expect(guarded.split("\n")[0]).toBe(
      "agent-demo: 10 calls, policy combined (recency/2), schedule turn_chunked(3), " +
        "guards max_active_images=3,max_vision_tokens=100,projected_vision_tokens_per_image=25, stop max_turns",
    );
    expect(guarded).toMatch(/^guards: agent-c\d+ admit_after_compaction \(active_images 4>3/m);
    expect(guarded).toMatch(/^every sampled token trained exactly once: (\d+) of \1$/m);
    await expect(agentDemo({ ...defaults, guards: "max_images=3" })).rejects.toThrow(
      /^--guards: 'max_images=3' is not NAME=N/,
    );
  });

  it("reads a Gym context_history block with --config", async () => {
    const { writeFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const dir = tempDir();
    const file = join(dir, "agent.yaml");
    writeFileSync(
      file,
      "context_history:\n  enabled: true\n  policy:\n    type: recency\n    config:\n" +
        "      images: {enabled: true, keep_last_groups: 2}\n      reasoning: {enabled: true, keep_last_blocks: 2}\n" +
        "  schedule: {type: turn_chunked_recency, actions_per_chunk: 3}\n",
    );
    const fromFile = await agentDemo({ ...defaults, policy: undefined, schedule: undefined, config: file });
    expect(fromFile.split("\n")[0]).toBe(
      `agent-demo: 10 calls, policy from ${file} (recency/2), schedule turn_chunked(3), stop max_turns`,
    );
    // the same block as the options that say it: the same episode
    expect(fromFile.split("\n").slice(1).join("\n")).toBe((await agentDemo(defaults)).split("\n").slice(1).join("\n"));
    writeFileSync(
      file,
      "context_history:\n  enabled: true\n  policy: {type: recency, config: {images: {enabled: true, keep_last: 2}}}\n",
    );
    await expect(agentDemo({ ...defaults, policy: undefined, schedule: undefined, config: file })).rejects.toThrow(
      `--config ${file}: context_history config: context_history.policy.config.images.keep_last: unknown key`,
    );
    await expect(agentDemo({ ...defaults, config: file })).rejects.toThrow(
      "--config sets the whole context_history: drop --policy",
    );
  });

  it("takes the --config agent's max_steps as its turns; a --turns given wins", async () => {
    const { writeFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const file = join(tempDir(), "agent.yaml");
    const agent = (maxSteps: string) =>
      [
        "grid_agent:",
        "  responses_api_agents:",
        "    simple_agent_with_compaction:",
        `      max_steps: ${maxSteps}`,
        "      context_history:",
        "        enabled: true",
        "        policy: {type: identity}",
        "",
      ].join("\n");
    const calls = async (maxSteps: string, turns?: string) => {
      writeFileSync(file, agent(maxSteps));
      const options = { ...defaults, policy: undefined, schedule: undefined, config: file, turns };
      return (await agentDemo(options)).split("\n")[0].replace(/, policy.*, stop/, ", stop");
    };
    expect(await calls("3")).toBe("agent-demo: 3 calls, stop max_turns");
    expect(await calls("3", "5")).toBe("agent-demo: 5 calls, stop max_turns");
    expect(await calls("3", "2")).toBe("agent-demo: 2 calls, stop max_turns");
    // Gym's "no limit": the demo's own default
    expect(await calls("0")).toBe("agent-demo: 10 calls, stop max_turns");
    expect(await calls("null")).toBe("agent-demo: 10 calls, stop max_turns");
    await expect(calls("-2")).rejects.toThrow(
      new UsageError(
        `--config ${file}: agent config: grid_agent.responses_api_agents.simple_agent_with_compaction.max_steps: ` +
          "must be an integer >= 0 or null, got -2",
      ),
    );
  });

  it("is registered as `callforest agent-demo`", async () => {
    const written: string[] = [];
    const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    try {
      expect(await main(["agent-demo", "--turns", "3", "--policy", "identity", "--backend", "ts"])).toBe(0);
    } finally {
      spy.mockRestore();
    }
    expect(written.join("")).toMatch(/^agent-demo: 3 calls, policy identity \(identity\/1\)/);
    expect(written.join("")).toMatch(/^report: ok, calls 3, roots 1, rows 1,/m);
    const errors: string[] = [];
    const err = vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      errors.push(String(chunk));
      return true;
    });
    try {
      expect(await main(["agent-demo", "--policy", "lru"])).toBe(2);
    } finally {
      err.mockRestore();
    }
    expect(errors).toEqual(["callforest: unknown --policy 'lru': expected identity, images, reasoning, combined\n"]);
  });

  it("rejects bad options with a usage error", async () => {
    await expect(agentDemo({ ...defaults, policy: "lru" })).rejects.toThrow(
      new UsageError("unknown --policy 'lru': expected identity, images, reasoning, combined"),
    );
    await expect(agentDemo({ ...defaults, turns: "0" })).rejects.toThrow("--turns must be a positive integer, got '0'");
    await expect(agentDemo({ ...defaults, schedule: "weekly" })).rejects.toThrow(UsageError);
    await expect(agentDemo({ ...defaults, backend: "gpu" })).rejects.toThrow(UsageError);
    // An option the chosen schedule would ignore is refused, not dropped.
    await expect(agentDemo({ ...defaults, schedule: "rolling", actionsPerChunk: "2" })).rejects.toThrow(
      new UsageError("--actions-per-chunk applies to --schedule chunked only (rolling recomputes the view every call)"),
    );
  });
});

describe("callforest agent-demo --config with a Gym dataset", () => {
  /** A Gym agent config naming a dataset whose rows have a system message and earlier turns. */
  /** A Gym setup of two dataset rows; `extra[i]` adds fields to row i (identity, a retry, ...). */
  async function gymSetup(
    dir: string,
    extra: Record<string, unknown>[] = [],
    agentLines: string[] = [],
  ): Promise<string> {
    const { writeFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { gridWorldRunBody } = await import("../../src/compaction/testbed/index.js");
    const rows = [];
    for (const seed of [1, 2]) {
      const body = await gridWorldRunBody({ seed });
      const task = body.responses_create_params.input as unknown[];
      const input = [
        { role: "system", content: "You walk a grid world. Use the tools." },
        { role: "user", content: "Where am I?" },
        { role: "assistant", content: "Let me look." },
        { type: "function_call", call_id: "call_0", name: "look", arguments: "{}" },
        { type: "function_call_output", call_id: "call_0", output: "A corridor runs south." },
        ...task,
      ];
      rows.push({
        ...body,
        responses_create_params: { ...body.responses_create_params, input },
        expected: "goal",
        ...extra[rows.length],
      });
    }
    writeFileSync(join(dir, "rows.jsonl"), rows.map((r) => `${JSON.stringify(r)}\n`).join(""));
    const config = join(dir, "agent.yaml");
    writeFileSync(
      config,
      [
        "grid_agent:",
        "  responses_api_agents:",
        "    simple_agent_with_compaction:",
        "      entrypoint: app.py",
        "      resources_server: {type: resources_servers, name: grid_world}",
        "      model_server: {type: responses_api_models, name: policy_model}",
        ...agentLines,
        "      datasets:",
        "      - name: example",
        "        type: example",
        "        jsonl_fpath: rows.jsonl",
        "      context_history:",
        "        enabled: true",
        "        policy:",
        "          type: recency",
        "          config:",
        "            images: {enabled: true, keep_last_groups: 1}",
        "            reasoning: {enabled: true, keep_last_blocks: 1}",
        "        schedule: {type: turn_chunked_recency, actions_per_chunk: 2}",
        "",
      ].join("\n"),
    );
    return config;
  }

  async function cli(args: string[]): Promise<{ code: number; out: string }> {
    const written: string[] = [];
    const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      written.push(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8"));
      return true;
    });
    const err = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    try {
      const code = await main(args);
      return { code, out: written.join("") };
    } finally {
      spy.mockRestore();
      err.mockRestore();
    }
  }

  it("runs each row as Gym's /run does; rows --from gym-compaction reads the envelope into the same rows", async () => {
    const { join } = await import("node:path");
    const dir = tempDir();
    const config = await gymSetup(dir);
    const envelope = join(dir, "envelope.jsonl");
    const rollouts = join(dir, "rollouts.jsonl");
    const { code, out } = await cli([
      "agent-demo",
      "--config",
      config,
      "--turns",
      "6",
      "--envelope",
      envelope,
      "--rollouts",
      rollouts,
    ]);
    expect(code).toBe(0);
    expect(out.split("\n")[0]).toBe(
      `agent-demo: 2 dataset rows of ${join(dir, "rows.jsonl")}, policy from ${config} (recency/2), ` +
        "schedule turn_chunked(2), stop per row",
    );
    expect(out).toMatch(/^row 0: rollout 0-0, 6 input items, \d+ calls, stop \w+, reward [01]$/m);
    expect(out).toMatch(/^row 1: rollout 1-0, 6 input items, \d+ calls, stop \w+, reward [01]$/m);
    expect(out.match(/^every sampled token trained exactly once: (\d+) of \1$/gm)).toHaveLength(2);
    expect(out.match(/^envelope read back as rows --from gym-compaction reads it: the same rows$/gm)).toHaveLength(2);
    // the real reader, through the CLI: the same training rows as the runtime's own rollouts
    const training = (text: string) =>
      text
        .trim()
        .split("\n")
        .map((line) => {
          const r = JSON.parse(line);
          return [r.rollout_id, r.token_ids, r.logprobs, r.loss_mask, r.reward];
        });
    const fromEnvelope = await cli(["rows", "--from", "gym-compaction", envelope]);
    const own = await cli(["rows", rollouts]);
    expect(fromEnvelope.code).toBe(0);
    expect(own.code).toBe(0);
    expect(training(fromEnvelope.out).length).toBeGreaterThan(2);
    expect(training(fromEnvelope.out)).toEqual(training(own.out));
  });

  it("reads the envelope back under the runtime's rollout id: a retry, an explicit id", async () => {
    const { join } = await import("node:path");
    const dir = tempDir();
    const config = await gymSetup(dir, [{ _ng_attempt_index: 1 }, { context_compaction_rollout_id: "episode-b" }]);
    const envelope = join(dir, "envelope.jsonl");
    const rollouts = join(dir, "rollouts.jsonl");
    const args = ["agent-demo", "--config", config, "--turns", "4", "--envelope", envelope, "--rollouts", rollouts];
    const { code, out } = await cli(args);
    expect(code).toBe(0);
    expect(out).toMatch(/^row 0: rollout 0-0-a1, /m);
    expect(out).toMatch(/^row 1: rollout episode-b, /m);
    const ids = (text: string) => [
      ...new Set(
        text
          .trim()
          .split("\n")
          .map((line) => JSON.parse(line).rollout_id),
      ),
    ];
    const fromEnvelope = await cli(["rows", "--from", "gym-compaction", envelope]);
    const own = await cli(["rows", rollouts]);
    expect([fromEnvelope.code, own.code]).toEqual([0, 0]);
    expect(ids(own.out)).toEqual(["0-0-a1", "episode-b"]);
    expect(ids(fromEnvelope.out)).toEqual(ids(own.out));
  });

  it("writes --envelope and --rollouts both or neither: one it cannot write leaves no other", async () => {
    const { existsSync, readdirSync } = await import("node:fs");
    const { join } = await import("node:path");
    const dir = tempDir();
    const config = await gymSetup(dir, []);
    const envelope = join(dir, "envelope.jsonl");
    const args = ["agent-demo", "--config", config, "--turns", "2", "--envelope", envelope];
    const { code } = await cli([...args, "--rollouts", join(dir, "missing", "rollouts.jsonl")]);
    expect(code).toBe(2);
    expect(existsSync(envelope)).toBe(false);
    expect(readdirSync(dir).filter((name) => name.includes("partial"))).toEqual([]);
  });

  it("stops each row at the agent's max_steps, after that call's function calls, unless --turns says", async () => {
    const { readFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const dir = tempDir();
    const config = await gymSetup(dir, [], ["      max_steps: 2"]);
    const envelope = join(dir, "envelope.jsonl");
    const bounded = await cli(["agent-demo", "--config", config, "--envelope", envelope]);
    expect(bounded.code).toBe(0);
    expect(bounded.out).toMatch(/^row 0: rollout 0-0, 6 input items, 2 calls, stop max_turns, reward [01]$/m);
    expect(bounded.out).toMatch(/^row 1: rollout 1-0, 6 input items, 2 calls, stop max_turns, reward [01]$/m);
    // as in Gym, the last call's function calls ran before the episode stopped
    for (const line of readFileSync(envelope, "utf8").trim().split("\n")) {
      const output = JSON.parse(line).response.output as { type: string; call_id?: string }[];
      const ids = (type: string) => output.filter((item) => item.type === type).map((item) => item.call_id);
      expect(ids("function_call").length).toBeGreaterThan(0);
      expect(ids("function_call_output")).toEqual(ids("function_call"));
    }
    const overridden = await cli(["agent-demo", "--config", config, "--turns", "3"]);
    expect(overridden.code).toBe(0);
    expect(overridden.out).toMatch(/^row 0: rollout 0-0, 6 input items, 3 calls, /m);
  });

  it("refuses --envelope without a dataset, and names a bad dataset line", async () => {
    const { writeFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    await expect(agentDemo({ ...defaults, envelope: "x.jsonl" })).rejects.toThrow(
      new UsageError("--envelope needs a --config that names a dataset (datasets[].jsonl_fpath)"),
    );
    const dir = tempDir();
    const config = await gymSetup(dir);
    writeFileSync(join(dir, "rows.jsonl"), '{"responses_create_params": {"input": "hi"}}\n{oops\n');
    await expect(agentDemo({ ...defaults, policy: undefined, schedule: undefined, config })).rejects.toThrow(
      new UsageError(`dataset ${join(dir, "rows.jsonl")}:2: not JSON`),
    );
  });
});
