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
  return new Simulator(o).run();
}

/** The harness: agents with growing contexts, and the calls they make, in ledger order. */
class Simulator {
  private readonly rand: () => number;
  private readonly agents: Agent[] = [];
  private readonly calls: CanonicalCall[] = [];
  private eligibleTokens = 0;
  private readonly subagentSystem: Int32Array;
  private readonly leader: Agent;

  constructor(private readonly o: SimOptions) {
    this.rand = rngFrom(o.seed);
    this.subagentSystem = this.tokens(o.sizes.system);
    this.leader = this.addAgent("leader", null, this.tokens(o.sizes.system));
    this.leader.context.push(this.leader.system);
    this.step(this.leader, this.tokens(o.sizes.task));
  }

  run(): Rollout {
    const o = this.o;
    const scheduled = [...(o.startWith ?? [])];
    while (!this.done()) {
      this.act(scheduled.length > 0 ? scheduled.shift()! : this.pickAction());
      for (const a of this.agents) if (a.context.length > o.sizes.maxContext && !this.done()) this.compact(a);
    }
    const agentList: AgentInfo[] = this.agents.map((a) => ({ id: a.id, parent: a.parent, mode: a.mode }));
    return {
      rollout_id: o.rolloutId,
      reward: Math.round(this.rand() * 100) / 100,
      agents: agentList,
      calls: this.calls,
    };
  }

  private done(): boolean {
    const o = this.o;
    return (
      (o.calls !== undefined && this.calls.length >= o.calls) ||
      (o.targetTokens !== undefined && this.eligibleTokens >= o.targetTokens)
    );
  }

  /** An action drawn by the features' weights. */
  private pickAction(): keyof Features {
    const actions = Object.entries(this.o.features) as [keyof Features, number][];
    let roll = this.rand() * actions.reduce((n, [, w]) => n + w, 0);
    for (const [name, w] of actions) if ((roll -= w) < 0) return name;
    return "leaderStep";
  }

  private act(action: keyof Features): void {
    const sizes = this.o.sizes;
    const subs = this.agents.filter((a) => a !== this.leader && a.stepsLeft > 0);
    const anySub = () => subs[Math.floor(this.rand() * subs.length)];
    /** A subagent half the time (when there is one), else the leader. */
    const someAgent = () => (subs.length > 0 && this.rand() < 0.5 ? anySub() : this.leader);
    switch (action) {
      case "leaderStep":
        return this.step(this.leader, this.tokens(sizes.tool));
      case "subagentStep": {
        if (subs.length === 0) return;
        const a = anySub();
        a.stepsLeft--;
        return this.step(a, this.tokens(sizes.tool));
      }
      case "fork":
      case "rerenderedFork":
        return this.fork(this.rand() < 0.8 || subs.length === 0 ? this.leader : anySub(), action === "rerenderedFork");
      case "fresh":
      case "background": {
        const a = this.addAgent(action, this.leader.id, this.subagentSystem);
        a.context.reset(this.subagentSystem);
        return this.step(a, this.tokens(sizes.task));
      }
      case "twins":
        return this.twins();
      case "retry": {
        // an unkept try, then the kept call with the same prompt
        const a = someAgent();
        a.context.push(this.tokens(sizes.tool));
        this.record(a, a.context.copy(), this.tokens(sizes.generation), false);
        return this.step(a, new Int32Array(0));
      }
      case "emptyGeneration": {
        const a = someAgent();
        a.context.push(this.tokens(sizes.tool));
        this.record(a, a.context.copy(), new Int32Array(0));
        return;
      }
      case "compactEarly":
        return this.compact(someAgent());
    }
  }

  private fork(from: Agent, rerendered: boolean): void {
    const a = this.addAgent("fork", from.id, from.system);
    a.context.reset(from.context.copy());
    if (rerendered) {
      // the harness re-rendered one token of the history: a new root, correct but untrained prompt
      // inside the system prompt, so no earlier call's full sequence is a prefix any more
      const at = Math.floor(this.rand() * a.system.length);
      a.context.data[at] = (a.context.data[at] + 1) % VOCAB;
    }
    this.step(a, this.tokens(this.o.sizes.task));
  }

