// The names of explain's causes and the shapes the classifiers share (docs/breaks.md). Its own
// module so that cause.ts and break-cause.ts both import it, never each other.

/** A break inside the near call's generation (SPEC's `prefix_break`, and any such parting). */
export type BreakCause =
  | "reasoning_dropped"
  | "special_as_text"
  | "retokenized"
  | "whitespace"
  | "special_token"
  | "header_rewritten"
  | "rewritten";
/**
 * A root: it parts from the closest earlier call inside that call's prompt (or shares nothing),
 * or its prompt stops inside that call's generation (`generation_cut`).
 */
export type RootCause = "fresh" | "compaction" | "rewritten_prompt" | "generation_cut";
/**
 * A call that continues its parent but adds the wrong token right after the stop token the
 * parent's generation ended with: that stop token again (`stop_duplicated`), or another token than
 * the one the template writes there (`glue_differs`). Not a break, but a token trained as prompt
 * that the model would never have seen.
 */
export type GlueCause = "stop_duplicated" | "glue_differs";
/** `unknown`: telling the causes apart needs text, and no decoder was given. */
export type Cause = BreakCause | RootCause | GlueCause | "unknown";

/** A reasoning block's markers: token-id sequences, or text (text needs a decoder). */
export interface ReasoningMarkers {
  open: readonly number[] | string;
  close: readonly number[] | string;
}

export interface CauseOptions {
  /** Text of a run of tokens, special tokens written out (`<|im_end|>`), as the tokenizer decodes. */
  decode?: (ids: readonly number[]) => string;
  /** Whether a token is a special (control) token: an end of turn, a stop token. */
  isSpecial?: (id: number) => boolean;
  /** Reasoning markers; default DEFAULT_REASONING when `decode` is given, else none. */
  reasoning?: readonly ReasoningMarkers[];
}

export interface CauseResult {
  cause: Cause;
  /** A break's later differences inside the near call's generation, each with its cause, in order. */
  also?: BreakCause[];
  /** When `cause` is `unknown` or could be narrowed with more: what was not known. */
  unknown?: string;
}
