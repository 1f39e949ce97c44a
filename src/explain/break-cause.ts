// The causes of a break inside the near call's generation (docs/breaks.md). A template often
// changes a turn in more than one place (gpt-oss's drops the analysis, rewrites the tool call's
// header and serializes its arguments again), so after the first difference the two sides are
// brought back in step where that cause ends, and each later difference inside the generation is
// named too: the first cause, then `also`.
import { indexOf, slice, tokensAgree, withEmptyDecode } from "./tokens.js";
import type { BreakCause, CauseOptions, CauseResult, ReasoningMarkers } from "./cause-types.js";

/** How many tokens either side the text comparisons look at. */
const WINDOW = 64;
/** How many characters of the text after a reasoning block or a special token must agree. */
const AGREE_CHARS = 24;
/** At most this many later causes are listed. */
const MAX_ALSO = 8;
/** A message header that was rewritten is at most this many tokens on either side. */
const HEADER = 16;

/** Text markers used when a decoder is given and no markers are: `<think>` and gpt-oss's analysis channel. */
export const DEFAULT_REASONING: readonly ReasoningMarkers[] = [
  { open: "<think>", close: "</think>" },
  // gpt-oss: a turn that opens on its analysis. When the template drops it and renders the turn's
  // next message otherwise, the sides part at the `<|channel|>` that opens the turn.
  { open: "<|channel|>analysis<|message|>", close: "<|end|><|start|>assistant" },
  // `<|channel|>` is shared by the analysis and the final message, so the break is at `analysis`;
  // the block ends where the final channel's name begins.
  { open: "analysis<|message|>", close: "<|end|><|start|>assistant<|channel|>" },
];

/** One difference: its cause, and where the two sides are in step again (null: not known). */
interface Step {
  cause: BreakCause;
  resume: { i: number; j: number } | null;
}

interface Sides {
  full: ArrayLike<number>;
  prompt: ArrayLike<number>;
  options: CauseOptions;
  reasoning: readonly ReasoningMarkers[];
}

/**
 * The cause of a break at `at`, inside the generation of the call whose full sequence is `full`,
 * and (`also`) the causes of the later differences inside that generation, in order.
 */
export function breakCause(
  full: ArrayLike<number>,
  prompt: ArrayLike<number>,
  at: number,
  options: CauseOptions = {},
): CauseResult {
  const sides: Sides = {
    full,
    prompt,
    options: withEmptyDecode(options),
    reasoning: options.reasoning ?? (options.decode ? DEFAULT_REASONING : []),
  };
  const first = stepAt(sides, at, at);
  if (first === null) return unknownCause(sides);
  const also: BreakCause[] = [];
  let resume = first.resume;
  while (resume !== null && also.length < MAX_ALSO) {
    let { i, j } = resume;
    while (i < full.length && j < prompt.length && full[i] === prompt[j]) {
      i++;
      j++;
    }
    if (i >= full.length || j >= prompt.length) break; // the generation is resent to its end
    const step = stepAt(sides, i, j);
    if (step === null) break;
    also.push(step.cause);
    resume = step.resume;
  }
  return also.length === 0 ? { cause: first.cause } : { cause: first.cause, also };
}

/** Without a decoder: what could not be told. */
function unknownCause({ options, reasoning }: Sides): CauseResult {
  const needText = options.isSpecial
    ? "special_as_text, retokenized, whitespace, header_rewritten or rewritten"
    : "retokenized, whitespace, special_token or another cause";
  return {
    cause: "unknown",
    unknown:
      reasoning.length === 0
        ? `reasoning_dropped needs reasoning markers; ${needText} need a tokenizer`
        : `${needText}: telling them apart needs a tokenizer`,
  };
}

/** The cause of the difference at `full[i]` / `prompt[j]`; null when it needs a decoder. */
function stepAt(sides: Sides, i: number, j: number, nested = false): Step | null {
  const { full, prompt, options } = sides;
  const { decode, isSpecial } = options;
  for (const markers of sides.reasoning) {
    const resume = reasoningDropped(sides, i, j, markers, nested);
    if (resume !== undefined) return { cause: "reasoning_dropped", resume };
  }
  if (decode) {
    const same = sameText(full, prompt, i, j, decode);
    if (same !== undefined) {
      const cause = same !== null && isSpecial && specialsDiffer(sides, i, j, same) ? "special_as_text" : "retokenized";
      return { cause, resume: same };
    }
    const spaced = whitespaceEnd(full, prompt, i, j, decode, isSpecial);
    if (spaced !== undefined) return { cause: "whitespace", resume: spaced };
  }
  if (isSpecial) {
    const resume = specialToken(sides, i, j);
    if (resume !== null) return { cause: "special_token", resume };
  }
  if (!decode) return null;
  if (isSpecial) {
    const resume = headerRewritten(sides, i, j);
    if (resume !== null) return { cause: "header_rewritten", resume };
  }
  return { cause: "rewritten", resume: null }; // a rewritten stretch has no known end
}