  /**
   * Two forks sampled the same tokens: each continues by its own agent, and a child agent of the
   * second continues the shared sequence (resolved through its parent agent).
   */
  private twins(): void {
    const sizes = this.o.sizes;
    const leader = this.leader;
    const task = this.tokens(sizes.task);
    const generation = this.tokens(sizes.generation);
    const logprobs = this.logprobsFor(generation.length);
    const twins = [this.addAgent("fork", leader.id, leader.system), this.addAgent("fork", leader.id, leader.system)];
    for (const t of twins) {
      t.context.reset(leader.context.copy());
      t.context.push(task);
      this.record(t, t.context.copy(), generation, true, logprobs);
      t.context.push(generation);
    }
    const child = this.addAgent("fork", twins[1].id, leader.system);
    child.context.reset(twins[1].context.copy());
    this.step(child, this.tokens(sizes.task));
    this.step(twins[0], this.tokens(sizes.tool));
  }

  /** Compaction: a summary call continues the history; a new root restarts from the summary. */
  private compact(a: Agent): void {
    const summary = this.tokens(this.o.sizes.summary);
    this.step(a, this.tokens([20, 40]), summary);
    a.context.reset(concat(a.system, summary));
    this.step(a, this.tokens(this.o.sizes.task));
  }

  /** A kept call whose prompt is the agent's context plus `added`; the context grows by both. */
  private step(a: Agent, added: Int32Array, generation = this.tokens(this.o.sizes.generation)): void {
    a.context.push(added);
    const prompt = a.context.copy();
    this.record(a, prompt, generation);
    a.context.push(generation);
  }

  private record(
    a: Agent,
    prompt: Int32Array,
    generation: Int32Array,
    kept = true,
    logprobs = this.logprobsFor(generation.length),
  ): void {
    const typed = this.o.arrays === "typed";
    const c: CanonicalCall = {
      id: `call-${this.calls.length + 1}`,
      agent: a.id,
      prompt_token_ids: typed ? prompt : Array.from(prompt),
      generation_token_ids: typed ? generation : Array.from(generation),
      generation_log_probs: typed ? logprobs : Array.from(logprobs),
    };
    if (!kept) c.kept = false;
    this.calls.push(c);
    if (kept && generation.length > 0) this.eligibleTokens += prompt.length + generation.length;
  }

  private addAgent(mode: string, parent: string | null, system: Int32Array): Agent {
    const id = this.agents.length === 0 ? "leader" : `${mode}-${this.agents.length}`;
    const a = { id, parent, mode, system, context: new Context(), stepsLeft: this.int([3, 12]) };
    this.agents.push(a);
    return a;
  }

  private int(r: Range): number {
    return r[0] + Math.floor(this.rand() * (r[1] - r[0] + 1));
  }

  private tokens(r: Range): Int32Array {
    const out = new Int32Array(this.int(r));
    for (let i = 0; i < out.length; i++) out[i] = Math.floor(this.rand() * VOCAB);
    return out;
  }

  private logprobsFor(n: number): Float32Array {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = -Math.abs(Math.log(this.rand() + 1e-9)) * 0.5;
    return out;
  }
}

/** The rollout with every call's arrays as Int32Array/Float32Array (plan()'s staged path takes these). */
export function typedRollout(r: Rollout): Rollout {
  return {
    ...r,
    calls: r.calls.map((c) => ({
      ...c,
      prompt_token_ids: Int32Array.from(c.prompt_token_ids),
      generation_token_ids: Int32Array.from(c.generation_token_ids),
      generation_log_probs: Float32Array.from(c.generation_log_probs),
    })),
  };
}

