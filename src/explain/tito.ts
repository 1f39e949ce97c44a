// The token-in/token-out version of a rollout: each explained call resends its near call's full
// sequence exactly, then what it added after that call's turn. Planning both versions says what
// the breaks cost in row tokens (docs/breaks.md, "What a break costs").
import type { CanonicalCall, ForestCall, Rollout } from "../types.js";
import type { ExplainedCall } from "./analyze.js";
import { historyResumes, indexOf } from "./cause.js";

/** Causes that a token-in/token-out harness would not have had: the call would continue `near`. */
function linkable(call: ExplainedCall): boolean {
  return call.nearFull !== null && call.cause !== "fresh" && call.cause !== "compaction";
}

/**
 * Where, in the call's prompt, what it added after its near call's turn begins: just past the
 * first occurrence of that call's last generated token (its stop token) from where its generation
 * was re-rendered (`at` for a break, where the history resumes for a rewritten prompt); if there
 * is none, as many tokens on as the rest of the near call's generation.
 */
export function turnEnd(call: ExplainedCall): number {
  const full = call.nearFull!;
  const promptLength = call.nearPromptLength;
  const from =
    call.at >= promptLength
      ? call.at
      : (historyResumes({ full, promptLength }, call.prompt, call.at) ?? call.at + (promptLength - call.at));
  const rest = full.length - Math.max(call.at, promptLength);
  const stop = indexOf(call.prompt, [full[full.length - 1]!], from);
  return Math.min(call.prompt.length, stop >= 0 ? stop + 1 : from + rest);
}

/** The rollout as a token-in/token-out harness would have sent it (eligible calls, tokens only). */
export function tokenInTokenOut(
  rollout: Rollout,
  forest: readonly ForestCall[],
  explained: readonly ExplainedCall[],
): Rollout {
  const byCall = new Map(explained.filter(linkable).map((call) => [call.call, call]));
  const fullOf = new Map<string, { sent: number[]; tito: number[] }>();
  const calls: CanonicalCall[] = [];
  for (const entry of forest) {
    if (!entry.eligible) continue;
    const input = rollout.calls[entry.index]!;
    const prompt = Array.from(input.prompt_token_ids);
    const generation = Array.from(input.generation_token_ids);
    const call = byCall.get(entry.id);
    let tito = prompt;
    if (call !== undefined) tito = [...fullOf.get(call.near!)!.tito, ...prompt.slice(turnEnd(call))];
    else if (entry.parent !== null) {
      const parent = fullOf.get(entry.parent)!;
      tito = [...parent.tito, ...prompt.slice(parent.sent.length)];
    }
    fullOf.set(entry.id, { sent: [...prompt, ...generation], tito: [...tito, ...generation] });
    calls.push({
      id: entry.id,
      agent: entry.agent,
      prompt_token_ids: tito,
      generation_token_ids: generation,
      generation_log_probs: Array.from(input.generation_log_probs),
    });
  }
  return {
    rollout_id: rollout.rollout_id,
    reward: rollout.reward,
    ...(rollout.agents === undefined ? {} : { agents: rollout.agents }),
    calls,
  };
}

/** The rollout as sent, tokens only (its eligible calls, no media or routed experts): the cost's baseline. */
export function tokensOnly(rollout: Rollout, forest: readonly ForestCall[]): Rollout {
  return tokenInTokenOut(rollout, forest, []);
}
