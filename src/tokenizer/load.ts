// A tokenizer from a file's text: a tokenizer.json (Hugging Face) or a .tiktoken rank file (an
// OpenAI encoding, whose special tokens are named by `encoding`, else by the file's name).
import type { TokenDecoder } from "./decoder.js";
import { isOpenAiEncoding, type OpenAiEncoding } from "./encodings.js";
import { huggingFaceDecoder } from "./huggingface.js";
import { tokenizerFileKind } from "./file-kind.js";
import { openAiDecoder, parseTiktoken } from "./openai.js";

/** The encoding a rank file's name says (`o200k_base.tiktoken`), if any. */
function encodingOfName(name: string): OpenAiEncoding | null {
  const stem = name.replace(/^.*[/\\]/, "").replace(/\.tiktoken$/, "");
  return isOpenAiEncoding(stem) ? stem : null;
}

export function tokenizerFromText(name: string, text: string, encoding?: OpenAiEncoding): TokenDecoder {
  const kind = tokenizerFileKind(name, text);
  if (kind.kind === "json") return huggingFaceDecoder(name.replace(/^.*[/\\]/, ""), kind.value);
  const chosen = encoding ?? encodingOfName(name);
  if (chosen === null)
    throw new Error(
      `${name}: a .tiktoken file needs its encoding's name (pick it first, or name the file <encoding>.tiktoken)`,
    );
  return openAiDecoder(chosen, parseTiktoken(text));
}
