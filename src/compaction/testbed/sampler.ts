// Deterministic "sampling" for the test-bed model: a seeded PRNG keyed by the prompt tokens picks
// reasoning words and a function call; the same prompt always yields the same generation.
import type { FunctionTool, OutputItem } from "../responses.js";
import { generationPrompt, itemTokens } from "./template.js";
import { mulberry32 } from "../../random.js";

/** FNV-1a over 32-bit words. */
export function hashTokens(seed: number, tokens: readonly number[]): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (const t of tokens) {
    h ^= t & 0xffff;
    h = Math.imul(h, 0x01000193) >>> 0;
    h ^= t >>> 16;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

const WORDS = [
  "the",
  "grid",
  "agent",
  "wall",
  "goal",
  "north",
  "south",
  "east",
  "west",
  "cell",
  "path",
  "blocked",
  "open",
  "maybe",
  "next",
  "try",
  "image",
  "shows",
  "red",
  "square",
  "near",
  "far",
  "corner",
  "edge",
  "step",
  "plan",
  "again",
  "left",
  "right",
  "ahead",
];

export interface SampleOptions {
  /** Inclusive range of reasoning words per generation; [0, 0] disables reasoning. */
  reasoningWords: [number, number];
  /** Function calls per response with tools (parallel tool calls); default 1. */
  parallelCalls?: number;
}

export interface Sample {
  output: OutputItem[];
  generationIds: number[];
  logprobs: number[];
}

function hex(rand: () => number): string {
  return (
    Math.floor(rand() * 0xffffffff)
      .toString(16)
      .padStart(8, "0") +
    Math.floor(rand() * 0xffffffff)
      .toString(16)
      .padStart(8, "0")
  );
}

function argumentsFor(tool: FunctionTool, rand: () => number): string {
  const props = (tool.parameters.properties ?? {}) as Record<string, { type?: string; enum?: unknown[] }>;
  const args: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(props)) {
    if (Array.isArray(schema.enum) && schema.enum.length)
      args[key] = schema.enum[Math.floor(rand() * schema.enum.length)];
    else if (schema.type === "integer" || schema.type === "number") args[key] = Math.floor(rand() * 4);
    else if (schema.type === "boolean") args[key] = rand() < 0.5;
    else args[key] = WORDS[Math.floor(rand() * WORDS.length)];
  }
  return JSON.stringify(args);
}

/**
 * One generation for a prompt. With tools it reasons, then calls a tool (the first tool most of
 * the time); without tools it reasons, then answers. Token IDs are the template's own rendering
 * of the output items, minus the generation prompt the request already ended with.
 */
export function sample(
  seed: number,
  prompt: readonly number[],
  tools: readonly FunctionTool[] | undefined,
  options: SampleOptions,
): Sample {
  const rand = mulberry32(hashTokens(seed, prompt));
  const id = hex(rand);
  const output: OutputItem[] = [];
  const [lo, hi] = options.reasoningWords;
  const words = lo + Math.floor(rand() * (hi - lo + 1));
  if (words > 0) {
    const text = Array.from({ length: words }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(" ");
    output.push({
      type: "reasoning",
      id: `rs_${id}`,
      summary: [],
      content: [{ type: "reasoning_text", text: text[0].toUpperCase() + text.slice(1) + "." }],
      status: "completed",
    });
  }
  if (tools?.length) {
    const calls = options.parallelCalls ?? 1;
    for (let k = 0; k < calls; k++) {
      const tool = rand() < 0.8 ? tools[0] : tools[Math.floor(rand() * tools.length)];
      const suffix = k === 0 ? id : `${id}_${k}`;
      output.push({
        type: "function_call",
        id: `fc_${suffix}`,
        call_id: `call_${suffix}`,
        name: tool.name,
        arguments: argumentsFor(tool, rand),
        status: "completed",
      });
    }
  } else {
    output.push({
      type: "message",
      role: "assistant",
      id: `msg_${id}`,
      content: [{ type: "output_text", text: "Done." }],
      status: "completed",
    });
  }
  const names = new Map<string, string>();
  const skip = generationPrompt().length;
  const generationIds = output.flatMap((item) => itemTokens(item, names)).slice(skip);
  const logprobs = generationIds.map(() => Math.fround(-(0.001 + rand() * 3)));
  return { output, generationIds, logprobs };
}
