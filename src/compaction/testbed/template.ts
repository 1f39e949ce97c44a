// The test-bed model's chat template (harmony-style) and tokenizer. It renders Responses `input`
// items to token IDs with a real BPE (gpt-tokenizer's o200k_base) and, like real reasoning-model
// templates, drops earlier reasoning when it re-renders history.
import { loadFeature } from "../../optional-dependency.js";
import { canonicalJson } from "../digest.js";
import { projectVisionTokens } from "../guards.js";
import { dataUrlImage, imageDimensions } from "../media.js";
import type { FunctionTool, InputItem } from "../responses.js";

// An optional peer: a missing one is one line naming what to install (src/optional-dependency.ts).
const { encode } = await loadFeature(
  "the compaction test bed (callforest/compaction/testbed)",
  () => import("gpt-tokenizer/encoding/o200k_base"),
);

/** gpt-oss harmony special token IDs; image tokens use three reserved IDs. */
export const SPECIAL = {
  return: 200002,
  constrain: 200003,
  channel: 200005,
  start: 200006,
  end: 200007,
  message: 200008,
  call: 200012,
  imageBegin: 200030,
  imagePad: 200031,
  imageEnd: 200032,
} as const;

export const PATCH_SIZE = 16;

const textCache = new Map<string, number[]>();

/** BPE of plain text; special-token look-alikes in the text stay plain text. */
export function encodeText(text: string): number[] {
  let ids = textCache.get(text);
  if (!ids) {
    ids = encode(text, { disallowedSpecial: new Set() });
    if (textCache.size > 50_000) textCache.clear();
    textCache.set(text, ids);
  }
  return ids;
}

function decodeBase64(text: string): Uint8Array {
  return new Uint8Array(Buffer.from(text, "base64"));
}

const imageTokenCache = new Map<string, number>();

/** Vision tokens of a data-URL PNG, JPEG or WebP image (one per 16-pixel patch). */
export function imageTokenCount(url: string): number {
  let n = imageTokenCache.get(url);
  if (n === undefined) {
    const image = dataUrlImage(url);
    if (!image) throw new TemplateError(`input_image.image_url must be a base64 PNG, JPEG or WebP data URL`);
    let size: { width: number; height: number };
    try {
      size = imageDimensions(decodeBase64(image.base64), image.mime);
    } catch (error) {
      throw new TemplateError((error as Error).message);
    }
    const { width, height } = size;
    n = projectVisionTokens(width, height, PATCH_SIZE);
    if (imageTokenCache.size > 10_000) imageTokenCache.clear();
    imageTokenCache.set(url, n);
  }
  return n;
}

export class TemplateError extends Error {}

/** `<|start|>assistant`: what the prompt ends with, and what each assistant chunk starts with. */
export function generationPrompt(): number[] {
  return [SPECIAL.start, ...encodeText("assistant")];
}

function header(instructions: string | undefined, tools: readonly FunctionTool[] | undefined): number[][] {
  const chunks = [
    [
      SPECIAL.start,
      ...encodeText("system"),
      SPECIAL.message,
      ...encodeText(instructions ?? "You are a helpful assistant."),
      SPECIAL.end,
    ],
  ];
  if (tools?.length) {
    const text =
      "# Tools\n" +
      tools.map((t) => `functions.${t.name}: ${t.description}\n${canonicalJson(t.parameters)}`).join("\n");
    chunks.push([SPECIAL.start, ...encodeText("developer"), SPECIAL.message, ...encodeText(text), SPECIAL.end]);
  }
  return chunks;
}

