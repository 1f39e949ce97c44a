// Deterministic rollout generators for benchmarks and browser tests (seeded PRNG, no fast-check).
// One small harness simulator (a leader, fresh/fork/background subagents, compaction, twins,
// retries, empty generations, re-rendered forks) drives all three generators; they differ only
// in sizes and in which features they turn on.
import type { AgentInfo, CanonicalCall, Rollout } from "../src/types.js";
import { mulberry32 as rngFrom } from "../src/random.js";


type Range = readonly [number, number];

interface Sizes {
  system: Range;
  task: Range;
  tool: Range;
  generation: Range;
  summary: Range;
  /** Compact an agent's context once it grows past this many tokens. */
  maxContext: number;
}

/** Relative weights of the harness actions. */
interface Features {
  leaderStep: number;
  subagentStep: number;
  fork: number;
  fresh: number;
  background: number;
  rerenderedFork: number;
  twins: number;
  retry: number;
  emptyGeneration: number;
  compactEarly: number;
}

interface SimOptions {
  seed: number;
  rolloutId: string;
  sizes: Sizes;
  features: Features;
  /** Stop after this many calls (counting unkept and empty ones)... */
  calls?: number;
  /** ...or once the eligible calls hold this many tokens (prompt + generation). */
  targetTokens?: number;
  arrays: "typed" | "plain";
  /** Actions to take once each right after the leader's first call, so they surely appear. */
  startWith?: (keyof Features)[];
}

/** A growable token buffer: an agent's current context. */
class Context {
  data: Int32Array;
  length = 0;
  constructor(capacity = 1024) {
    this.data = new Int32Array(capacity);
  }
  push(tokens: Int32Array): void {
    if (this.length + tokens.length > this.data.length) {
      const bigger = new Int32Array(Math.max(this.data.length * 2, this.length + tokens.length));
      bigger.set(this.data.subarray(0, this.length));
      this.data = bigger;
    }
    this.data.set(tokens, this.length);
    this.length += tokens.length;
  }
  reset(tokens: Int32Array): void {
    this.length = 0;
    this.push(tokens);
  }
  copy(): Int32Array {
    return this.data.slice(0, this.length);
  }
}

interface Agent {
  id: string;
  parent: string | null;
  mode: string;
  system: Int32Array;
  context: Context;
  stepsLeft: number;
}

const VOCAB = 151_000;

