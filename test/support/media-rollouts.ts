// Small rollouts with media for the show, draw and page tests (SPEC v2 `calls[].media`).
import type { MediaItem, Rollout } from "../../src/types.js";

export const SWAP_FILE = new URL("../../examples/screenshot-swap.json", import.meta.url).pathname;

function call(id: string, prompt: number[], generation: number[], media: MediaItem[]) {
  return {
    id,
    prompt_token_ids: prompt,
    generation_token_ids: generation,
    generation_log_probs: generation.map(() => -0.5),
    media,
  };
}

/**
 * C3's tokens extend C2's, but C3 shows another image where C2 showed its own: by media it
 * continues C1, the longest call that agrees (SPEC "Linking"), and is no root — a media
 * mismatch that got a shorter parent.
 */
export function shorterParentRollout(): Rollout {
  const full2 = [1, 2, 3, 4, 900, 901, 901, 902, 5];
  return {
    rollout_id: "shorter-parent",
    reward: 1,
    calls: [
      call("C1", [1, 2], [3], []),
      call("C2", full2.slice(0, -1), [5], [{ id: "img:a", offset: 4, length: 3 }]),
      call("C3", [...full2, 6], [7], [{ id: "img:b", offset: 4, length: 3 }]),
    ],
  };
}