function concat(...parts: Int32Array[]): Int32Array {
  const out = new Int32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
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
 * least `targetTokens` tokens (prompt + generation), 10 million by default. Agents compact once
 * their context passes `maxContext` tokens (64K by default).
 */
export function generateDeepRollout(
  options: { targetTokens?: number; seed?: number; maxContext?: number } = {},
): Rollout {
  return simulate({
    seed: options.seed ?? 1,
    rolloutId: "deep",
    targetTokens: options.targetTokens ?? 10_000_000,
    arrays: "typed",
    startWith: ["background", "fresh", "fork"],
    sizes: {
      system: [2000, 2500],
      task: [100, 400],
      tool: [200, 3000],
      generation: [50, 600],
      summary: [400, 800],
      maxContext: options.maxContext ?? 64_000,
    },
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
        sizes: {
          system: [50, 300],
          task: [10, 80],
          tool: [10, 150],
          generation: [5, 100],
          summary: [20, 80],
          maxContext: 1500,
        },
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
    startWith: [
      "background",
      "fresh",
      "fork",
      "subagentStep",
      "twins",
      "rerenderedFork",
      "retry",
      "emptyGeneration",
      "compactEarly",
    ],
    sizes: {
      system: [100, 600],
      task: [20, 150],
      tool: [20, 800],
      generation: [10, 300],
      summary: [50, 200],
      maxContext: 12_000,
    },
    features: EVERY_FEATURE,
  });
}

/** Tokens as SPEC's benchmark counts them: prompt + generation of every eligible call. */
export function eligibleTokens(rollout: Rollout): number {
  let n = 0;
  for (const c of rollout.calls) {
    if (c.kept !== false && c.generation_token_ids.length > 0)
      n += c.prompt_token_ids.length + c.generation_token_ids.length;
  }
  return n;
}

/**
 * A multimodal rollout: a leader whose every turn appends a tool result and a screenshot
 * (begin, `imageTokens` pads, end) and then generates; every `swapEvery`-th turn the harness
 * replaces the latest screenshot in place (same size, new image), so tokens alone would link
 * the next call under the stale one. Typed arrays; deterministic per seed.
 */
export function generateMediaRollout(
  options: { turns?: number; imageTokens?: number; swapEvery?: number; seed?: number } = {},
): Rollout {
  const { turns = 150, imageTokens = 256, swapEvery = 10, seed = 1 } = options;
  const rand = rngFrom(seed);
  const tokens = (n: number) => Array.from({ length: n }, () => 10 + Math.floor(rand() * 150_000));
  let context = tokens(1200);
  const media: { id: string; offset: number; length: number }[] = [];
  let images = 0;
  const calls: Rollout["calls"] = [];
  for (let turn = 0; turn < turns; turn++) {
    if (turn > 0 && turn % swapEvery === 0)
      media[media.length - 1] = {
        ...media[media.length - 1],
        id: `sha256:${(images++).toString(16).padStart(8, "0")}`,
      };
    else {
      context = [...context, ...tokens(40 + Math.floor(rand() * 200)), 151652];
      media.push({
        id: `sha256:${(images++).toString(16).padStart(8, "0")}`,
        offset: context.length,
        length: imageTokens,
      });
      context = [...context, ...new Array<number>(imageTokens).fill(151655), 151653];
    }
    const generation = tokens(20 + Math.floor(rand() * 120));
    calls.push({
      id: `m${turn + 1}`,
      agent: "L",
      prompt_token_ids: Int32Array.from(context),
      generation_token_ids: Int32Array.from(generation),
      generation_log_probs: Float32Array.from(generation, () => -rand() * 3),
      media: media.slice(),
    });
    context = [...context, ...generation];
  }
  return { rollout_id: `media-${seed}`, reward: 1, agents: [{ id: "L", parent: null, mode: "leader" }], calls };
}

/**
 * A fork-heavy rollout: a leader that forks often (each fork resends its whole history), with
 * contexts compacted near `maxContext` tokens (24K by default), so trees are wide and deep and rows
 * repeat much context.
 */
export function generateForkHeavyRollout(
  options: { calls?: number; seed?: number; maxContext?: number } = {},
): Rollout {
  const seed = options.seed ?? 1;
  return simulate({
    seed,
    rolloutId: `fork-heavy-${seed}`,
    calls: options.calls ?? 400,
    arrays: "typed",
    startWith: ["fork", "fork", "fork"],
    sizes: {
      system: [1500, 2000],
      task: [50, 200],
      tool: [100, 1200],
      generation: [30, 400],
      summary: [300, 600],
      maxContext: options.maxContext ?? 24_000,
    },
    features: {
      leaderStep: 20,
      subagentStep: 25,
      fork: 12,
      fresh: 1,
      background: 0.5,
      rerenderedFork: 0.2,
      twins: 0,
      retry: 0.5,
      emptyGeneration: 0.2,
      compactEarly: 0.2,
    },
  });
}

/**
 * A leader whose harness drops each earlier reasoning block when it renders the next prompt (as
 * Qwen3's or gpt-oss's chat templates do): every call generates `THINK_OPEN reasoning
 * THINK_CLOSE answer END_OF_TURN`, the next prompt resends the answers only, so every call but
 * the first of each context is a root with a prefix_break near the call before it. Contexts start
 * afresh (a new system prompt) past `maxContext` tokens, so the tokens grow linearly with the calls.
 */
export function generateBrokenRollout(
  options: {
    targetTokens?: number;
    seed?: number;
    maxContext?: number;
    arrays?: "typed" | "plain";
    /** Resend each generation exactly instead (the same sizes, no breaks: one tree per context). */
    exact?: boolean;
  } = {},
): Rollout {
  const rand = rngFrom(options.seed ?? 1);
  const target = options.targetTokens ?? 10_000_000;
  const maxContext = options.maxContext ?? 64_000;
  const between = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
  const tokens = (lo: number, hi: number) => {
    const out = new Int32Array(between(lo, hi));
    for (let i = 0; i < out.length; i++) out[i] = 10 + Math.floor(rand() * (VOCAB - 10));
    return out;
  };
  const [THINK_OPEN, THINK_CLOSE, END_OF_TURN] = [1, 2, 3];
  const calls: CanonicalCall[] = [];
  let total = 0;
  let history: Int32Array[] = [];
  let historyLength = 0;
  while (total < target) {
    if (historyLength === 0 || historyLength > maxContext) {
      history = [tokens(2000, 2500), tokens(100, 400)];
      historyLength = history.reduce((n, t) => n + t.length, 0);
    }
    const prompt = new Int32Array(historyLength);
    let at = 0;
    for (const part of history) {
      prompt.set(part, at);
      at += part.length;
    }
    const reasoning = tokens(30, 300);
    const answer = tokens(20, 300);
    const generation = Int32Array.from([THINK_OPEN, ...reasoning, THINK_CLOSE, ...answer, END_OF_TURN]);
    const logprobs = Float32Array.from(generation, () => -rand() * 4);
    const plain = options.arrays === "plain";
    calls.push({
      id: `c${calls.length}`,
      agent: "L",
      prompt_token_ids: plain ? Array.from(prompt) : prompt,
      generation_token_ids: plain ? Array.from(generation) : generation,
      generation_log_probs: plain ? Array.from(logprobs) : logprobs,
    });
    total += prompt.length + generation.length;
    // the next prompt: the answer without its reasoning (or all of it), then a tool result
    const kept = options.exact ? generation : Int32Array.from([...answer, END_OF_TURN]);
    const tool = tokens(200, 3000);
    history.push(kept, tool);
    historyLength += kept.length + tool.length;
  }
  return {
    rollout_id: options.exact ? "resent" : "broken",
    reward: 1,
    agents: [{ id: "L", parent: null, mode: "leader" }],
    calls,
  };
}

/** Sizes of the small-rollout bench's two workloads (see generateSixteenCallRollouts). */
const SIXTEEN_CALL_SIZES: Record<"rollout" | "call", Sizes> = {
  // ~1,100 tokens a rollout: ~70 a call, a short system prompt and turns of a few tokens.
  rollout: { system: [20, 40], task: [2, 10], tool: [2, 7], generation: [2, 8], summary: [4, 10], maxContext: 110 },
  // ~1,100 tokens a call: a ~550-token system prompt, then turns of a tool result and a generation.
  call: {
    system: [400, 700],
    task: [20, 120],
    tool: [20, 160],
    generation: [10, 120],
    summary: [40, 120],
    maxContext: 1800,
  },
};

/**
 * The small-rollout bench's workloads (issue 40): `count` rollouts of 16 calls (the harness's twins
 * add one now and then) with every feature of the harness (subagents, forks, compaction, twins,
 * retries), about 1,100 tokens (prompt + generation of the eligible calls) a rollout (`per:
 * "rollout"`) or a call (`per: "call"`).
 */
export function generateSixteenCallRollouts(
  count = 1000,
  per: "rollout" | "call" = "rollout",
  options: { seed?: number; calls?: number } = {},
): Rollout[] {
  const rand = rngFrom(options.seed ?? 7);
  const out: Rollout[] = [];
  for (let i = 0; i < count; i++) {
    out.push(
      simulate({
        seed: Math.floor(rand() * 2 ** 32),
        rolloutId: `sixteen-${per}-${i}`,
        calls: options.calls ?? 16,
        arrays: "typed",
        sizes: SIXTEEN_CALL_SIZES[per],
        features: EVERY_FEATURE,
      }),
    );
  }
  return out;
}
