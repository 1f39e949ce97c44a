// Why a call parted from an earlier call (docs/breaks.md): a cause from the two token arrays, the
// index where they part, and what is known of the text (a decoder, a special-token predicate,
// reasoning markers). Pure and browser-safe: the CLI's `explain` and the page both use it.

/** A break inside the near call's generation (SPEC's `prefix_break`, and any such parting). */
export type BreakCause = "reasoning_dropped" | "retokenized" | "whitespace" | "special_token" | "rewritten";
/** A root that parts from the closest earlier call inside that call's prompt (or shares nothing). */
export type RootCause = "fresh" | "compaction" | "rewritten_prompt";
/** `unknown`: telling the causes apart needs text, and no decoder was given. */
export type Cause = BreakCause | RootCause | "unknown";

export const BREAK_CAUSES: readonly BreakCause[] = [
  "reasoning_dropped",
  "retokenized",
  "whitespace",
  "special_token",
  "rewritten",
];
export const ROOT_CAUSES: readonly RootCause[] = ["fresh", "compaction", "rewritten_prompt"];

/** A reasoning block's markers: token-id sequences, or text (text needs a decoder). */
export interface ReasoningMarkers {
  open: readonly number[] | string;
  close: readonly number[] | string;
}

/** Text markers used when a decoder is given and no markers are: `<think>` and gpt-oss's analysis channel. */
export const DEFAULT_REASONING: readonly ReasoningMarkers[] = [
  { open: "<think>", close: "</think>" },
  // gpt-oss: `<|channel|>` is shared by the analysis and the final message, so the break is at
  // `analysis`; the block ends where the final channel's name begins.
  { open: "analysis<|message|>", close: "<|end|><|start|>assistant<|channel|>" },
];

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
  /** When `cause` is `unknown` or could be narrowed with more: what was not known. */
  unknown?: string;
}

/** The near (or closest earlier) call's sequence: `full = prompt ++ generation`. */
export interface NearSequence {
  full: ArrayLike<number>;
  promptLength: number;
}

/** How many tokens either side the text comparisons look at. */
const WINDOW = 64;
/** How many characters of the text after a difference must agree. */
const AGREE_CHARS = 24;

/**
 * Classifies how `prompt` (a later call's prompt) parts from `near` at `at` (their longest common
 * prefix): a break inside the near call's generation, or, when `at` falls inside its prompt, a
 * root's cause.
 */
export function classify(
  near: NearSequence,
  prompt: ArrayLike<number>,
  at: number,
  options: CauseOptions = {},
): CauseResult {
  if (at >= near.promptLength && at < near.full.length && at < prompt.length)
    return breakCause(near.full, prompt, at, options);
  if (at >= near.promptLength) return { cause: "rewritten" }; // prompt ends inside the generation
  return rootCause(near, prompt, at, options);
}

/** The cause of a break at `at`, inside the generation of the call whose full sequence is `full`. */
export function breakCause(
  full: ArrayLike<number>,
  prompt: ArrayLike<number>,
  at: number,
  options: CauseOptions = {},
): CauseResult {
  const { decode, isSpecial } = options;
  const reasoning = options.reasoning ?? (decode ? DEFAULT_REASONING : []);
  if (reasoning.some((markers) => reasoningDropped(full, prompt, at, markers, decode))) {
    return { cause: "reasoning_dropped" };
  }
  if (decode) {
    if (sameText(full, prompt, at, decode)) return { cause: "retokenized" };
    if (whitespaceOnly(full, prompt, at, decode)) return { cause: "whitespace" };
  }
  const special = isSpecial;
  if (special && specialToken(full, prompt, at, special, decode)) return { cause: "special_token" };
  if (!decode) {
    const needText = special
      ? "retokenized, whitespace or rewritten"
      : "retokenized, whitespace, special_token or rewritten";
    return {
      cause: "unknown",
      unknown:
        reasoning.length === 0
          ? `reasoning_dropped needs reasoning markers; ${needText} need a tokenizer`
          : `${needText}: telling them apart needs a tokenizer`,
    };
  }
  return { cause: "rewritten" };
}

/** A parting this close to the end of the near call's prompt is in the glue before its generation. */
const GLUE = 8;

/**
 * The cause of a root that parts from its closest earlier call `near` at `at`, inside `near`'s
 * prompt: `rewritten_prompt` when the rest of `near`'s prompt comes back later in `prompt` (the
 * same history goes on after a rewritten stretch), or when it parts in the last few tokens before
 * `near`'s generation (the glue) and goes on with that generation; `compaction` when `near`'s
 * generation (a summary) is in `prompt`; else `fresh`.
 */
