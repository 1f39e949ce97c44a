// Builds examples/atif/fix-login: a Harbor trial (result.json, examples/atif/fix-login/agent/trajectory.json
// and a terminus-2 style summarization subagent beside it, trajectory.summarization-1-summary.json) whose
// token ids are real: Qwen3's tokenizer and chat template (test/explain/harness), sent and
// sampled token-in/token-out, as an RL harness that records ATIF-v1.6 `metrics` does. Only the
// logprobs are made up (deterministic). No public ATIF trajectory with token ids and a subagent
// was found (docs/formats-atif.md), so this one is constructed; test/examples/atif.test.ts
// checks the shipped files are exactly what this writes.
import { model, type Message } from "../explain/harness/model.js";

const SESSION = "fix-login__a1b2c3";
const SUMMARY_SESSION = `${SESSION}-summarization-1-summary`;
const MODEL = "Qwen/Qwen3-8B";
const TIME = "2026-03-02T10:00:00+00:00";

const SYSTEM = "You are an AI assistant solving a task in a Linux terminal. Use the run tool to execute commands.";
const TASK = "The login test in tests/test_login.py fails. Find the bug in app/auth.py and fix it.";
const SUMMARY_REQUEST =
  "You are about to hand off your work to another AI agent. Summarize what you have done so far, " +
  "what you found, and what remains.";

interface Turn {
  reasoning: string | null;
  content: string;
  cmd: string | null;
  output: string | null;
}

const LEADER: Turn[] = [
  {
    reasoning: "I should look at the failing test first.",
    content: "Let me run the test to see the failure.",
    cmd: "pytest tests/test_login.py -q",
    output: "F\nAssertionError: check_password('secret', hash) returned False\n1 failed in 0.21s",
  },
  {
    reasoning: null,
    content: "The password check fails. Let me read app/auth.py.",
    cmd: "sed -n 1,40p app/auth.py",
    output: "def check_password(password, stored):\n    return hash_password(password.strip) == stored",
  },
];

const SUMMARY: Turn = {
  reasoning: null,
  content:
    "I ran tests/test_login.py: check_password returns False. In app/auth.py, check_password calls " +
    "password.strip without parentheses, so it hashes a method object. Remaining: call strip() and rerun the test.",
  cmd: null,
  output: null,
};

const AFTER: Turn[] = [
  {
    reasoning: "The summary says strip is not called. I will fix it.",
    content: "Fixing the call to strip().",
    cmd: "sed -i 's/password.strip)/password.strip())/' app/auth.py && pytest tests/test_login.py -q",
    output: "1 passed in 0.18s",
  },
  {
    reasoning: null,
    content: "The login test passes now: check_password calls password.strip().",
    cmd: null,
    output: null,
  },
];

/** Deterministic logprobs, exact in float32: small negative multiples of 1/64. */
function logprobs(n: number, seed: number): number[] {
  return Array.from({ length: n }, (_, i) => -((i * 7 + seed * 13) % 40) / 64);
}

export interface AtifExample {
  /** Paths under examples/atif/fix-login, and their JSON values. */
  files: Record<string, unknown>;
}