function simulate(o: SimOptions): Rollout {
  const rand = rngFrom(o.seed);
  const int = (r: Range) => r[0] + Math.floor(rand() * (r[1] - r[0] + 1));
  const tokens = (r: Range) => {
    const out = new Int32Array(int(r));
    for (let i = 0; i < out.length; i++) out[i] = Math.floor(rand() * VOCAB);
    return out;
  };
  const logprobsFor = (n: number) => {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = -Math.abs(Math.log(rand() + 1e-9)) * 0.5;
    return out;
  };
  const concat = (...parts: Int32Array[]) => {
    const out = new Int32Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  };

  const agents: Agent[] = [];
  const calls: CanonicalCall[] = [];
  let eligibleTokens = 0;
  const subagentSystem = tokens(o.sizes.system);
  const addAgent = (mode: string, parent: string | null, system: Int32Array): Agent => {
    const a = { id: agents.length === 0 ? "leader" : `${mode}-${agents.length}`, parent, mode, system, context: new Context(), stepsLeft: int([3, 12]) };
    agents.push(a);
    return a;
  };
  const record = (a: Agent, prompt: Int32Array, generation: Int32Array, kept = true, logprobs = logprobsFor(generation.length)) => {
    const c: CanonicalCall = {
      id: `call-${calls.length + 1}`,
      agent: a.id,
      prompt_token_ids: o.arrays === "typed" ? prompt : Array.from(prompt),
      generation_token_ids: o.arrays === "typed" ? generation : Array.from(generation),
      generation_log_probs: o.arrays === "typed" ? logprobs : Array.from(logprobs),
    };
    if (!kept) c.kept = false;
    calls.push(c);
    if (kept && generation.length > 0) eligibleTokens += prompt.length + generation.length;
    return c;
  };
  /** A kept call whose prompt is the agent's context plus `added`; the context grows by both. */
  const step = (a: Agent, added: Int32Array, generation = tokens(o.sizes.generation)) => {
    a.context.push(added);
    const prompt = a.context.copy();
    record(a, prompt, generation);
    a.context.push(generation);
  };
  /** Compaction: a summary call continues the history; a new root restarts from the summary. */
  const compact = (a: Agent) => {
    const summary = tokens(o.sizes.summary);
    step(a, tokens([20, 40]), summary);
    a.context.reset(concat(a.system, summary));
    step(a, tokens(o.sizes.task));
  };
  const activeSubagents = () => agents.filter((a) => a !== agents[0] && a.stepsLeft > 0);

  const leader = addAgent("leader", null, tokens(o.sizes.system));
  leader.context.push(leader.system);
  step(leader, tokens(o.sizes.task));

  const f = o.features;
  const actions: [keyof Features, number][] = Object.entries(f) as [keyof Features, number][];
  const totalWeight = actions.reduce((n, [, w]) => n + w, 0);
  const done = () =>
    (o.calls !== undefined && calls.length >= o.calls) || (o.targetTokens !== undefined && eligibleTokens >= o.targetTokens);

  const scheduled = [...(o.startWith ?? [])];
  while (!done()) {
    let action: keyof Features = "leaderStep";
    if (scheduled.length > 0) action = scheduled.shift()!;
    else {
      let roll = rand() * totalWeight;
      for (const [name, w] of actions) {
        if ((roll -= w) < 0) {
          action = name;
          break;
        }
      }
    }
    const subs = activeSubagents();
    switch (action) {
      case "leaderStep":
        step(leader, tokens(o.sizes.tool));
        break;
      case "subagentStep": {
        if (subs.length === 0) break;
        const a = subs[Math.floor(rand() * subs.length)];
        a.stepsLeft--;
        step(a, tokens(o.sizes.tool));
        break;
      }
      case "fork":
      case "rerenderedFork": {
        const from = rand() < 0.8 || subs.length === 0 ? leader : subs[Math.floor(rand() * subs.length)];
        const a = addAgent("fork", from.id, from.system);
        a.context.reset(from.context.copy());
        if (action === "rerenderedFork") {
          // the harness re-rendered one token of the history: a new root, correct but untrained prompt
          // inside the system prompt, so no earlier call's full sequence is a prefix any more
          const at = Math.floor(rand() * a.system.length);
          a.context.data[at] = (a.context.data[at] + 1) % VOCAB;
        }
        step(a, tokens(o.sizes.task));
        break;
      }
      case "fresh":
      case "background": {
        const a = addAgent(action, leader.id, subagentSystem);
        a.context.reset(subagentSystem);
        step(a, tokens(o.sizes.task));
        break;
      }
      case "twins": {
        // two forks sampled the same tokens: each continues by its own agent, and a child agent
        // of the second continues the shared sequence (resolved through its parent agent)
        const task = tokens(o.sizes.task);
        const generation = tokens(o.sizes.generation);
        const logprobs = logprobsFor(generation.length);
        const twins = [addAgent("fork", leader.id, leader.system), addAgent("fork", leader.id, leader.system)];
        for (const t of twins) {
          t.context.reset(leader.context.copy());
          t.context.push(task);
          record(t, t.context.copy(), generation, true, logprobs);
          t.context.push(generation);
        }
        const child = addAgent("fork", twins[1].id, leader.system);
        child.context.reset(twins[1].context.copy());
        step(child, tokens(o.sizes.task));
        step(twins[0], tokens(o.sizes.tool));
        break;
      }
      case "retry": {
        // an unkept try, then the kept call with the same prompt
        const a = subs.length > 0 && rand() < 0.5 ? subs[Math.floor(rand() * subs.length)] : leader;
        a.context.push(tokens(o.sizes.tool));
        record(a, a.context.copy(), tokens(o.sizes.generation), false);
        step(a, new Int32Array(0));
        break;
      }
      case "emptyGeneration": {
        const a = subs.length > 0 && rand() < 0.5 ? subs[Math.floor(rand() * subs.length)] : leader;
        a.context.push(tokens(o.sizes.tool));
        record(a, a.context.copy(), new Int32Array(0));
        break;
      }
      case "compactEarly":
        compact(subs.length > 0 && rand() < 0.5 ? subs[Math.floor(rand() * subs.length)] : leader);
        break;
    }
    for (const a of agents) if (a.context.length > o.sizes.maxContext && !done()) compact(a);
  }

  const agentList: AgentInfo[] = agents.map((a) => ({ id: a.id, parent: a.parent, mode: a.mode }));
  return { rollout_id: o.rolloutId, reward: Math.round(rand() * 100) / 100, agents: agentList, calls };
}

