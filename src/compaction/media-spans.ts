// Where the images a request showed stand in the prompt the server reported: SPEC's
// `calls[].media`, built from the token evidence without re-rendering anything.
import { placeholderRuns } from "../formats/media-spans.js";
import type { MediaItem } from "../types.js";
import { EvidenceError } from "./errors.js";

/**
 * The media occurrences of one prompt: the k-th run of `placeholderToken` is the k-th image shown
 * (`mediaIds`, in request order). A span is the placeholder run alone, as vLLM's placeholder range
 * is for Qwen-VL's `<|vision_start|><|image_pad|>×N<|vision_end|>` (the `<|image_pad|>` run): the
 * begin and end markers are the same tokens for every image, so only the run stands for one.
 * Throws EvidenceError naming `where` when the runs and the images shown differ in number (a
 * template that puts images back to back with no marker between them merges their runs).
 */
export function mediaSpans(
  where: string,
  promptIds: readonly number[],
  mediaIds: readonly string[],
  placeholderToken: number,
): MediaItem[] {
  const runs = placeholderRuns(promptIds, new Set([placeholderToken]));
  if (runs.length !== mediaIds.length) {
    throw new EvidenceError(
      `${where}: prompt_token_ids holds ${runs.length} run(s) of the image placeholder token ${placeholderToken} ` +
        `for ${mediaIds.length} image(s) shown`,
    );
  }
  return runs.map((run, k) => ({ id: mediaIds[k], offset: run.offset, length: run.length }));
}