export function buildAtifExample(): AtifExample {
  const qwen = model("qwen3");
  const encode = (text: string) => qwen.encode(text);
  const sampled = (turn: Turn) =>
    encode(
      qwen.sampledText({
        reasoning: turn.reasoning,
        content: turn.content,
        toolCalls: turn.cmd === null ? [] : [{ name: "run", arguments: JSON.stringify({ cmd: turn.cmd }) }],
      }),
    );
  // What the template renders after a sampled turn: the tool's answer and the next assistant header.
  const toolTurn = (output: string) =>
    encode(`\n<|im_start|>user\n<tool_response>\n${output}\n</tool_response><|im_end|>\n<|im_start|>assistant\n`);
  const opening = (user: string) =>
    encode(qwen.render([{ role: "system", content: SYSTEM } as Message, { role: "user", content: user }], true));

  let stepId = 0;
  const step = (source: string, message: string, more: Record<string, unknown> = {}) => ({
    step_id: ++stepId,
    timestamp: TIME,
    source,
    ...(source === "agent" ? { model_name: MODEL } : {}),
    message,
    ...more,
  });
  const agentStep = (turn: Turn, prompt: number[], completion: number[], seed: number) => {
    const call = `call_${stepId + 1}`;
    return step("agent", turn.content, {
      ...(turn.reasoning === null ? {} : { reasoning_content: turn.reasoning }),
      ...(turn.cmd === null
        ? {}
        : {
            tool_calls: [{ tool_call_id: call, function_name: "run", arguments: { cmd: turn.cmd } }],
            observation: { results: [{ source_call_id: call, content: turn.output }] },
          }),
      metrics: {
        prompt_tokens: prompt.length,
        completion_tokens: completion.length,
        prompt_token_ids: prompt,
        completion_token_ids: completion,
        logprobs: logprobs(completion.length, seed),
      },
    });
  };

  // The leader, token in, token out: each prompt is the last one, what was sampled, and the tool turn.
  const leaderSteps: unknown[] = [step("user", TASK)];
  let prompt = opening(TASK);
  let full: number[] = [];
  LEADER.forEach((turn, i) => {
    const completion = sampled(turn);
    leaderSteps.push(agentStep(turn, prompt, completion, i + 1));
    full = [...prompt, ...completion];
    prompt = [...full, ...toolTurn(turn.output!)];
  });

  // terminus-2's summarization: a subagent that sees the leader's history (copied, without
  // metrics) and a request for a summary.
  const copied = (leaderSteps as Record<string, unknown>[]).map((s) => {
    const { metrics: _, ...rest } = s;
    return { ...rest, is_copied_context: true, extra: { note: "Metrics omitted to avoid duplication" } };
  });
  const summaryPrompt = [
    ...full,
    ...encode(
      `\n<|im_start|>user\n<tool_response>\n${LEADER[1].output}\n</tool_response>\n${SUMMARY_REQUEST}<|im_end|>\n<|im_start|>assistant\n`,
    ),
  ];
  const summaryCompletion = sampled(SUMMARY);
  const summaryMetrics = {
    prompt_tokens: summaryPrompt.length,
    completion_tokens: summaryCompletion.length,
    prompt_token_ids: summaryPrompt,
    completion_token_ids: summaryCompletion,
    logprobs: logprobs(summaryCompletion.length, 9),
  };
  const summary = {
    schema_version: "ATIF-v1.6",
    session_id: SUMMARY_SESSION,
    agent: {
      name: "terminus-2-summarization-summary",
      version: "2.0.0",
      model_name: MODEL,
      extra: { parent_session_id: SESSION, summarization_index: 1 },
    },
    steps: [
      ...copied,
      { step_id: copied.length + 1, timestamp: TIME, source: "user", message: SUMMARY_REQUEST },
      {
        step_id: copied.length + 2,
        timestamp: TIME,
        source: "agent",
        model_name: MODEL,
        message: SUMMARY.content,
        metrics: summaryMetrics,
      },
    ],
    final_metrics: {
      total_prompt_tokens: summaryPrompt.length,
      total_completion_tokens: summaryCompletion.length,
      total_steps: copied.length + 2,
    },
  };

  // The handoff: a system step referencing the subagent, then a fresh context from the summary.
  leaderSteps.push(
    step("system", "Performed context summarization and handoff to continue task.", {
      observation: {
        results: [
          {
            subagent_trajectory_ref: [
              {
                session_id: SUMMARY_SESSION,
                trajectory_path: "trajectory.summarization-1-summary.json",
                extra: { summary: "Context summarization 1: Step 1 - Summary generation" },
              },
            ],
          },
        ],
      },
    }),
  );
  const handoff = `${TASK}\n\nSummary from the previous agent:\n${SUMMARY.content}`;
  leaderSteps.push(step("user", handoff));
  prompt = opening(handoff);
  AFTER.forEach((turn, i) => {
    const completion = sampled(turn);
    leaderSteps.push(agentStep(turn, prompt, completion, i + 5));
    prompt = turn.output === null ? prompt : [...prompt, ...completion, ...toolTurn(turn.output)];
  });

  const metricsOf = (steps: unknown[]) =>
    (steps as { metrics?: { prompt_tokens: number; completion_tokens: number } }[]).filter((s) => s.metrics);
  const leaderMetrics = metricsOf(leaderSteps);
  const trajectory = {
    schema_version: "ATIF-v1.6",
    session_id: SESSION,
    agent: { name: "terminus-2", version: "2.0.0", model_name: MODEL, extra: { parser: "json" } },
    steps: leaderSteps,
    final_metrics: {
      total_prompt_tokens: leaderMetrics.reduce((a, s) => a + s.metrics!.prompt_tokens, 0),
      total_completion_tokens: leaderMetrics.reduce((a, s) => a + s.metrics!.completion_tokens, 0),
      total_steps: leaderSteps.length,
    },
  };
  const result = {
    id: "3f2c9a0e-0000-4000-8000-000000000001",
    task_name: "fix-login",
    trial_name: SESSION,
    agent_info: { name: "terminus-2", version: "2.0.0", model_info: { name: "Qwen3-8B", provider: "hosted_vllm" } },
    verifier_result: { rewards: { reward: 1.0 } },
    exception_info: null,
  };
  return {
    files: {
      "result.json": result,
      "agent/trajectory.json": trajectory,
      "agent/trajectory.summarization-1-summary.json": summary,
    },
  };
}

/** A value as the example files hold it: two-space JSON, numbers on one line per array. */
export function exampleText(value: unknown): string {
  return `${JSON.stringify(value, null, 2).replace(/\[\s+(-?[\d.]+(?:,\s+-?[\d.]+)*)\s+\]/g, (_, body: string) => `[${body.replace(/,\s+/g, ", ")}]`)}\n`;
}
