// What the page needs of a tokenizer: the text of a run of tokens (as the tokenizer itself
// decodes it) and each token on its own for the token strip, special tokens told apart.

export interface TokenPiece {
  /** The token's text; bytes that make no whole character are shown as ‹e4 bd›. */
  text: string;
  /** A special (control) token: `<|start|>`, `<|endoftext|>`, … */
  special: boolean;
  /** False for an id the tokenizer does not have. */
  known: boolean;
}

export interface TokenDecoder {
  /** What the page calls it: `o200k_harmony`, `tokenizer.json`, … */
  readonly name: string;
  decode(ids: ArrayLike<number>): string;
  piece(id: number): TokenPiece;
}

const strict = new TextDecoder("utf-8", { fatal: true });

/** Bytes as text when they are whole UTF-8 characters, else as hex (`‹e4 bd›`). */
export function bytesText(bytes: Uint8Array): string {
  try {
    return strict.decode(bytes);
  } catch {
    return `‹${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(" ")}›`;
  }
}

/** Whitespace made visible in a token cell (a newline would break the strip's layout). */
export function visible(text: string): string {
  return text.replace(/\n/g, "↵").replace(/\t/g, "⇥").replace(/\r/g, "␍");
}