/**
 * `reasoning_dropped`: `full` from `i` holds a reasoning block (after whitespace at most), `prompt`
 * from `j` does not, and what follows the block agrees with `prompt` or differs from it for a
 * cause of its own. Returns where the sides are in step again (null: the block ends the
 * generation), or undefined when it is not a dropped block.
 */
function reasoningDropped(
  sides: Sides,
  i: number,
  j: number,
  markers: ReasoningMarkers,
  nested: boolean,
): { i: number; j: number } | null | undefined {
  const { full, prompt } = sides;
  const { decode } = sides.options;
  const { open, close } = markers;
  let end: number; // the token after the block
  if (typeof open === "string" || typeof close === "string") {
    if (!decode) return undefined;
    const openText = typeof open === "string" ? open : decode(open);
    const closeText = typeof close === "string" ? close : decode(close);
    const generation = decode(slice(full, i, full.length));
    const start = generation.indexOf(openText);
    if (start < 0 || generation.slice(0, start).trim() !== "") return undefined;
    if (
      decode(slice(prompt, j, j + WINDOW))
        .trimStart()
        .startsWith(openText)
    )
      return undefined; // kept
    const closeAt = generation.indexOf(closeText, start + openText.length);
    if (closeAt < 0) return null; // the block runs to the end of the generation: all of it dropped
    end = tokenEnd(full, i, closeAt + closeText.length, decode);
  } else {
    const start = indexOf(full, open, i);
    if (start < 0 || !blank(full, i, start, decode)) return undefined;
    if (indexOf(slice(prompt, j, j + open.length), open, 0) === 0) return undefined;
    const closeAt = indexOf(full, close, start + open.length);
    if (closeAt < 0) return null;
    end = closeAt + close.length;
  }
  const resume = { i: skipBlank(full, end, decode), j: skipBlank(prompt, j, decode) };
  if (resume.i >= full.length) return null;
  if (decode) {
    const after = decode(slice(full, resume.i, resume.i + WINDOW));
    if (agrees(after, decode(slice(prompt, resume.j, resume.j + WINDOW)))) return resume;
  } else if (tokensAgree(full, resume.i, prompt, resume.j)) return resume;
  // What follows differs: still a dropped block when that difference has a cause of its own.
  if (nested) return undefined;
  const next = stepAt(sides, resume.i, resume.j, true);
  return next !== null && next.cause !== "rewritten" ? resume : undefined;
}