export function rootCause(
  near: NearSequence,
  prompt: ArrayLike<number>,
  at: number,
  options: CauseOptions = {},
): CauseResult {
  const rest = near.promptLength - at;
  if (rest > GLUE && historyResumes(near, prompt, at) !== null) return { cause: "rewritten_prompt" };
  if (holdsGeneration(near, prompt, options)) return { cause: rest <= GLUE ? "rewritten_prompt" : "compaction" };
  return { cause: "fresh" };
}

/**
 * Where in `prompt` `near`'s generation would begin if the history goes on after a rewritten
 * stretch from `at` (inside `near`'s prompt): found by up to 16 tokens of `near`'s prompt before
 * its glue, from the later half of the stretch; null when they do not come back. A parting in the
 * glue itself resumes at `at`.
 */
export function historyResumes(near: NearSequence, prompt: ArrayLike<number>, at: number): number | null {
  if (near.promptLength - at <= GLUE) return at;
  const end = near.promptLength - GLUE;
  const start = Math.max(at + ((near.promptLength - at) >> 1), end - 16);
  const chunk = slice(near.full, start, end);
  if (chunk.length < 4) return null;
  const found = indexOf(prompt, chunk, at);
  return found < 0 ? null : found + (near.promptLength - start);
}

/** Whether `prompt` holds the core of `near`'s generation: its text without reasoning and specials. */
function holdsGeneration(near: NearSequence, prompt: ArrayLike<number>, options: CauseOptions): boolean {
  let generation = slice(near.full, near.promptLength, near.full.length);
  const { decode, isSpecial } = options;
  const reasoning = options.reasoning ?? (decode ? DEFAULT_REASONING : []);
  for (const markers of reasoning) {
    if (typeof markers.open === "string" || typeof markers.close === "string") continue;
    generation = withoutBlocks(generation, markers.open, markers.close);
  }
  if (decode) {
    let text = decode(isSpecial ? generation.filter((id) => !isSpecial(id)) : generation);
    for (const markers of reasoning) {
      if (typeof markers.open === "string" && typeof markers.close === "string")
        text = textWithoutBlocks(text, markers.open, markers.close);
    }
    text = text.trim();
    if (text.length === 0) return false;
    // Its middle (the new context may quote it in part: cut, or with other text around it).
    const half = Math.min(16, text.length >> 2);
    const chunk = text.slice((text.length >> 1) - half, (text.length >> 1) + half + 1);
    return decode(Array.from(prompt)).includes(chunk);
  }
  // Tokens alone: a run from the middle of the generation (its last token, a stop token, left out).
  const body = isSpecial ? generation.filter((id) => !isSpecial(id)) : generation.slice(0, -1);
  if (body.length === 0) return false;
  const start = Math.max(0, (body.length >> 1) - 4);
  return indexOf(prompt, body.slice(start, start + 8), 0) >= 0;
}

/**
 * `reasoning_dropped`: `full` from `at` holds a reasoning block (after whitespace at most), and
 * `prompt` goes on at `at` with what follows the block.
 */
function reasoningDropped(
  full: ArrayLike<number>,
  prompt: ArrayLike<number>,
  at: number,
  markers: ReasoningMarkers,
  decode: CauseOptions["decode"],
): boolean {
  const { open, close } = markers;
  if (typeof open === "string" || typeof close === "string") {
    if (!decode) return false;
    const openText = typeof open === "string" ? open : decode(open);
    const closeText = typeof close === "string" ? close : decode(close);
    const generation = decode(slice(full, at, full.length));
    const start = generation.indexOf(openText);
    if (start < 0 || generation.slice(0, start).trim() !== "") return false;
    const end = generation.indexOf(closeText, start + openText.length);
    if (end < 0) return true; // the block runs to the end of the generation: all of it dropped
    const after = generation.slice(end + closeText.length).trimStart();
    return agrees(after, decode(slice(prompt, at, at + WINDOW)).trimStart());
  }
  const start = indexOf(full, open, at);
  if (start < 0 || !blank(full, at, start, decode)) return false;
  let end = indexOf(full, close, start + open.length);
  if (end < 0) return true;
  end += close.length;
  if (decode) {
    const after = decode(slice(full, end, Math.min(full.length, end + WINDOW))).trimStart();
    return agrees(after, decode(slice(prompt, at, at + WINDOW)).trimStart());
  }
  if (end === full.length) return true;
  return tokensAgree(full, end, prompt, at);
}