/** Tokens of one item; `names` maps call_id to function name for function outputs. */
export function itemTokens(item: InputItem, names: ReadonlyMap<string, string>): number[] {
  switch (item.type) {
    case "message": {
      if (item.role === "assistant") {
        const text = item.content.map((c) => c.text).join("");
        return [
          ...generationPrompt(),
          SPECIAL.channel,
          ...encodeText("final"),
          SPECIAL.message,
          ...encodeText(text),
          SPECIAL.end,
        ];
      }
      const out = [SPECIAL.start, ...encodeText(item.role), SPECIAL.message];
      for (const part of item.content) {
        if (part.type === "input_text") append(out, encodeText(part.text));
        else
          out.push(
            SPECIAL.imageBegin,
            ...new Array<number>(imageTokenCount(part.image_url)).fill(SPECIAL.imagePad),
            SPECIAL.imageEnd,
          );
      }
      out.push(SPECIAL.end);
      return out;
    }
    case "reasoning": {
      const text = item.content.map((c) => c.text).join("");
      return [
        ...generationPrompt(),
        SPECIAL.channel,
        ...encodeText("analysis"),
        SPECIAL.message,
        ...encodeText(text),
        SPECIAL.end,
      ];
    }
    case "function_call":
      return [
        ...generationPrompt(),
        SPECIAL.channel,
        ...encodeText(`commentary to=functions.${item.name} `),
        SPECIAL.constrain,
        ...encodeText("json"),
        SPECIAL.message,
        ...encodeText(item.arguments),
        SPECIAL.call,
      ];
    case "function_call_output": {
      const name = names.get(item.call_id) ?? "tool";
      return [
        SPECIAL.start,
        ...encodeText(`functions.${name} to=assistant`),
        SPECIAL.channel,
        ...encodeText("commentary"),
        SPECIAL.message,
        ...encodeText(item.output),
        SPECIAL.end,
      ];
    }
  }
}

function callNames(items: readonly InputItem[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const item of items) if (item.type === "function_call") names.set(item.call_id, item.name);
  return names;
}

export interface RenderRequest {
  input: readonly InputItem[];
  instructions?: string;
  tools?: readonly FunctionTool[];
}

function isObservation(item: InputItem): boolean {
  return item.type === "function_call_output" || (item.type === "message" && item.role === "user");
}

/**
 * The template's own rendering: header, items, generation prompt. Reasoning that an observation
 * follows belongs to an earlier turn and is dropped, as reasoning-model templates do.
 */
export function renderPrompt(req: RenderRequest): number[] {
  const names = callNames(req.input);
  const out = header(req.instructions, req.tools).flat();
  let lastObservation = -1;
  req.input.forEach((item, i) => {
    if (isObservation(item)) lastObservation = i;
  });
  req.input.forEach((item, i) => {
    if (item.type === "reasoning" && i < lastObservation) return;
    append(out, itemTokens(item, names));
  });
  append(out, generationPrompt());
  return out;
}

function startsWithAt(whole: readonly number[], at: number, part: readonly number[]): boolean {
  if (at + part.length > whole.length) return false;
  for (let i = 0; i < part.length; i++) if (whole[at + i] !== part[i]) return false;
  return true;
}

/**
 * Honours `required_prefix_token_ids`: the prompt is the prefix itself, then the template's
 * rendering of the items the prefix does not cover. The prefix must cover whole items: each item
 * either matches the prefix where it stands, or is reasoning the template dropped when that part
 * was first rendered. Throws TemplateError naming how far the match got.
 */
export function renderWithPrefix(req: RenderRequest, prefix: readonly number[]): number[] {
  const names = callNames(req.input);
  let at = 0;
  for (const chunk of header(req.instructions, req.tools)) {
    if (!startsWithAt(prefix, at, chunk))
      throw new TemplateError(
        `required_prefix_token_ids does not match the rendered instructions/tools ` +
          `(matched ${at} of ${prefix.length} prefix tokens)`,
      );
    at += chunk.length;
  }
  let covered = 0;
  while (covered < req.input.length && at < prefix.length) {
    const item = req.input[covered];
    const tokens = itemTokens(item, names);
    if (startsWithAt(prefix, at, tokens)) at += tokens.length;
    else if (item.type !== "reasoning") break;
    covered++;
  }
  if (at !== prefix.length) {
    throw new TemplateError(
      `required_prefix_token_ids does not match the input items ` +
        `(matched ${at} of ${prefix.length} prefix tokens over ${covered} of ${req.input.length} items)`,
    );
  }
  const out = [...prefix];
  const rest = req.input.slice(covered);
  let lastObservation = -1;
  rest.forEach((item, i) => {
    if (isObservation(item)) lastObservation = i;
  });
  rest.forEach((item, i) => {
    if (item.type === "reasoning" && i < lastObservation) return;
    append(out, itemTokens(item, names));
  });
  append(out, generationPrompt());
  return out;
}

/** out.push(...tokens) without spreading: a long text has more tokens than a call takes arguments. */
function append(out: number[], tokens: readonly number[]): void {
  for (const token of tokens) out.push(token);
}
