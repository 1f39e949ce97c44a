// A deterministic batch of small agent rollouts (canonical JSONL on stdout) for run.sh: a leader
// that steps, forks, starts fresh subagents, retries, generates nothing, continues a cut-off
// generation, samples several continuations of one history, re-renders a fork (a new root) and
// compacts (a summary call, then a new root), and runs twin subagents (identical full sequences,
// so a later call's parent is chosen by its agent), so the forest has branching trees. Every
// row stays under 64 tokens (an agent compacts past 30), so `--capacity 64` takes every rollout.
// usage: node generate.mjs [COUNT] [SEED]
const count = Number(process.argv[2] ?? 16);
const seed = Number(process.argv[3] ?? 7);

function mulberry32(s) {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function rollout(index) {
  const rand = mulberry32(seed * 1000 + index);
  const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
  // mostly vocabulary-sized token IDs, now and then anywhere in [0, 2^31-1]
  const tokens = (lo, hi) =>
    Array.from({ length: int(lo, hi) }, () => (rand() < 0.05 ? int(0, 2 ** 31 - 1) : int(0, 151_000)));
  const generation = (lo, hi) => {
    const ids = tokens(lo, hi);
    return { ids, logprobs: ids.map(() => -Math.round(rand() * 4e4) / 1e4) };
  };
  const agents = [{ id: "L", parent: null, mode: "leader" }];
  const calls = [];
  const call = (agent, prompt, gen, extra = {}) => {
    calls.push({
      id: `c${calls.length + 1}`,
      agent,
      prompt_token_ids: prompt,
      generation_token_ids: gen.ids,
      generation_log_probs: gen.logprobs,
      ...extra,
    });
    return [...prompt, ...gen.ids];
  };
  const system = tokens(3, 8);
  // One agent's turn: compact when its context is long, else continue it with a tool result.
  const step = (agent, context) => {
    if (context.length > 30) {
      const summary = generation(2, 5);
      call(agent, [...context, ...tokens(1, 2)], summary);
      return call(agent, [...system, ...summary.ids, ...tokens(1, 3)], generation(1, 6));
    }
    return call(agent, [...context, ...tokens(1, 4)], generation(1, 6));
  };

  let leader = call("L", [...system, ...tokens(1, 4)], generation(1, 6));
  const turns = int(4, 14);
  for (let t = 0; t < turns; t++) {
    const r = rand();
    if (r < 0.35 || leader.length > 30) {
      leader = step("L", leader);
    } else if (r < 0.5) {
      // a fork resends the leader's whole history, plus a task
      const id = `F${agents.length}`;
      agents.push({ id, parent: "L", mode: "fork" });
      let fork = call(id, [...leader, ...tokens(1, 3)], generation(1, 6));
      for (let k = int(0, 3); k > 0; k--) fork = step(id, fork);
    } else if (r < 0.6) {
      const id = `A${agents.length}`;
      agents.push({ id, parent: "L", mode: rand() < 0.5 ? "fresh" : "background" });
      let sub = call(id, tokens(2, 6), generation(1, 6));
      for (let k = int(0, 2); k > 0; k--) sub = step(id, sub);
    } else if (r < 0.68) {
      // a retry: an unkept try, then the kept call with the same prompt
      const prompt = [...leader, ...tokens(1, 3)];
      call("L", prompt, generation(1, 4), { kept: false });
      leader = call("L", prompt, generation(1, 6));
    } else if (r < 0.74) {
      // a kept call that generated nothing: not eligible
      leader = call("L", [...leader, ...tokens(1, 2)], { ids: [], logprobs: [] });
    } else if (r < 0.82) {
      // the last call stopped at a length limit and the model goes on: the prompt is exactly the
      // last full sequence, so the new segment starts with generated tokens
      leader = call("L", leader, generation(1, 6));
    } else if (r < 0.9) {
      // several samples from the same history (parallel subagents that all start generating
      // right away): sibling segments that each start with a generated token
      for (let k = int(2, 3); k > 0; k--) {
        const id = `S${agents.length}`;
        agents.push({ id, parent: "L", mode: "fork" });
        call(id, leader, generation(1, 6));
      }
    } else if (r < 0.95) {
      // twins: two forks that send the same prompt and happen to generate the same tokens, then
      // go on each in its own agent (SPEC's Linking keeps each on its own agent's twin)
      const prompt = [...leader, ...tokens(1, 3)];
      const same = generation(1, 6);
      for (let k = 0; k < 2; k++) {
        const id = `T${agents.length}`;
        agents.push({ id, parent: "L", mode: "fork" });
        step(id, call(id, prompt, same));
      }
    } else {
      // a re-rendered fork: one token of the history changed, so it is a new root
      const id = `R${agents.length}`;
      agents.push({ id, parent: "L", mode: "fork" });
      const copy = [...leader];
      copy[int(0, copy.length - 1)] = int(0, 151_000);
      call(id, [...copy, ...tokens(1, 3)], generation(1, 6));
    }
  }
  return { rollout_id: `gen-${index}`, reward: Math.round(rand() * 100) / 100, agents, calls };
}

for (let i = 0; i < count; i++) process.stdout.write(JSON.stringify(rollout(i)) + "\n");
