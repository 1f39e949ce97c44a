// A few tokens of text for a terminal: special tokens marked ⟦…⟧, whitespace made visible.
import type { TokenDecoder } from "../tokenizer/decoder.js";

/** One token's text: a special token as ⟦<|im_end|>⟧, spaces as ·, newlines as ↵, tabs as ⇥. */
export function tokenText(decoder: TokenDecoder, id: number): string {
  const piece = decoder.piece(id);
  if (piece.special) return `⟦${piece.text}⟧`;
  return piece.text.replace(/ /g, "·").replace(/\n/g, "↵").replace(/\t/g, "⇥").replace(/\r/g, "␍");
}

/** The text of `ids`, token by token (see tokenText). */
export function windowText(decoder: TokenDecoder, ids: ArrayLike<number>): string {
  let out = "";
  for (let i = 0; i < ids.length; i++) out += tokenText(decoder, ids[i]!);
  return out;
}

/** Token ids as text: `50 11 12`. */
export function idsText(ids: ArrayLike<number>): string {
  return Array.from(ids).join(" ");
}