/** `retokenized`: the stretch that differs decodes to the same text on both sides. */
function sameText(
  full: ArrayLike<number>,
  prompt: ArrayLike<number>,
  at: number,
  decode: (ids: readonly number[]) => string,
): boolean {
  let i = 1; // tokens of full from at
  let j = 1; // tokens of prompt from at
  while (i <= WINDOW && j <= WINDOW && at + i <= full.length && at + j <= prompt.length) {
    const a = decode(slice(full, at, at + i));
    const b = decode(slice(prompt, at, at + j));
    if (a === b) return true;
    const shorter = a.length <= b.length ? a : b;
    const longer = a.length <= b.length ? b : a;
    if (!longer.startsWith(shorter.replace(/\uFFFD+$/, ""))) return false;
    if (a.length <= b.length) {
      if (at + i === full.length) return true; // the generation ends; its text goes on in prompt
      i++;
    } else j++;
  }
  return false;
}

/** `whitespace`: with all whitespace removed, the two sides agree. */
function whitespaceOnly(
  full: ArrayLike<number>,
  prompt: ArrayLike<number>,
  at: number,
  decode: (ids: readonly number[]) => string,
): boolean {
  const a = decode(slice(full, at, Math.min(full.length, at + WINDOW))).replace(/\s+/g, "");
  const b = decode(slice(prompt, at, at + WINDOW)).replace(/\s+/g, "");
  const n = Math.min(a.length, b.length, AGREE_CHARS * 2);
  if (a.length === 0) return true; // only whitespace was left of the generation
  return n > 0 && a.slice(0, n) === b.slice(0, n);
}

/** `special_token`: a special token missing, added or replaced, and the sides agree after it. */
function specialToken(
  full: ArrayLike<number>,
  prompt: ArrayLike<number>,
  at: number,
  isSpecial: (id: number) => boolean,
  decode: CauseOptions["decode"],
): boolean {
  const after = (i: number, j: number) =>
    decode
      ? i >= full.length ||
        agrees(decode(slice(full, i, Math.min(full.length, i + WINDOW))), decode(slice(prompt, j, j + WINDOW)))
      : i >= full.length || tokensAgree(full, i, prompt, j);
  const lost = isSpecial(full[at]!);
  const added = isSpecial(prompt[at]!);
  return (lost && after(at + 1, at)) || (added && after(at, at + 1)) || (lost && added && after(at + 1, at + 1));
}

/**
 * `b` goes on as `a` does: they agree on `a`'s first AGREE_CHARS characters (all, if fewer), or
 * on at least 8 (what follows may hold another change, such as a replaced stop token).
 */
function agrees(a: string, b: string): boolean {
  let k = 0;
  while (k < a.length && k < b.length && a[k] === b[k]) k++;
  return k >= Math.min(a.length, AGREE_CHARS) || k >= 8;
}

/** `a[i…]` and `b[j…]` agree on up to 8 tokens (as far as `a` goes). */
function tokensAgree(a: ArrayLike<number>, i: number, b: ArrayLike<number>, j: number): boolean {
  const n = Math.min(8, a.length - i);
  if (j + n > b.length) return false;
  for (let k = 0; k < n; k++) if (a[i + k] !== b[j + k]) return false;
  return true;
}

/** `full[from:to]` is empty or (with a decoder) only whitespace. */
function blank(full: ArrayLike<number>, from: number, to: number, decode: CauseOptions["decode"]): boolean {
  if (from === to) return true;
  return decode !== undefined && to - from <= 4 && decode(slice(full, from, to)).trim() === "";
}

/** The first index ≥ `from` where `needle` occurs in `hay`, or -1. */
export function indexOf(hay: ArrayLike<number>, needle: readonly number[], from: number): number {
  if (needle.length === 0) return from <= hay.length ? from : -1;
  const first = needle[0];
  outer: for (let i = from; i + needle.length <= hay.length; i++) {
    if (hay[i] !== first) continue;
    for (let k = 1; k < needle.length; k++) if (hay[i + k] !== needle[k]) continue outer;
    return i;
  }
  return -1;
}

function slice(a: ArrayLike<number>, from: number, to: number): number[] {
  const end = Math.min(to, a.length);
  const out: number[] = [];
  for (let i = Math.max(0, from); i < end; i++) out.push(a[i]!);
  return out;
}

function withoutBlocks(tokens: number[], open: readonly number[], close: readonly number[]): number[] {
  let out = tokens;
  for (let start = indexOf(out, open, 0); start >= 0; start = indexOf(out, open, start)) {
    const end = indexOf(out, close, start + open.length);
    out = end < 0 ? out.slice(0, start) : [...out.slice(0, start), ...out.slice(end + close.length)];
  }
  return out;
}

function textWithoutBlocks(text: string, open: string, close: string): string {
  let out = text;
  for (let start = out.indexOf(open); start >= 0; start = out.indexOf(open, start)) {
    const end = out.indexOf(close, start + open.length);
    out = end < 0 ? out.slice(0, start) : out.slice(0, start) + out.slice(end + close.length);
  }
  return out;
}
