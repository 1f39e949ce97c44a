// Hugging Face tokenizer.json files, decoded by Hugging Face's own tokenizers.js
// (@huggingface/tokenizers: the decoders of the Rust library — byte-level, metaspace, WordPiece,
// byte fallback — in 37 KB). Added tokens marked special are shown as such.
import { Tokenizer } from "@huggingface/tokenizers";
import type { TokenDecoder, TokenPiece } from "./decoder.js";

/** A tokenizer.json's parsed value: it has a `model`. */
export function isTokenizerJson(value: unknown): value is { model: object } {
  return typeof value === "object" && value !== null && typeof (value as { model?: unknown }).model === "object";
}

export function huggingFaceDecoder(name: string, json: object, config: object = {}): TokenDecoder {
  const tokenizer = new Tokenizer(json, config);
  const special = new Set<number>();
  for (const [id, token] of tokenizer.get_added_tokens_decoder()) if (token.special) special.add(id);
  return {
    name,
    decode: (ids) =>
      tokenizer.decode(Array.from(ids), { skip_special_tokens: false, clean_up_tokenization_spaces: false }),
    piece(id): TokenPiece {
      const raw = tokenizer.id_to_token(id);
      if (raw === undefined) return { text: `‹?${id}›`, special: false, known: false };
      if (special.has(id)) return { text: raw, special: true, known: true };
      const text = tokenizer.decode([id], { skip_special_tokens: false, clean_up_tokenization_spaces: false });
      // A byte of a longer character decodes to U+FFFD alone: its raw token says more.
      return { text: text.includes("\uFFFD") ? raw : text, special: false, known: true };
    },
  };
}
