// Where media stand in a prompt, from the model's placeholder tokens. An image becomes a run of
// placeholder tokens in the prompt (one token per patch, the same ids for every image), so with
// those ids known, the images of a prompt are the maximal runs of them, in prompt order.
// Adjacent images with nothing between their placeholders read as one run: callers compare the
// count of runs with the count of media they expect and refuse a mismatch, never guess.

/** Tokens `[offset, offset + length)` of a prompt. */
export interface TokenSpan {
  offset: number;
  length: number;
}

/** The maximal runs of `placeholders` in `prompt`, in prompt order. */
export function placeholderRuns(prompt: ArrayLike<unknown>, placeholders: ReadonlySet<number>): TokenSpan[] {
  const runs: TokenSpan[] = [];
  let start = -1;
  for (let i = 0; i < prompt.length; i++) {
    const inside = placeholders.has(prompt[i] as number);
    if (inside && start < 0) start = i;
    else if (!inside && start >= 0) {
      runs.push({ offset: start, length: i - start });
      start = -1;
    }
  }
  if (start >= 0) runs.push({ offset: start, length: prompt.length - start });
  return runs;
}

/** A span as messages show it: `[start, end)`. */
export function showSpan(span: TokenSpan): string {
  return `[${span.offset}, ${span.offset + span.length})`;
}
