// The inputs on which `explain` once grew with the square of the calls (issue 37), shared by its
// process benchmark (bench/explain.ts) and the test that counts its work
// (test/explain/linear.test.ts): a sliding-window harness, a delta chain, many one-agent calls.
import type { CanonicalCall, Rollout } from "../src/types.js";

const STOP = 151_645;

/**
 * A harness that sends a fixed system prompt and the last `window` tokens of its history: every
 * call is a root (a `rewritten_prompt` near the call before it), and token-in/token-out would be
 * one chain as long as the whole history. No agents listed: roots' closest calls come from the trie.
 */
export function slidingWindowRollout(
  calls: number,
  sizes = { system: 200, window: 500, generation: 40, tool: 20 },
): Rollout {
  let next = 1000;
  const system = Array.from({ length: sizes.system }, (_, i) => 1 + i);
  let history: number[] = [];
  const out: CanonicalCall[] = [];
  for (let i = 0; i < calls; i++) {
    history.push(...Array.from({ length: sizes.tool }, () => next++ % 150_000));
    if (history.length > sizes.window) history = history.slice(history.length - sizes.window);
    const generation = [...Array.from({ length: sizes.generation - 1 }, () => next++ % 150_000), STOP];
    out.push({
      id: `c${i}`,
      prompt_token_ids: Int32Array.from([...system, ...history]),
      generation_token_ids: Int32Array.from(generation),
      generation_log_probs: new Float32Array(generation.length).fill(-0.5),
    });
    history.push(...generation);
  }
  return { rollout_id: "window", reward: 1, calls: out };
}

/**
 * bench/delta-chain.ts's chain as the gym-observed reader holds it: each prompt (the previous
 * call's full sequence and one token) a view into one shared buffer, so the prompts add up to
 * `entries²` tokens while memory holds `2·entries`.
 */
export function deltaChainRollout(entries: number): Rollout {
  const buffer = Int32Array.from({ length: 2 * entries }, (_, i) => i + 1);
  const calls: CanonicalCall[] = Array.from({ length: entries }, (_, i) => ({
    id: `c${i}`,
    prompt_token_ids: buffer.subarray(0, 2 * i + 1),
    generation_token_ids: buffer.subarray(2 * i + 1, 2 * i + 2),
    generation_log_probs: [-0.5],
  }));
  return { rollout_id: "r-0", reward: 1, calls };
}

/**
 * `rollouts` one-agent conversations of `calls` calls each: each call resends the history, with
 * its reasoning block dropped on every third call (a prefix break) and kept otherwise.
 */
export function oneAgentRollouts(rollouts: number, calls: number): Rollout[] {
  const [OPEN, CLOSE] = [50, 51];
  let next = 1000;
  const tokens = (n: number) => Array.from({ length: n }, () => next++ % 150_000);
  const out: Rollout[] = [];
  for (let r = 0; r < rollouts; r++) {
    let history = [...Array.from({ length: 40 }, (_, i) => 100 + i), ...tokens(20)];
    const list: CanonicalCall[] = [];
    for (let i = 0; i < calls; i++) {
      const answer = [...tokens(6), STOP];
      const generation = [OPEN, ...tokens(3), CLOSE, ...answer];
      list.push({
        id: `c${i}`,
        prompt_token_ids: history,
        generation_token_ids: generation,
        generation_log_probs: generation.map(() => -0.5),
      });
      history = [...history, ...(i % 3 === 2 ? answer : generation), ...tokens(10)];
    }
    out.push({ rollout_id: `one-${r}`, reward: 1, calls: list });
  }
  return out;
}
