// Why a call parted from an earlier call (docs/breaks.md): a cause from the two token arrays, the
// index where they part, and what is known of the text (a decoder, a special-token predicate,
// reasoning markers). Pure and browser-safe: the CLI's `explain` and the page both use it. The
// causes of a break inside the near call's generation are in break-cause.ts.
import { breakCause, DEFAULT_REASONING } from "./break-cause.js";
import { indexOf, slice, withEmptyDecode } from "./tokens.js";
import type { BreakCause, CauseOptions, CauseResult, GlueCause, RootCause } from "./cause-types.js";

export { breakCause, DEFAULT_REASONING } from "./break-cause.js";
export { indexOf } from "./tokens.js";
export type {
  BreakCause,
  Cause,
  CauseOptions,
  CauseResult,
  GlueCause,
  ReasoningMarkers,
  RootCause,
} from "./cause-types.js";

/** In the order they are checked. */
export const BREAK_CAUSES: readonly BreakCause[] = [
  "reasoning_dropped",
  "special_as_text",
  "retokenized",
  "whitespace",
  "special_token",
  "header_rewritten",
  "rewritten",
];
export const ROOT_CAUSES: readonly RootCause[] = ["fresh", "compaction", "rewritten_prompt", "generation_cut"];

/**
 * What is wrong with what a call adds after the sequence it continues, which ended with `stop`
 * (a special token, its parent's stop token); `next` is the first token it adds.
 * `stop_duplicated` when that is `stop` again; `glue_differs` when it is another token than
 * `follows(stop)`, the one the template writes after that token (null when that is not known).
 * Null when neither, or when `stop` is not a special token.
 */
export function glueCause(
  stop: number | undefined,
  next: number | undefined,
  follows: (stop: number) => number | null,
  isSpecial: ((id: number) => boolean) | undefined,
): GlueCause | null {
  if (stop === undefined || next === undefined || isSpecial === undefined || !isSpecial(stop)) return null;
  if (next === stop) return "stop_duplicated";
  const expected = follows(stop);
  return expected !== null && next !== expected ? "glue_differs" : null;
}

/**
 * The token the template writes after `stop` in `rendered` (a prompt it rendered whole), when it
 * writes the same one every time; null when `stop` does not occur or is followed by several.
 */
export function tokenAfter(rendered: ArrayLike<number>, stop: number): number | null {
  let follows: number | null = null;
  for (let k = 0; k + 1 < rendered.length; k++) {
    if (rendered[k] !== stop) continue;
    if (follows !== null && rendered[k + 1] !== follows) return null;
    follows = rendered[k + 1]!;
  }
  return follows;
}

/** The near (or closest earlier) call's sequence: `full = prompt ++ generation`. */
export interface NearSequence {
  full: ArrayLike<number>;
  promptLength: number;
}

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
  // The prompt is the near call's prompt and the start of its generation, and stops there: it
  // parted from nothing, so it is a root, and what is wrong is that the turn was cut.
  if (at >= near.promptLength) return { cause: "generation_cut" };
  return rootCause(near, prompt, at, options);
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
  options = withEmptyDecode(options);
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
    // Reasoning blocks out first (their markers may hold special tokens), then the special tokens.
    let text = decode(generation);
    for (const markers of reasoning) {
      if (typeof markers.open === "string" && typeof markers.close === "string")
        text = textWithoutBlocks(text, markers.open, markers.close);
    }
    if (isSpecial) for (const id of new Set(generation.filter(isSpecial))) text = text.split(decode([id])).join(" ");
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
