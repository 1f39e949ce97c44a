// The harness's gpt-oss template (harness/harmony.ts), written out for one conversation, so that
// what it claims of gpt-oss's published template can be read against it: the analysis before a
// tool call kept until a later turn answers, the tool call's header and `<|call|>`, its arguments
// and the tool's output as `tojson` writes them, and `<|end|>` after an earlier final answer.
import { describe, expect, it } from "vitest";
import { pythonJson, renderHarmony } from "./harness/harmony.js";
import { TOOLS, type Message } from "./harness/model.js";

const SYSTEM =
  "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n" +
  "Knowledge cutoff: 2024-06\nCurrent date: 2026-03-02\n\nReasoning: medium\n\n" +
  "# Valid channels: analysis, commentary, final. Channel must be included for every message.\n" +
  "Calls to these tools must go to the commentary channel: 'functions'.<|end|>" +
  "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n# Tools\n\n## functions\n\n" +
  "namespace functions {\n\n// Run a shell command\ntype run = (_: {\ncmd: string,\n}) => any;\n\n" +
  "} // namespace functions<|end|>";

const CALL: Message = {
  role: "assistant",
  content: "",
  reasoning_content: "List them.",
  tool_calls: [{ type: "function", function: { name: "run", arguments: '{"cmd":"ls"}' } }],
};

describe("renderHarmony", () => {
  it("keeps a tool call's analysis while no later turn answers, with the header and <|call|>", () => {
    const messages: Message[] = [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Files?" },
      CALL,
      { role: "tool", content: "a.txt" },
    ];
    expect(renderHarmony(messages, TOOLS, true)).toBe(
      `${SYSTEM}<|start|>user<|message|>Files?<|end|>` +
        "<|start|>assistant<|channel|>analysis<|message|>List them.<|end|>" +
        '<|start|>assistant to=functions.run<|channel|>commentary json<|message|>{"cmd": "ls"}<|call|>' +
        '<|start|>functions.run to=assistant<|channel|>commentary<|message|>"a.txt"<|end|>' +
        "<|start|>assistant",
    );
  });

  it("drops it once a later turn answers, and ends that answer with <|end|>", () => {
    const messages: Message[] = [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Files?" },
      CALL,
      { role: "tool", content: "a.txt" },
      { role: "assistant", content: "One file.", reasoning_content: "Done." },
      { role: "user", content: "Thanks." },
    ];
    expect(renderHarmony(messages, TOOLS, true)).toBe(
      `${SYSTEM}<|start|>user<|message|>Files?<|end|>` +
        '<|start|>assistant to=functions.run<|channel|>commentary json<|message|>{"cmd": "ls"}<|call|>' +
        '<|start|>functions.run to=assistant<|channel|>commentary<|message|>"a.txt"<|end|>' +
        "<|start|>assistant<|channel|>final<|message|>One file.<|end|>" +
        "<|start|>user<|message|>Thanks.<|end|><|start|>assistant",
    );
  });

  it("writes JSON as Python's json.dumps does", () => {
    expect(pythonJson({ cmd: "ls", n: [1, 2], o: { a: null } })).toBe('{"cmd": "ls", "n": [1, 2], "o": {"a": null}}');
  });
});
