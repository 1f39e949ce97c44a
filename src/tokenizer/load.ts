// A tokenizer from a file's text: a tokenizer.json (Hugging Face) or a .tiktoken rank file (an
// OpenAI encoding, whose special tokens are named by `encoding`, else by the file's name).
import type { TokenDecoder } from "./decoder.js";
import { isOpenAiEncoding, type OpenAiEncoding } from "./encodings.js";
import { huggingFaceDecoder, isTokenizerJson } from "./huggingface.js";
import { openAiDecoder, parseTiktoken } from "./openai.js";

/** The encoding a rank file's name says (`o200k_base.tiktoken`), if any. */
function encodingOfName(name: string): OpenAiEncoding | null {
  const stem = name.replace(/^.*[/\\]/, "").replace(/\.tiktoken$/, "");
  return isOpenAiEncoding(stem) ? stem : null;
}

export function tokenizerFromText(name: string, text: string, encoding?: OpenAiEncoding): TokenDecoder {
  if (/^\s*\{/.test(text)) {
    const value: unknown = JSON.parse(text);
    if (!isTokenizerJson(value)) throw new Error(`${name}: a JSON file, but no tokenizer.json (it has no "model")`);
    return huggingFaceDecoder(name.replace(/^.*[/\\]/, ""), value);
  }
  const chosen = encoding ?? encodingOfName(name);
  if (chosen === null)
    throw new Error(
      `${name}: a .tiktoken file needs its encoding's name (pick it first, or name the file <encoding>.tiktoken)`,
    );
  return openAiDecoder(chosen, parseTiktoken(text));
}
