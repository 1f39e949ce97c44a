// The token-in/token-out version of a rollout (docs/breaks.md, "What a break costs"): each
// explained call that a harness resending the sampled tokens would have linked continues its near
// call, after it the tokens it added after that call's turn. It is described by links (cost.ts),
// never built: its prompts would grow with the square of the calls.
import type { Cause, NearSequence } from "./cause.js";
import { historyResumes, indexOf } from "./cause.js";
import type { Links } from "./cost.js";

/** Causes that a token-in/token-out harness would not have had: the call would continue `near`. */
export function linkable(cause: Cause): boolean {
  return cause !== "fresh" && cause !== "compaction";
}

/**
 * Where, in the call's prompt, what it added after its near call's turn begins: just past the
 * first occurrence of that call's last generated token (its stop token) from where its generation
 * was re-rendered (`at` for a break, where the history resumes for a rewritten prompt); if there
 * is none, as many tokens on as the rest of the near call's generation.
 */
export function turnEnd(near: NearSequence, prompt: ArrayLike<number>, at: number): number {
  const { full, promptLength } = near;
  const from = at >= promptLength ? at : (historyResumes(near, prompt, at) ?? promptLength);
  const rest = full.length - Math.max(at, promptLength);
  const stop = indexOf(prompt, [full[full.length - 1]!], from);
  return Math.min(prompt.length, stop >= 0 ? stop + 1 : from + rest);
}

/** The planned links with each relinked call (by index) continuing `near` from `cut`. */
export function tokenInTokenOut(planned: Links, relinked: ReadonlyMap<number, { near: number; cut: number }>): Links {
  const parent = planned.parent.slice();
  const cut = planned.cut.slice();
  for (const [call, link] of relinked) {
    parent[call] = link.near;
    cut[call] = link.cut;
  }
  return { parent, cut };
}