const EVERY_FEATURE: Features = {
  leaderStep: 30,
  subagentStep: 30,
  fork: 5,
  fresh: 4,
  background: 3,
  rerenderedFork: 2,
  twins: 1.5,
  retry: 3,
  emptyGeneration: 2,
  compactEarly: 1.5,
};

/**
 * One deep rollout: a leader with long growing contexts, several forks, fresh and background
 * subagents and compactions, with Int32Array/Float32Array arrays. Its eligible calls hold at
 * least `targetTokens` tokens (prompt + generation), 10 million by default.
 */
export function generateDeepRollout(options: { targetTokens?: number; seed?: number } = {}): Rollout {
  return simulate({
    seed: options.seed ?? 1,
    rolloutId: "deep",
    targetTokens: options.targetTokens ?? 10_000_000,
    arrays: "typed",
    startWith: ["background", "fresh", "fork"],
    sizes: { system: [2000, 2500], task: [100, 400], tool: [200, 3000], generation: [50, 600], summary: [400, 800], maxContext: 64_000 },
    features: {
      leaderStep: 50,
      subagentStep: 35,
      fork: 2,
      fresh: 1,
      background: 1,
      rerenderedFork: 0.3,
      twins: 0,
      retry: 1,
      emptyGeneration: 0.5,
      compactEarly: 0.2,
    },
  });
}

/** `count` small realistic rollouts (4–30 calls; contexts compacted near 1,500 tokens, so calls stay under ~2,000). */
export function generateSmallRollouts(count = 1000, seed = 1, options: { arrays?: "typed" | "plain" } = {}): Rollout[] {
  const rand = rngFrom(seed);
  const out: Rollout[] = [];
  for (let i = 0; i < count; i++) {
    out.push(
      simulate({
        seed: Math.floor(rand() * 2 ** 32),
        rolloutId: `small-${seed}-${i}`,
        calls: 4 + Math.floor(rand() * 27),
        arrays: options.arrays ?? "typed",
        sizes: { system: [50, 300], task: [10, 80], tool: [10, 150], generation: [5, 100], summary: [20, 80], maxContext: 1500 },
        features: EVERY_FEATURE,
      }),
    );
  }
  return out;
}

/** A rollout of about `calls` calls (a few hundred) with every feature the simulator has. */
export function generateRollout(options: { calls?: number; seed?: number; arrays?: "typed" | "plain" } = {}): Rollout {
  const seed = options.seed ?? 1;
  return simulate({
    seed,
    rolloutId: `rollout-${seed}`,
    calls: options.calls ?? 300,
    arrays: options.arrays ?? "typed",
    startWith: ["background", "fresh", "fork", "subagentStep", "twins", "rerenderedFork", "retry", "emptyGeneration", "compactEarly"],
    sizes: { system: [100, 600], task: [20, 150], tool: [20, 800], generation: [10, 300], summary: [50, 200], maxContext: 12_000 },
    features: EVERY_FEATURE,
  });
}

/** Tokens as SPEC's benchmark counts them: prompt + generation of every eligible call. */
export function eligibleTokens(rollout: Rollout): number {
  let n = 0;
  for (const c of rollout.calls) {
    if (c.kept !== false && c.generation_token_ids.length > 0) n += c.prompt_token_ids.length + c.generation_token_ids.length;
  }
  return n;
}
