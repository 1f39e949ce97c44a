// The OpenAI encodings gpt-tokenizer knows, and which of its .tiktoken rank files each decodes
// with (an encoding's special tokens come from gpt-tokenizer's tables; see openai.ts). Shared by
// `callforest view` (which serves the rank files) and the page (which lists the names).

/** Encoding name → the rank file it uses (gpt-tokenizer/data/<file>.tiktoken). */
export const OPENAI_ENCODINGS = {
  o200k_harmony: "o200k_base",
  o200k_base: "o200k_base",
  cl100k_base: "cl100k_base",
  p50k_base: "p50k_base",
  p50k_edit: "p50k_base",
  r50k_base: "r50k_base",
  gpt2: "r50k_base",
} as const;

export type OpenAiEncoding = keyof typeof OPENAI_ENCODINGS;

export function isOpenAiEncoding(name: string): name is OpenAiEncoding {
  return Object.hasOwn(OPENAI_ENCODINGS, name);
}

/** Where `view` serves an encoding's ranks, relative to the page. */
export function openAiRanksPath(name: OpenAiEncoding): string {
  return `tokenizers/${name}.tiktoken`;
}
