// OpenAI encodings from a .tiktoken rank file (one `base64-bytes rank` a line: the format
// tiktoken and gpt-tokenizer ship) and the encoding's special tokens from gpt-tokenizer's own
// tables. Decoding is concatenating each token's bytes, then UTF-8, as gpt-tokenizer does; the
// ranks themselves (megabytes) are never part of the page: `view` serves them.
import { getEncodingParams } from "gpt-tokenizer/modelParams";
import { bytesText, type TokenDecoder, type TokenPiece } from "./decoder.js";
import type { OpenAiEncoding } from "./encodings.js";

const text = new TextDecoder();
const utf8 = new TextEncoder();

function base64Bytes(b64: string): Uint8Array {
  const raw = atob(b64);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

/** Token bytes by rank from a .tiktoken file; throws on a line that is not `base64 rank`. */
export function parseTiktoken(file: string): Uint8Array[] {
  const ranks: Uint8Array[] = [];
  let lineNumber = 0;
  for (const line of file.split("\n")) {
    lineNumber++;
    if (line.trim() === "") continue;
    const match = /^([A-Za-z0-9+/=]+) (\d+)\r?$/.exec(line);
    if (match === null) throw new Error(`not a .tiktoken file: line ${lineNumber} is not "base64 rank"`);
    ranks[Number(match[2])] = base64Bytes(match[1]);
  }
  if (ranks.length === 0) throw new Error("not a .tiktoken file: no ranks");
  return ranks;
}

/** The special tokens of an encoding, id → text (a later name for the same id wins, as in gpt-tokenizer). */
export function specialTokens(encoding: OpenAiEncoding): Map<number, string> {
  const { specialTokensEncoder } = getEncodingParams(encoding, () => []);
  const out = new Map<number, string>();
  for (const [name, id] of specialTokensEncoder) out.set(id, name);
  return out;
}

export function openAiDecoder(encoding: OpenAiEncoding, ranks: Uint8Array[]): TokenDecoder {
  const specials = specialTokens(encoding);
  const bytesOf = (id: number): Uint8Array | undefined => {
    const special = specials.get(id);
    return special !== undefined ? utf8.encode(special) : ranks[id];
  };
  return {
    name: encoding,
    decode(ids) {
      const parts: Uint8Array[] = [];
      let length = 0;
      for (let i = 0; i < ids.length; i++) {
        const bytes = bytesOf(ids[i]) ?? utf8.encode(`‹?${ids[i]}›`);
        parts.push(bytes);
        length += bytes.length;
      }
      const all = new Uint8Array(length);
      let at = 0;
      for (const part of parts) {
        all.set(part, at);
        at += part.length;
      }
      return text.decode(all);
    },
    piece(id): TokenPiece {
      const special = specials.get(id);
      if (special !== undefined) return { text: special, special: true, known: true };
      const bytes = ranks[id];
      return bytes === undefined
        ? { text: `‹?${id}›`, special: false, known: false }
        : { text: bytesText(bytes), special: false, known: true };
    },
  };
}