/** The first token index `k > i` such that `decode(full[i:k])` is at least `chars` long. */
function tokenEnd(
  full: ArrayLike<number>,
  i: number,
  chars: number,
  decode: (ids: readonly number[]) => string,
): number {
  let lo = i + 1;
  let hi = full.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (decode(slice(full, i, mid)).length >= chars) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Past the whitespace-only tokens from `k` (none without a decoder). */
function skipBlank(a: ArrayLike<number>, k: number, decode: CauseOptions["decode"]): number {
  if (!decode) return k;
  while (k < a.length && decode([a[k]!]).trim() === "" && decode([a[k]!]).length > 0) k++;
  return k;
}

/**
 * `retokenized`: the stretch that differs decodes to the same text on both sides. Returns where
 * the texts meet again (null: the generation ends and its text goes on in the prompt), or
 * undefined when they do not.
 */
function sameText(
  full: ArrayLike<number>,
  prompt: ArrayLike<number>,
  i0: number,
  j0: number,
  decode: (ids: readonly number[]) => string,
): { i: number; j: number } | null | undefined {
  let i = 1; // tokens of full from i0
  let j = 1; // tokens of prompt from j0
  while (i <= WINDOW && j <= WINDOW && i0 + i <= full.length && j0 + j <= prompt.length) {
    const a = decode(slice(full, i0, i0 + i));
    const b = decode(slice(prompt, j0, j0 + j));
    if (a === b) return { i: i0 + i, j: j0 + j };
    const shorter = a.length <= b.length ? a : b;
    const longer = a.length <= b.length ? b : a;
    if (!longer.startsWith(shorter.replace(/\uFFFD+$/, ""))) return undefined;
    if (a.length <= b.length) {
      if (i0 + i === full.length) return null;
      i++;
    } else j++;
  }
  return undefined;
}

/** Whether the two stretches that decode alike hold different special tokens (one wrote one out as text). */
function specialsDiffer(
  { full, prompt, options }: Sides,
  i: number,
  j: number,
  end: { i: number; j: number },
): boolean {
  const isSpecial = options.isSpecial!;
  const specials = (a: ArrayLike<number>, from: number, to: number) => slice(a, from, to).filter(isSpecial).join(" ");
  return specials(full, i, end.i) !== specials(prompt, j, end.j);
}

/**
 * `whitespace`: with whitespace removed, the two sides hold the same text up to a point where they
 * are in step again. Returns that point (null: only whitespace was left of the generation), or
 * undefined when the texts part for more than whitespace.
 */
function whitespaceEnd(
  full: ArrayLike<number>,
  prompt: ArrayLike<number>,
  i0: number,
  j0: number,
  decode: (ids: readonly number[]) => string,
  isSpecial: CauseOptions["isSpecial"],
): { i: number; j: number } | null | undefined {
  const bare = (a: ArrayLike<number>, from: number, to: number) => decode(slice(a, from, to)).replace(/\s+/g, "");
  if (bare(full, i0, full.length) === "") return null;
  let i = i0;
  let j = j0;
  while (i <= full.length && j <= prompt.length && i - i0 <= WINDOW && j - j0 <= WINDOW) {
    const a = bare(full, i0, i);
    const b = bare(prompt, j0, j);
    if (a === b && i + j > i0 + j0) {
      const resume = { i: skipBlank(full, i, decode), j: skipBlank(prompt, j, decode) };
      if (inStep(full, prompt, resume, isSpecial)) return resume;
    }
    if (!a.startsWith(b.replace(/\uFFFD+$/, "")) && !b.startsWith(a.replace(/\uFFFD+$/, ""))) return undefined;
    if (a.length <= b.length) i++;
    else j++;
  }
  return undefined;
}

/**
 * The sides are in step at `at`: the generation has ended, or both go on with the same token, or
 * each with a special token (the next difference, a replaced stop token, has its own cause).
 */
function inStep(
  full: ArrayLike<number>,
  prompt: ArrayLike<number>,
  at: { i: number; j: number },
  isSpecial: CauseOptions["isSpecial"],
): boolean {
  if (at.i >= full.length || at.j >= prompt.length || full[at.i] === prompt[at.j]) return true;
  return isSpecial?.(full[at.i]!) === true && isSpecial(prompt[at.j]!);
}

/** `special_token`: a special token missing, added or replaced, and the sides agree after it. */
function specialToken({ full, prompt, options }: Sides, i: number, j: number): { i: number; j: number } | null {
  const { decode, isSpecial } = options;
  const after = (a: number, b: number) =>
    a >= full.length ||
    (decode
      ? agrees(decode(slice(full, a, Math.min(full.length, a + WINDOW))), decode(slice(prompt, b, b + WINDOW)))
      : tokensAgree(full, a, prompt, b));
  const lost = isSpecial!(full[i]!);
  const added = isSpecial!(prompt[j]!);
  if (lost && after(i + 1, j)) return { i: i + 1, j };
  if (added && after(i, j + 1)) return { i, j: j + 1 };
  if (lost && added && after(i + 1, j + 1)) return { i: i + 1, j: j + 1 };
  return null;
}

/**
 * `header_rewritten`: a message header written otherwise. Both sides reach the same special token
 * within a few tokens (gpt-oss's `<|message|>`), and before it hold the same words (channel,
 * recipient, content type) in another order, with control tokens moved or dropped.
 */
function headerRewritten({ full, prompt, options }: Sides, i: number, j: number): { i: number; j: number } | null {
  const isSpecial = options.isSpecial!;
  const decode = options.decode!;
  for (let p = i; p < Math.min(full.length, i + HEADER); p++) {
    if (!isSpecial(full[p]!)) continue;
    for (let q = j; q < Math.min(prompt.length, j + HEADER); q++) {
      if (prompt[q] !== full[p]) continue;
      // A header has control tokens inside it (gpt-oss's `<|channel|>`): not just words reordered.
      if (!slice(full, i, p).some(isSpecial) && !slice(prompt, j, q).some(isSpecial)) continue;
      const a = words(full, i, p, isSpecial, decode);
      if (a.length > 0 && a === words(prompt, j, q, isSpecial, decode)) return { i: p + 1, j: q + 1 };
    }
  }
  return null;
}

/** The words of `a[from:to]` outside special tokens, sorted: a header's fields whatever their order. */
function words(
  a: ArrayLike<number>,
  from: number,
  to: number,
  isSpecial: (id: number) => boolean,
  decode: (ids: readonly number[]) => string,
): string {
  const out: string[] = [];
  let run: number[] = [];
  const flush = () => {
    if (run.length > 0) out.push(...decode(run).split(/\s+/).filter(Boolean));
    run = [];
  };
  for (let k = from; k < to; k++) {
    if (isSpecial(a[k]!)) flush();
    else run.push(a[k]!);
  }
  flush();
  return out.sort().join(" ");
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

/** `full[from:to]` is empty or (with a decoder) only whitespace. */
function blank(full: ArrayLike<number>, from: number, to: number, decode: CauseOptions["decode"]): boolean {
  if (from === to) return true;
  return decode !== undefined && to - from <= 4 && decode(slice(full, from, to)).trim() === "";
}
