// Generated rollouts with prefix breaks, for explain's tests.
import fc from "fast-check";
import type { Rollout } from "../../src/types.js";
import { acceptedRolloutArb } from "../support/arbitraries.js";

/** A rollout with some prompt tokens changed (re-rendered histories, dropped tokens). */
export const brokenArb = fc
  .tuple(
    acceptedRolloutArb(),
    fc.array(fc.record({ call: fc.nat(), at: fc.nat(), drop: fc.boolean(), token: fc.nat({ max: 200_000 }) }), {
      maxLength: 4,
    }),
  )
  .map(([rollout, edits]) => {
    const calls = rollout.calls.map((call) => ({ ...call, prompt_token_ids: [...call.prompt_token_ids] }));
    for (const edit of edits) {
      const call = calls[edit.call % calls.length]!;
      if (call.prompt_token_ids.length === 0) continue;
      const at = edit.at % call.prompt_token_ids.length;
      if (edit.drop) call.prompt_token_ids.splice(at, 1);
      else call.prompt_token_ids[at] = edit.token;
    }
    // Media would no longer fit the edited prompts: near parents compare tokens only.
    return { ...rollout, calls: calls.map(({ media: _media, ...call }) => call) } as Rollout;
  });
