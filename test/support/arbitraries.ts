// fast-check arbitraries for SPEC's canonical rollouts. A rollout is a list of harness actions
// (leader steps, fresh/fork/background subagents, compaction, twins, retries, ...) that a small
// interpreter turns into calls in ledger order, so shrinking removes whole actions.
import fc from "fast-check";
import type { AgentInfo, CanonicalCall, MediaItem, RejectionCode, Rollout } from "../../src/types.js";
import { reference } from "./reference.js";

type Tokens = number[];
interface Generated {
  tokens: Tokens;
  logprobs: number[];
}

const MAX_TOKEN = 2 ** 31 - 1;

/** Mostly vocabulary-sized IDs, sometimes anywhere in [0, 2^31-1], sometimes the bounds. */
export const tokenArb: fc.Arbitrary<number> = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 0, max: 200_000 }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: MAX_TOKEN }) },
  { weight: 1, arbitrary: fc.constantFrom(0, MAX_TOKEN) },
);

/** Finite logprobs that fit float32, including values float32 must round (-0.1, subnormals). */
export const logprobArb: fc.Arbitrary<number> = fc.oneof(
  { weight: 8, arbitrary: fc.double({ min: -30, max: 0, noNaN: true }) },
  { weight: 1, arbitrary: fc.constantFrom(0, -0.1, -1e-40, -1e-46, -3e38, -3.4028234663852886e38) },
);

const tokensArb = (min: number, max: number) => fc.array(tokenArb, { minLength: min, maxLength: max });

/**
 * A non-empty generation with its logprobs: mostly short, sometimes long enough (8-48) for the
 * cores' SIMD loops (8 logprobs, 16 tokens a step) and masks spanning whole bytes.
 */
const generatedArb: fc.Arbitrary<Generated> = fc
  .oneof(
    { weight: 4, arbitrary: fc.array(fc.tuple(tokenArb, logprobArb), { minLength: 1, maxLength: 5 }) },
    { weight: 1, arbitrary: fc.array(fc.tuple(tokenArb, logprobArb), { minLength: 8, maxLength: 48 }) },
  )
  .map((pairs) => ({ tokens: pairs.map((p) => p[0]), logprobs: pairs.map((p) => p[1]) }));

/**
 * Who settles a tie between twin calls: sameAgent (a twin continues itself), parentAgent (a child
 * agent of a twin continues), spawnerIsTwin (the spawning agent itself made the other twin call, a
 * new fork of it continues: its parent agent's call wins, the leader's included — agents[0]),
 * ambiguous (a sibling continues: rejected), sameAgentTwice (one agent made both calls: rejected).
 */
export type TwinOutcome = "sameAgent" | "parentAgent" | "spawnerIsTwin" | "ambiguous" | "sameAgentTwice";

export type Action =
  /** An agent continues its own context (tool result appended, then a generation). */
  | { kind: "step"; who: number; add: Tokens; gen: Generated }
  /** A kept call that generated nothing: not eligible; the agent goes on from its prompt. */
  | { kind: "empty"; who: number; add: Tokens }
  /** A fresh (or background) subagent: its own system prompt and a task. */
  | { kind: "fresh"; background: boolean; from: number; task: Tokens; gen: Generated }
  /** A fork: resends the parent agent's full sequence, plus a task; or a re-rendered copy of it. */
  | { kind: "fork"; from: number; task: Tokens; gen: Generated; rerender: { at: number; token: number } | null }
  /** Compaction: a summary call continues the history, then a new root with a shorter context. */
  | { kind: "compact"; who: number; ask: Tokens; summary: Generated; after: Tokens; gen: Generated }
  /** An unkept try (kept:false), then the kept call with the same prompt. */
  | { kind: "retry"; who: number; add: Tokens; tryGen: Tokens; sameGeneration: boolean; gen: Generated }
  /** Two subagents with identical full sequences, then a call that continues that sequence. */
  | {
      kind: "twins";
      from: number;
      asFork: boolean;
      task: Tokens;
      gen: Generated;
      outcome: TwinOutcome;
      add: Tokens;
      next: Generated;
    }
  /**
   * A re-rendered history (SPEC's prefix breaks): an agent resends an earlier call's prompt (its
   * own last call's, or any eligible call's when `target` is set) and that call's generation
   * edited — a span dropped (reasoning a chat template leaves out), tokens put in (a re-split, a
   * separator) — then more, and generates.
   */
  | {
      kind: "rewrite";
      who: number;
      target: number | null;
      at: number;
      drop: number;
      insert: Tokens;
      add: Tokens;
      gen: Generated;
    }
  /** An agent continues some earlier eligible call's full sequence (any agent, any call). */
  | { kind: "cross"; who: number; target: number; add: Tokens; gen: Generated }
  /**
   * Handoff: a fork continues an agent's last call, then both the agent (resuming from the
   * fork's sequence) and the fork continue the fork's call, in either order. The ownership walk
   * then passes from one agent into another before it has to choose.
   */
  | {
      kind: "handoff";
      who: number;
      fork: Generated;
      add: [Tokens, Tokens, Tokens];
      gens: [Generated, Generated];
      forkFirst: boolean;
    }
  /** An agent's context gets an image (begin, pad × size, end placeholder tokens), then a generation. */
  | { kind: "image"; who: number; size: number; content: number; gen: Generated }
  /**
   * The harness replaces an agent's latest image in place with another of the same size (same
   * tokens, other media), then the agent goes on: tokens alone would link it under the old image.
   */
  | { kind: "swap"; who: number; content: number; add: Tokens; gen: Generated }
  /**
   * Two forks of an agent that differ only in the image they append (same size, same tokens, same
   * generation), then a sibling continues one of them: media settle what tokens tie.
   */
  | {
      kind: "mediaTwins";
      from: number;
      size: number;
      contents: [number, number];
      gen: Generated;
      pick: boolean;
      add: Tokens;
      next: Generated;
    };

export interface Scenario {
  /** listed: `agents` given; unlisted: calls name agents, no `agents`; anonymous: no agent names. */
  agentsMode: "listed" | "unlisted" | "anonymous";
  /** typed: own Int32Array/Float32Array/Float64Array per call; views: subarrays of shared buffers. */
  arrays: "plain" | "typed" | "mixed" | "views";
  /** tiny: every token taken mod 3, so sequences coincide by accident (prefixes, ties) often. */
  vocab: "wide" | "tiny";
  fancyIds: boolean;
  reward: number;
  leaderSystem: Tokens;
  subagentSystem: Tokens;
  task: Tokens;
  first: Generated;
  actions: Action[];
  /** SPEC v4's fields (routes, weight versions, group id, an image in the system prompt), when asked for. */
  v4?: V4Scenario;
}

/** A call's routed experts, as the engine reported them (see `V4Scenario.routes`). */
export interface RouteCallPlan {
  /** S − len(full(c)): −1 is vLLM's shape, 0 the full shape, more adds entries SPEC ignores. */
  extra: -1 | 0 | 1 | 2;
  encoding: "lists" | "int8" | "int16" | "int32";
  /** A prefill that re-routes one prompt token (a prefix-cache miss): position and layer (mod). */
  reroute: { at: number; layer: number } | null;
  /** Positions (mod len(full)) whose entries are all −1 (not recorded). */
  unrecorded: number[];
  /**
   * The entry of the call's last token (when S reaches it) differs from what a continuation's
   * prefill gives it (decode and prefill disagree): SPEC ignores that entry, so links stay.
   */
  lastDiffers: boolean;
}

/** A call's weight version: none, one, or one per generated token (stepping up at `stepAt`). */
export type VersionPlan =
  | { kind: "none" }
  | { kind: "single"; version: number }
  | { kind: "perToken"; version: number; stepAt: number };

export interface V4Scenario {
  /** The rollout's group_id: absent (undefined), null or a string. */
  groupId: string | null | undefined;
  /** The leader's system prompt ends with an image, which forks inherit and compaction keeps. */
  systemImage: { size: number; content: number } | null;
  /**
   * Routed experts on every call, or none. A token's route is a function of its position and id,
   * so calls agree on what they share, except where a call re-routes or leaves entries unrecorded.
   * Per-call plans are taken cyclically.
   */
  routes: { layers: number; topk: number; experts: number; calls: RouteCallPlan[] } | null;
  /** Weight versions (per-call plans taken cyclically), or none on any call. */
  versions: VersionPlan[] | null;
}

interface AgentState {
  id: string;
  parent: string | null;
  mode: string;
  system: Tokens;
  /** The agent's current context: its last full sequence (or last prompt, after an empty call). */
  context: Tokens;
  /** The media occurrences in `context`. */
  media: MediaItem[];
  /** The media occurrences in `system` (v4's system image; [] otherwise). */
  systemMedia: MediaItem[];
}

interface PlainCall {
  id: string;
  agent: string;
  prompt: Tokens;
  generation: Tokens;
  logprobs: number[];
  kept: boolean;
  media: MediaItem[];
}

// Placeholder tokens of an image (as a chat template renders one): begin, pad × size, end.
const IMAGE_BEGIN = 151652;
const IMAGE_PAD = 151655;
const IMAGE_END = 151653;

const ID_SUFFIXES = ["", "-ä", '"q"', "/x\\y", " 🙂", "\n"];

/** Turns a scenario into SPEC's canonical rollout (calls in ledger order). */
export function buildRollout(s: Scenario): Rollout {
  const named = s.agentsMode !== "anonymous";
  const agents: AgentState[] = [];
  const calls: PlainCall[] = [];
  const addAgent = (mode: string, parent: string | null, system: Tokens, systemMedia: MediaItem[] = []): AgentState => {
    const a: AgentState = {
      id: named ? (agents.length === 0 ? "L" : `a${agents.length}`) : "",
      parent,
      mode,
      system,
      context: [],
      media: [],
      systemMedia,
    };
    agents.push(a);
    return a;
  };
  // A call's media: those of the context its prompt extends (`media`, default the agent's own).
  const call = (a: AgentState, prompt: Tokens, gen: Generated | null, kept = true, media = a.media): PlainCall => {
    const n = calls.length + 1;
    const c: PlainCall = {
      id: `c${n}${s.fancyIds ? ID_SUFFIXES[n % ID_SUFFIXES.length] : ""}`,
      agent: a.id,
      prompt,
      generation: gen ? gen.tokens : [],
      logprobs: gen ? gen.logprobs : [],
      kept,
      media: media.filter((m) => m.offset + m.length <= prompt.length),
    };
    calls.push(c);
    if (kept) {
      a.context = [...prompt, ...c.generation];
      a.media = c.media;
    }
    return c;
  };
  const mediaId = (content: number) =>
    `sha256:${content.toString(16).padStart(4, "0")}${s.fancyIds ? ID_SUFFIXES[content % ID_SUFFIXES.length] : ""}`;
  /** `context` with an image appended: its placeholder run and its occurrence. */
  const withImage = (context: Tokens, media: MediaItem[], size: number, content: number) => ({
    tokens: [...context, IMAGE_BEGIN, ...new Array<number>(size).fill(IMAGE_PAD), IMAGE_END],
    media: [...media, { id: mediaId(content), offset: context.length + 1, length: size }],
  });
  const pick = (i: number) => agents[i % agents.length];

  // v4: an image at the end of the leader's system prompt (forks inherit it, compaction keeps it)
  const systemImage = s.v4?.systemImage
    ? withImage(s.leaderSystem, [], s.v4.systemImage.size, s.v4.systemImage.content)
    : null;
  const leader = systemImage
    ? addAgent("leader", null, systemImage.tokens, systemImage.media)
    : addAgent("leader", null, s.leaderSystem);
  leader.media = leader.systemMedia;
  call(leader, [...leader.system, ...s.task], s.first);
  for (const act of s.actions) {
    switch (act.kind) {
      case "step": {
        const a = pick(act.who);
        call(a, [...a.context, ...act.add], act.gen);
        break;
      }
      case "empty": {
        const a = pick(act.who);
        call(a, [...a.context, ...act.add], null);
        break;
      }
      case "fresh": {
        const a = addAgent(act.background ? "background" : "fresh", pick(act.from).id, s.subagentSystem);
        call(a, [...s.subagentSystem, ...act.task], act.gen);
        break;
      }
      case "fork": {
        const from = pick(act.from);
        const history = [...from.context];
        if (act.rerender && history.length > 0) {
          // one token of the resent history differs: near the start the fork becomes a new root,
          // further on it continues the last call whose full sequence is still a prefix
          const at = act.rerender.at % (act.rerender.at % 2 === 0 ? Math.min(2, history.length) : history.length);
          history[at] =
            act.rerender.token !== history[at] ? act.rerender.token : history[at] === 0 ? 1 : history[at] - 1;
        }
        const a = addAgent("fork", from.id, from.system, from.systemMedia);
        call(a, [...history, ...act.task], act.gen, true, from.media); // a fork inherits the images
        break;
      }
      case "compact": {
        const a = pick(act.who);
        call(a, [...a.context, ...act.ask], act.summary);
        // compaction drops the images (but those of the system prompt it keeps)
        call(a, [...a.system, ...act.summary.tokens, ...act.after], act.gen, true, a.systemMedia);
        break;
      }
      case "retry": {
        const a = pick(act.who);
        const prompt = [...a.context, ...act.add];
        const tryGen = act.sameGeneration ? act.gen : { tokens: act.tryGen, logprobs: act.tryGen.map(() => -1) };
        call(a, prompt, tryGen, false);
        call(a, prompt, act.gen);
        break;
      }
      case "twins": {
        const from = pick(act.from);
        const prompt = act.asFork ? [...from.context, ...act.task] : [...s.subagentSystem, ...act.task];
        const mode = act.asFork ? "fork" : "fresh";
        const t1 = addAgent(
          mode,
          from.id,
          act.asFork ? from.system : s.subagentSystem,
          act.asFork ? from.systemMedia : [],
        );
        const t2 =
          act.outcome === "sameAgentTwice"
            ? t1
            : act.outcome === "spawnerIsTwin"
              ? from
              : addAgent(mode, from.id, t1.system, t1.systemMedia);
        const twinMedia = act.asFork ? from.media : [];
        call(t1, prompt, act.gen, true, twinMedia);
        call(t2, prompt, act.gen, true, twinMedia);
        const twinFull = [...prompt, ...act.gen.tokens];
        // sameAgent / sameAgentTwice: t1 continues; parentAgent: a child agent of t2 continues;
        // spawnerIsTwin and ambiguous: a new child of `from` continues (a sibling of the twins)
        const next =
          act.outcome === "parentAgent"
            ? addAgent("fork", t2.id, t2.system, t2.systemMedia)
            : act.outcome === "ambiguous" || act.outcome === "spawnerIsTwin"
              ? addAgent("fork", from.id, from.system, from.systemMedia)
              : t1;
        call(next, [...twinFull, ...act.add], act.next, true, twinMedia);
        break;
      }
      case "image": {
        const a = pick(act.who);
        const shown = withImage(a.context, a.media, act.size, act.content);
        call(a, shown.tokens, act.gen, true, shown.media);
        break;
      }
      case "swap": {
        const a = pick(act.who);
        const media = a.media.slice();
        const last = media.length - 1;
        if (last >= 0) media[last] = { ...media[last], id: mediaId(act.content) };
        call(a, [...a.context, ...act.add], act.gen, true, media);
        break;
      }
      case "mediaTwins": {
        const from = pick(act.from);
        const twins = act.contents.map((content) => {
          const shown = withImage(from.context, from.media, act.size, content);
          const t = addAgent("fork", from.id, from.system, from.systemMedia);
          call(t, shown.tokens, act.gen, true, shown.media);
          return t;
        });
        // A sibling continues one twin: its tokens tie both, its media only the one it extends.
        const chosen = twins[act.pick ? 1 : 0];
        const next = addAgent("fork", from.id, from.system, from.systemMedia);
        call(next, [...chosen.context, ...act.add], act.next, true, chosen.media);
        break;
      }
      case "handoff": {
        const a = pick(act.who);
        const f = addAgent("fork", a.id, a.system, a.systemMedia);
        call(f, [...a.context, ...act.add[0]], act.fork, true, a.media);
        const shared = f.context;
        const sharedMedia = f.media;
        const order = act.forkFirst ? [f, a] : [a, f];
        order.forEach((agent, i) => call(agent, [...shared, ...act.add[i + 1]], act.gens[i], true, sharedMedia));
        break;
      }
      case "rewrite": {
        const a = pick(act.who);
        const eligible = calls.filter((c) => c.kept && c.generation.length > 0);
        const own = eligible.filter((c) => c.agent === a.id);
        const base =
          act.target === null
            ? (own[own.length - 1] ?? eligible[eligible.length - 1])
            : eligible[act.target % eligible.length];
        const g = base.generation;
        const at = act.at % (g.length + 1);
        const edited = [...g.slice(0, at), ...act.insert, ...g.slice(Math.min(g.length, at + act.drop))];
        call(a, [...base.prompt, ...edited, ...act.add], act.gen, true, base.media);
        break;
      }
      case "cross": {
        const eligible = calls.filter((c) => c.kept && c.generation.length > 0);
        const target = eligible[act.target % eligible.length];
        const a = pick(act.who);
        call(a, [...target.prompt, ...target.generation, ...act.add], act.gen, true, target.media);
        break;
      }
    }
  }

  if (s.vocab === "tiny") {
    for (const c of calls) {
      c.prompt = c.prompt.map((t) => t % 3);
      c.generation = c.generation.map((t) => t % 3);
    }
  }
  const views = s.arrays === "views" ? sharedViews(calls) : null;
  const canonical: CanonicalCall[] = calls.map((c, i) => {
    const typed = s.arrays === "typed" || (s.arrays === "mixed" && i % 2 === 1);
    const out: CanonicalCall = {
      id: c.id,
      prompt_token_ids: views ? views[i].prompt : typed ? Int32Array.from(c.prompt) : c.prompt,
      generation_token_ids: views ? views[i].generation : typed ? Int32Array.from(c.generation) : c.generation,
      generation_log_probs: views
        ? views[i].logprobs
        : typed
          ? i % 4 === 1
            ? Float64Array.from(c.logprobs)
            : Float32Array.from(c.logprobs)
          : c.logprobs,
    };
    if (named) out.agent = c.agent;
    if (!c.kept) out.kept = false;
    else if (i % 5 === 3) out.kept = true;
    if (i % 7 === 2) (out as unknown as Record<string, unknown>).finish_reason = "stop"; // unknown fields are ignored
    // Media as a rollout may give them: absent, [] or null when there are none.
    if (c.media.length > 0) out.media = c.media;
    else if (i % 3 === 1) out.media = i % 2 === 0 ? [] : null;
    return out;
  });
  const rollout: Rollout = { rollout_id: `r-${calls.length}-${s.agentsMode}`, reward: s.reward, calls: canonical };
  if (s.agentsMode === "listed") {
    rollout.agents = agents.map((a): AgentInfo => ({ id: a.id, parent: a.parent, mode: a.mode }));
  }
  if (s.v4) decorateV4(rollout, calls, s.v4);
  return rollout;
}

/** The expert a router picks for token `token` at position `i`, layer `l`, slot `k`. */
function expertFor(i: number, token: number, l: number, k: number, experts: number): number {
  return (((token % 100_003) * 7 + i * 3 + l * 5 + k * 11) % experts) as number;
}

/** `[S][L][K]` as SPEC's envelope: little-endian C-order bytes of `type`, standard base64. */
export function encodeEnvelope(
  lists: number[][][],
  type: "int8" | "int16" | "int32",
  layers: number,
  topk: number,
): string {
  const size = { int8: 1, int16: 2, int32: 4 }[type];
  const bytes = Buffer.alloc(lists.length * layers * topk * size);
  lists.flat(2).forEach((e, i) => {
    if (size === 1) bytes.writeInt8(e, i);
    else if (size === 2) bytes.writeInt16LE(e, i * 2);
    else bytes.writeInt32LE(e, i * 4);
  });
  return `nrlre1:${type}:${lists.length}x${layers}x${topk}:${bytes.toString("base64")}`;
}

/** Adds SPEC v4's fields to a built rollout: group_id, routed_experts, weight_version. */
function decorateV4(rollout: Rollout, calls: PlainCall[], v4: V4Scenario): void {
  if (v4.groupId !== undefined) (rollout as unknown as Record<string, unknown>).group_id = v4.groupId;
  rollout.calls.forEach((out, i) => {
    const c = calls[i];
    const raw = out as unknown as Record<string, unknown>;
    const full = [...c.prompt, ...c.generation];
    if (v4.routes) {
      const { layers, topk, experts } = v4.routes;
      const plan = v4.routes.calls[i % v4.routes.calls.length];
      const s = Math.max(0, full.length + plan.extra);
      const lists = Array.from({ length: s }, (_, t) =>
        Array.from({ length: layers }, (_, l) =>
          Array.from({ length: topk }, (_, k) => expertFor(t, full[t] ?? 0, l, k, experts)),
        ),
      );
      if (plan.reroute && c.prompt.length > 0) {
        const at = plan.reroute.at % c.prompt.length;
        const l = plan.reroute.layer % layers;
        // (An empty call's last prompt token may lie past a vLLM-shaped array.)
        if (at < lists.length) lists[at][l][0] = (lists[at][l][0] + 1) % experts;
      }
      if (full.length > 0)
        for (const u of plan.unrecorded) lists[u % full.length]?.forEach((chosen) => chosen.fill(-1));
      const last = lists[full.length - 1];
      if (plan.lastDiffers && last && last[0][0] >= 0) last[0][0] = (last[0][0] + 2) % experts;
      raw.routed_experts = plan.encoding === "lists" ? lists : encodeEnvelope(lists, plan.encoding, layers, topk);
    }
    if (v4.versions) {
      const plan = v4.versions[i % v4.versions.length];
      if (plan.kind === "single") raw.weight_version = plan.version;
      else if (plan.kind === "perToken") {
        const step = plan.stepAt % (c.generation.length + 1);
        raw.weight_version = c.generation.map((_, k) => (k < step ? plan.version : plan.version + 1));
      }
    }
  });
}

/**
 * Every call's arrays as subarrays (non-zero byteOffset) of one shared Int32Array and one
 * Float32Array, as a reader parsing a whole file into one buffer would hand them over.
 */
function sharedViews(calls: PlainCall[]): { prompt: Int32Array; generation: Int32Array; logprobs: Float32Array }[] {
  const tokens = new Int32Array(3 + calls.reduce((n, c) => n + c.prompt.length + c.generation.length + 1, 0));
  const logprobs = new Float32Array(3 + calls.reduce((n, c) => n + c.logprobs.length + 1, 0));
  tokens.fill(-1); // gaps between views hold invalid tokens: reading past a view shows
  logprobs.fill(Number.NaN);
  let t = 3;
  let l = 3;
  return calls.map((c) => {
    tokens.set(c.prompt, t);
    const prompt = tokens.subarray(t, t + c.prompt.length);
    t += c.prompt.length;
    tokens.set(c.generation, t);
    const generation = tokens.subarray(t, t + c.generation.length);
    t += c.generation.length + 1;
    logprobs.set(c.logprobs, l);
    const lp = logprobs.subarray(l, l + c.logprobs.length);
    l += c.logprobs.length + 1;
    return { prompt, generation, logprobs: lp };
  });
}

function actionArb(allowAmbiguous: boolean): fc.Arbitrary<Action> {
  const who = fc.nat(20);
  const add = tokensArb(0, 6);
  const outcomes: TwinOutcome[] = allowAmbiguous
    ? ["sameAgent", "parentAgent", "spawnerIsTwin", "ambiguous", "sameAgentTwice"]
    : ["sameAgent", "parentAgent", "spawnerIsTwin"];
  return fc.oneof(
    { weight: 10, arbitrary: fc.record({ kind: fc.constant("step" as const), who, add, gen: generatedArb }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant("empty" as const), who, add }) },
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant("fresh" as const),
        background: fc.boolean(),
        from: who,
        task: tokensArb(1, 4),
        gen: generatedArb,
      }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant("fork" as const),
        from: who,
        task: tokensArb(0, 4),
        gen: generatedArb,
        rerender: fc.option(fc.record({ at: fc.nat(), token: tokenArb }), { freq: 4 }),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant("compact" as const),
        who,
        ask: tokensArb(1, 3),
        summary: generatedArb,
        after: tokensArb(0, 3),
        gen: generatedArb,
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant("retry" as const),
        who,
        add,
        tryGen: tokensArb(0, 4),
        sameGeneration: fc.boolean(),
        gen: generatedArb,
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant("twins" as const),
        from: who,
        asFork: fc.boolean(),
        task: tokensArb(1, 3),
        gen: generatedArb,
        outcome: fc.constantFrom(...outcomes),
        add: tokensArb(0, 3),
        next: generatedArb,
      }),
    },
    {
      weight: 4,
      arbitrary: fc.record({
        kind: fc.constant("rewrite" as const),
        who,
        target: fc.option(fc.nat(), { freq: 3 }),
        at: fc.nat(),
        drop: fc.integer({ min: 0, max: 4 }),
        insert: tokensArb(0, 2),
        add: tokensArb(0, 3),
        gen: generatedArb,
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant("cross" as const),
        who,
        target: fc.nat(),
        add: tokensArb(0, 3),
        gen: generatedArb,
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant("handoff" as const),
        who,
        fork: generatedArb,
        add: fc.tuple(tokensArb(0, 3), tokensArb(1, 3), tokensArb(1, 3)),
        gens: fc.tuple(generatedArb, generatedArb),
        forkFirst: fc.boolean(),
      }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant("image" as const),
        who,
        size: fc.integer({ min: 1, max: 6 }),
        content: fc.nat(40),
        gen: generatedArb,
      }),
    },
    {
      weight: 3,
      arbitrary: fc.record({ kind: fc.constant("swap" as const), who, content: fc.nat(40), add, gen: generatedArb }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant("mediaTwins" as const),
        from: who,
        size: fc.integer({ min: 1, max: 4 }),
        contents: fc.tuple(fc.nat(40), fc.nat(40)),
        gen: generatedArb,
        pick: fc.boolean(),
        add: tokensArb(0, 3),
        next: generatedArb,
      }),
    },
  );
}

export interface RolloutArbOptions {
  /** Include twin outcomes that SPEC rejects with ambiguous_parent (default true). */
  allowAmbiguous?: boolean;
  maxActions?: number;
  /** SPEC v4's fields too (routes, weight versions, group id, a system image); default none. */
  v4?: boolean | V4ArbOptions;
}

export interface V4ArbOptions {
  /** Routed experts on every call: never, sometimes (default) or always. */
  routes?: "never" | "sometimes" | "always";
  /** Weight versions: never, sometimes (default) or always (on some calls, single or per token). */
  versions?: "never" | "sometimes" | "always";
  /** Re-routed prompt tokens and unrecorded (−1) entries, or routes that always agree (default true). */
  conflicts?: boolean;
  /** An image in the leader's system prompt: never, sometimes (default) or always. */
  systemImage?: "never" | "sometimes" | "always";
}

const maybe = <T>(mode: "never" | "sometimes" | "always" | undefined, arb: fc.Arbitrary<T>): fc.Arbitrary<T | null> =>
  mode === "never" ? fc.constant(null) : mode === "always" ? arb : fc.option(arb, { freq: 3 });

const routeCallPlanArb = (conflicts: boolean): fc.Arbitrary<RouteCallPlan> =>
  fc.record({
    extra: fc.constantFrom(-1 as const, -1 as const, 0 as const, 0 as const, 1 as const, 2 as const),
    encoding: fc.constantFrom("lists" as const, "lists" as const, "int8" as const, "int16" as const, "int32" as const),
    reroute: conflicts ? fc.option(fc.record({ at: fc.nat(), layer: fc.nat() }), { freq: 4 }) : fc.constant(null),
    unrecorded: conflicts
      ? fc.oneof(
          { weight: 3, arbitrary: fc.constant<number[]>([]) },
          { weight: 1, arbitrary: fc.array(fc.nat(), { maxLength: 3 }) },
        )
      : fc.constant<number[]>([]),
    lastDiffers: fc.boolean(),
  });

const versionArb = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 20 }) },
  { weight: 1, arbitrary: fc.constantFrom(0, MAX_TOKEN - 1) },
);

const versionPlanArb: fc.Arbitrary<VersionPlan> = fc.oneof(
  { weight: 1, arbitrary: fc.constant({ kind: "none" as const }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("single" as const), version: versionArb }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant("perToken" as const), version: versionArb, stepAt: fc.nat() }),
  },
);

/** SPEC v4's decorations of a scenario (see V4Scenario). */
export function v4ScenarioArb(options: V4ArbOptions = {}): fc.Arbitrary<V4Scenario> {
  const conflicts = options.conflicts ?? true;
  return fc.record({
    groupId: fc.constantFrom(undefined, null, "g-1", "task/42 ä", ""),
    systemImage: maybe(options.systemImage, fc.record({ size: fc.integer({ min: 1, max: 4 }), content: fc.nat(40) })),
    routes: maybe(
      options.routes,
      fc.record({
        layers: fc.integer({ min: 1, max: 3 }),
        topk: fc.integer({ min: 1, max: 2 }),
        experts: fc.constantFrom(4, 64, 127, 300, 70_000),
        calls: fc.array(routeCallPlanArb(conflicts), { minLength: 1, maxLength: 6 }),
      }),
    ).map((r) => {
      if (r === null) return null;
      // int8 and int16 envelopes hold only small expert ids
      const fits = (e: RouteCallPlan["encoding"]) =>
        e === "lists" || e === "int32" || (e === "int16" ? r.experts <= 32_768 : r.experts <= 128);
      return { ...r, calls: r.calls.map((c) => (fits(c.encoding) ? c : { ...c, encoding: "int32" as const })) };
    }),
    versions: maybe(options.versions, fc.array(versionPlanArb, { minLength: 1, maxLength: 5 })),
  });
}

export function scenarioArb(options: RolloutArbOptions = {}): fc.Arbitrary<Scenario> {
  const allowAmbiguous = options.allowAmbiguous ?? true;
  return fc.record({
    agentsMode: fc.constantFrom("listed" as const, "listed" as const, "unlisted" as const, "anonymous" as const),
    arrays: fc.constantFrom("plain" as const, "typed" as const, "mixed" as const, "views" as const),
    vocab: fc.constantFrom("wide" as const, "wide" as const, "wide" as const, "tiny" as const),
    fancyIds: fc.boolean(),
    reward: fc.oneof(fc.constantFrom(0, 1, -1, 0.5), fc.double({ noNaN: true, noDefaultInfinity: true })),
    // sometimes long, so prefix comparisons cross SIMD lane and block boundaries
    leaderSystem: fc.oneof({ weight: 3, arbitrary: tokensArb(0, 6) }, { weight: 1, arbitrary: tokensArb(30, 140) }),
    subagentSystem: tokensArb(0, 4),
    task: tokensArb(0, 4),
    first: generatedArb,
    actions: fc.array(actionArb(allowAmbiguous), { maxLength: options.maxActions ?? 25, size: "medium" }),
    ...(options.v4 ? { v4: v4ScenarioArb(options.v4 === true ? {} : options.v4) } : {}),
  });
}

/** Realistic call forests: accepted ones, and (with twins) some that SPEC rejects as ambiguous. */
export function rolloutArb(options: RolloutArbOptions = {}): fc.Arbitrary<Rollout> {
  return scenarioArb(options).map(buildRollout);
}

/** SPEC v4 rollouts: realistic call forests with routes, weight versions, group ids (see V4ArbOptions). */
export function v4RolloutArb(
  options: Omit<RolloutArbOptions, "v4"> & { v4?: V4ArbOptions } = {},
): fc.Arbitrary<Rollout> {
  return rolloutArb({ ...options, v4: options.v4 ?? {} });
}

/** SPEC v4 rollouts the reference accepts. */
export function acceptedV4RolloutArb(
  options: Omit<RolloutArbOptions, "v4" | "allowAmbiguous"> & { v4?: V4ArbOptions } = {},
): fc.Arbitrary<Rollout> {
  return v4RolloutArb({ ...options, allowAmbiguous: false }).filter((r) => reference(r).status === "ok");
}

/** Call forests the reference accepts (twins resolved by same agent or by parent agent only). */
export function acceptedRolloutArb(options: Omit<RolloutArbOptions, "allowAmbiguous"> = {}): fc.Arbitrary<Rollout> {
  return rolloutArb({ ...options, allowAmbiguous: false }).filter((r) => reference(r).status === "ok");
}

// ---------------------------------------------------------------------------------------------
// Invalid inputs: an accepted rollout with one fault injected at one call (or at rollout level).

export interface InvalidCase {
  rollout: unknown;
  code: Exclude<RejectionCode, "malformed_json" | "rollout_too_large" | "row_exceeds_capacity">;
  /** The call the rejection is about (null: rollout-level, or the call has no usable id). */
  call: string | null;
  what: string;
}

type Mutable = Record<string, unknown> & { calls: Record<string, unknown>[] };

/** A copy whose calls (and their arrays) can be changed without touching the original. */
function cloneRollout(r: Rollout): Mutable {
  const copy = { ...r } as unknown as Mutable;
  copy.calls = r.calls.map((c) => ({
    ...c,
    prompt_token_ids: c.prompt_token_ids.slice(),
    generation_token_ids: c.generation_token_ids.slice(),
    generation_log_probs: c.generation_log_probs.slice(),
  })) as unknown as Record<string, unknown>[];
  if (r.agents) copy.agents = r.agents.map((a) => ({ ...a }));
  return copy;
}

const plain = (xs: ArrayLike<number>): unknown[] => Array.from(xs);

type Fault = (
  r: Mutable,
  k: number,
  pick: number,
) => { code: InvalidCase["code"]; call: string | null; what: string } | null;

const BAD_TOKENS: unknown[] = [
  -1,
  MAX_TOKEN + 1,
  1.5,
  Number.NaN,
  "7",
  null,
  1e20,
  -0.5,
  Number.POSITIVE_INFINITY,
  true,
];
const BAD_LOGPROBS: unknown[] = [
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  1e39,
  -1e39,
  "x",
  null,
  -3.5e38,
];

/** Media that SPEC's `invalid_media` rejects, for a prompt of `n` tokens (SPEC "Input", `calls[].media`). */
const BAD_MEDIA: ((n: number) => unknown)[] = [
  () => "sha256:aaaa",
  () => ({ id: "x", offset: 0, length: 1 }),
  () => [null],
  () => [[0, 1]],
  () => [{ offset: 0, length: 1 }],
  () => [{ id: "", offset: 0, length: 1 }],
  () => [{ id: 7, offset: 0, length: 1 }],
  () => [{ id: "x", offset: 0.5, length: 1 }],
  () => [{ id: "x", offset: -1, length: 1 }],
  () => [{ id: "x", offset: "0", length: 1 }],
  () => [{ id: "x", offset: 0, length: 0 }],
  () => [{ id: "x", offset: 0, length: 1.5 }],
  () => [{ id: "x", offset: 0 }],
  (n) => [{ id: "x", offset: n, length: 1 }], // past the prompt
  (n) => [{ id: "x", offset: Math.max(0, n - 1), length: 2 }], // ends past it
  (n) => [
    { id: "x", offset: Math.min(2, n), length: 1 },
    { id: "y", offset: 0, length: 1 },
  ], // unordered
  () => [
    { id: "x", offset: 0, length: 2 },
    { id: "y", offset: 1, length: 1 },
  ], // overlapping
];

const ROLLOUT_FAULTS: ((r: Mutable) => unknown)[] = [
  (r) => (delete r.rollout_id, r),
  (r) => ((r.rollout_id = ""), r),
  (r) => ((r.rollout_id = 7), r),
  (r) => (delete r.reward, r),
  (r) => ((r.reward = "1"), r),
  (r) => ((r.reward = Number.NaN), r),
  (r) => ((r.reward = Number.POSITIVE_INFINITY), r),
  (r) => (delete (r as Record<string, unknown>).calls, r),
  (r) => (((r as Record<string, unknown>).calls = { c1: {} }), r),
  (r) => ((r.agents = "L"), r),
  () => [],
  () => 42,
  () => null,
];

const CALL_STRUCTURE_FAULTS: ((c: Record<string, unknown>) => { replace?: unknown; idBroken: boolean })[] = [
  () => ({ replace: null, idBroken: true }),
  () => ({ replace: "call", idBroken: true }),
  (c) => (delete c.id, { idBroken: true }),
  (c) => ((c.id = ""), { idBroken: true }),
  (c) => ((c.id = 5), { idBroken: true }),
  (c) => ((c.agent = 5), { idBroken: false }),
  (c) => (delete c.prompt_token_ids, { idBroken: false }),
  (c) => ((c.prompt_token_ids = "1,2"), { idBroken: false }),
  (c) => ((c.generation_token_ids = null), { idBroken: false }),
  (c) => (delete c.generation_log_probs, { idBroken: false }),
  (c) => ((c.generation_log_probs = { 0: -1 }), { idBroken: false }),
  (c) => ((c.kept = "false"), { idBroken: false }),
  (c) => ((c.kept = 0), { idBroken: false }),
];

const FAULTS: Record<InvalidCase["code"], Fault> = {
  invalid_rollout: (r, k, pick) => {
    const c = r.calls[k];
    const id = c.id as string;
    const fault = CALL_STRUCTURE_FAULTS[pick % CALL_STRUCTURE_FAULTS.length];
    const result = fault(c);
    if ("replace" in result) r.calls[k] = result.replace as Record<string, unknown>;
    return {
      code: "invalid_rollout",
      call: result.idBroken ? null : id,
      what: `call ${k} structure fault ${pick % CALL_STRUCTURE_FAULTS.length}`,
    };
  },
  duplicate_call_id: (r, k, pick) => {
    if (k === 0) return null;
    const id = r.calls[pick % k].id as string;
    r.calls[k].id = id;
    return { code: "duplicate_call_id", call: id, what: `call ${k} reuses the id of call ${pick % k}` };
  },
  unknown_agent: (r, k) => {
    if (!r.agents) {
      const ids = [...new Set(r.calls.map((c) => (c.agent as string | undefined) ?? ""))];
      r.agents = ids.map((id) => ({ id, parent: null, mode: "leader" }));
    }
    r.calls[k].agent = "ghost-agent";
    return { code: "unknown_agent", call: r.calls[k].id as string, what: `call ${k} names agent ghost-agent` };
  },
  invalid_token: (r, k, pick) => {
    const c = r.calls[k];
    const field = pick % 2 === 0 ? "prompt_token_ids" : "generation_token_ids";
    const arr = c[field] as number[] | Int32Array;
    if (arr instanceof Int32Array && arr.length > 0 && pick % 3 === 0) {
      arr[pick % arr.length] = -5; // a negative ID inside an Int32Array
      return { code: "invalid_token", call: c.id as string, what: `call ${k} ${field} holds -5 (Int32Array)` };
    }
    const list = plain(arr);
    const bad = BAD_TOKENS[pick % BAD_TOKENS.length];
    if (list.length === 0) {
      list.push(bad);
      if (field === "generation_token_ids") c.generation_log_probs = [...plain(c.generation_log_probs as number[]), -1];
    } else list[pick % list.length] = bad;
    c[field] = list;
    return { code: "invalid_token", call: c.id as string, what: `call ${k} ${field} holds ${String(bad)}` };
  },
  logprob_length_mismatch: (r, k, pick) => {
    const c = r.calls[k];
    const list = plain(c.generation_log_probs as number[]);
    if (list.length > 0 && pick % 2 === 0) list.pop();
    else list.push(-0.5);
    c.generation_log_probs = list;
    return { code: "logprob_length_mismatch", call: c.id as string, what: `call ${k} has ${list.length} logprobs` };
  },
  invalid_logprob: (r, k, pick) => {
    const c = r.calls[k];
    const bad = BAD_LOGPROBS[pick % BAD_LOGPROBS.length];
    const lps = c.generation_log_probs as number[] | Float32Array | Float64Array;
    if (lps instanceof Float64Array && lps.length > 0 && typeof bad === "number") {
      lps[pick % lps.length] = bad; // stays a Float64Array: 1e39 is finite here, not in float32
      return { code: "invalid_logprob", call: c.id as string, what: `call ${k} logprob ${bad} (Float64Array)` };
    }
    const list = plain(lps);
    if (list.length === 0) {
      c.generation_token_ids = [...plain(c.generation_token_ids as number[]), 5];
      list.push(bad);
    } else list[pick % list.length] = bad;
    c.generation_log_probs = list;
    return { code: "invalid_logprob", call: c.id as string, what: `call ${k} logprob ${String(bad)}` };
  },
  invalid_routed_experts: (r, k, pick) => {
    const c = r.calls[k];
    const full =
      (c.prompt_token_ids as ArrayLike<number>).length + (c.generation_token_ids as ArrayLike<number>).length;
    const bad: unknown[] = [
      "nrlre1:int16:1x1x1:AAAA", // 3 bytes where 2 belong
      "nrlre2:int16:1x1x1:AAA=",
      `nrlre1:int64:${full}x1x1:`,
      7,
      { S: 1 },
      [[[0, 1]], [[2]]], // ragged
      [[["x"]]],
      // two tokens short (SPEC v4 reads vLLM's S = len(full(c)) − 1, one short)
      `nrlre1:int8:${Math.max(0, full - 2)}x1x1:${Buffer.alloc(Math.max(0, full - 2)).toString("base64")}`,
      Array.from({ length: Math.max(0, full - 2) }, () => [[1]]),
    ];
    c.routed_experts = full < 2 ? bad[pick % 7] : bad[pick % bad.length];
    return {
      code: "invalid_routed_experts",
      call: c.id as string,
      what: `call ${k} routed_experts fault ${pick % bad.length}`,
    };
  },
  invalid_weight_version: (r, k, pick) => {
    const c = r.calls[k];
    const fault = BAD_VERSIONS[pick % BAD_VERSIONS.length];
    c.weight_version = fault((c.generation_token_ids as ArrayLike<number>).length);
    return {
      code: "invalid_weight_version",
      call: c.id as string,
      what: `call ${k} weight_version fault ${pick % BAD_VERSIONS.length}`,
    };
  },
  invalid_media: (r, k, pick) => {
    const c = r.calls[k];
    const fault = BAD_MEDIA[pick % BAD_MEDIA.length];
    c.media = fault((c.prompt_token_ids as ArrayLike<number>).length);
    return { code: "invalid_media", call: c.id as string, what: `call ${k} media fault ${pick % BAD_MEDIA.length}` };
  },
  ambiguous_parent: (r, k, pick) => {
    // two agents' calls with one identical full sequence, then a third agent continues it
    const twin = [1234567891, 1234567892 + (pick % 1000), 7];
    const lead = (r.calls[0].agent as string | undefined) ?? "";
    const ids = [`twin-a-${k}`, `twin-b-${k}`, `after-twins-${k}`];
    const agentsOf = ["tw-a", "tw-b", "tw-c"];
    const inserted = ids.map((id, i) => ({
      id,
      agent: agentsOf[i],
      prompt_token_ids: i < 2 ? twin : [...twin, 8, 9, 10],
      generation_token_ids: i < 2 ? [8, 9] : [11],
      generation_log_probs: i < 2 ? [-0.5, -0.25] : [-1],
    }));
    if (r.agents) (r.agents as AgentInfo[]).push(...agentsOf.map((id) => ({ id, parent: lead, mode: "fresh" })));
    r.calls.splice(k, 0, ...inserted);
    return { code: "ambiguous_parent", call: ids[2], what: `twins inserted at ${k}, continued by a sibling agent` };
  },
  no_trainable_calls: (r, _k, pick) => {
    if (pick % 5 === 0) {
      r.calls = [];
      return { code: "no_trainable_calls", call: null, what: "no calls" };
    }
    r.calls.forEach((c, i) => {
      if ((i + pick) % 2 === 0) c.kept = false;
      else {
        c.generation_token_ids = [];
        c.generation_log_probs = [];
      }
    });
    return { code: "no_trainable_calls", call: null, what: "every call unkept or empty" };
  },
};

export const REJECTION_CODES = Object.keys(FAULTS) as InvalidCase["code"][];

/** An accepted rollout with one fault of the given code (any code when omitted). */
export function invalidRolloutArb(code?: InvalidCase["code"]): fc.Arbitrary<InvalidCase> {
  return fc
    .record({
      base: acceptedRolloutArb({ maxActions: 12 }),
      code: code ? fc.constant(code) : fc.constantFrom(...REJECTION_CODES),
      at: fc.nat(),
      pick: fc.nat(),
      rolloutLevel: fc.boolean(),
    })
    .map(({ base, code: c, at, pick, rolloutLevel }): InvalidCase | null => {
      const r = cloneRollout(base);
      if (c === "invalid_rollout" && rolloutLevel) {
        const fault = ROLLOUT_FAULTS[pick % ROLLOUT_FAULTS.length];
        return { rollout: fault(r), code: c, call: null, what: `rollout-level fault ${pick % ROLLOUT_FAULTS.length}` };
      }
      const done = FAULTS[c](r, at % r.calls.length, pick);
      return done ? { rollout: r, ...done } : null;
    })
    .filter((x): x is InvalidCase => x !== null);
}

/** The rollout as JSON text can carry it: typed arrays become plain arrays. */
export function toJsonValue(rollout: unknown): unknown {
  return JSON.parse(
    JSON.stringify(rollout, (_key, value: unknown) =>
      ArrayBuffer.isView(value) ? Array.from(value as unknown as ArrayLike<number>) : value,
    ),
  );
}

// ---------------------------------------------------------------------------------------------
// Prefix soup: calls whose prompts cut earlier full sequences anywhere and go on with a few
// tokens of a three-token vocabulary, so prompts part from earlier calls inside their prompts,
// inside their generations and exactly at their ends, often at several depths at once — what
// SPEC's prefix_break must sort out (the deepest near parent, ties to the latest).

interface SoupCall {
  /** Which earlier call's full sequence the prompt starts from (mod the calls so far; -1: none). */
  base: number;
  /** Where that sequence is cut (mod its length + 1); large values keep it whole more often. */
  cut: number;
  /** Replace one kept token near the cut (a re-split), or not. */
  flip: boolean;
  extra: Tokens;
  generation: Tokens;
  /** End the generation with a token no other call has (no identical full sequences). */
  unique: boolean;
  agent: number;
}

const smallTokensArb = (min: number, max: number) =>
  fc.array(fc.integer({ min: 0, max: 2 }), { minLength: min, maxLength: max });

const soupCallArb: fc.Arbitrary<SoupCall> = fc.record({
  base: fc.integer({ min: -1, max: 40 }),
  cut: fc.oneof(fc.nat(12), fc.constant(1_000_000)),
  flip: fc.boolean(),
  extra: smallTokensArb(0, 3),
  generation: smallTokensArb(1, 4),
  unique: fc.boolean(),
  agent: fc.nat(3),
});

/** A rollout of prefix-soup calls (see above), agents L, a1..a3 listed as L's subagents. */
export function prefixSoupArb(maxCalls = 14): fc.Arbitrary<Rollout> {
  return fc.array(soupCallArb, { minLength: 1, maxLength: maxCalls }).map((soup) => {
    const fulls: Tokens[] = [];
    const calls: CanonicalCall[] = soup.map((s, i) => {
      const base = s.base < 0 || fulls.length === 0 ? [] : fulls[s.base % fulls.length];
      const cut = s.cut % (base.length + 1);
      const kept = base.slice(0, cut);
      if (s.flip && kept.length > 0) kept[kept.length - 1] = (kept[kept.length - 1] + 1) % 3;
      const prompt = [...kept, ...s.extra];
      const generation = s.unique ? [...s.generation, 1000 + i] : s.generation;
      fulls.push([...prompt, ...generation]);
      return {
        id: `s${i}`,
        agent: s.agent === 0 ? "L" : `a${s.agent}`,
        prompt_token_ids: prompt,
        generation_token_ids: generation,
        generation_log_probs: generation.map((_, k) => -0.25 * (k + 1)),
      };
    });
    return {
      rollout_id: `soup-${calls.length}`,
      reward: 1,
      agents: [
        { id: "L", parent: null, mode: "leader" },
        ...[1, 2, 3].map((k) => ({ id: `a${k}`, parent: "L", mode: "fork" })),
      ],
      calls,
    };
  });
}

// ---------------------------------------------------------------------------------------------
// SPEC v4's own rejections: an accepted v4 rollout (routes on every call) with one fault.

export type V4InvalidCode = "invalid_weight_version" | "invalid_routed_experts" | "invalid_rollout";

export interface V4InvalidCase {
  rollout: unknown;
  code: V4InvalidCode;
  /** The call the rejection is about (null: rollout-level). */
  call: string | null;
  what: string;
}

const BAD_VERSIONS: ((generated: number) => unknown)[] = [
  () => -1,
  () => MAX_TOKEN + 1,
  () => 1.5,
  () => "7",
  () => true,
  () => ({ version: 7 }),
  () => Number.NaN,
  (n) => new Array(n + 1).fill(3), // one too many
  (n) => (n === 0 ? [1] : new Array(n - 1).fill(3)), // one too few
  (n) => (n === 0 ? [-1] : [...new Array(n - 1).fill(3), -1]),
  (n) => (n === 0 ? [0.5] : [...new Array(n - 1).fill(2), 2.5]),
  (n) => (n === 0 ? ["1"] : [...new Array(n - 1).fill(2), "2"]),
];

/** The `L` and `K` a call's routed experts state (envelope or lists), null when none. */
function routeShape(value: unknown): { layers: number; topk: number } | null {
  if (typeof value === "string") {
    const [s, l, k] = value.split(":")[2].split("x").map(Number);
    return s === 0 ? null : { layers: l, topk: k };
  }
  const lists = value as number[][][] | undefined;
  return lists && lists.length > 0 ? { layers: lists[0].length, topk: lists[0][0].length } : null;
}

/** SPEC v4 rollouts the reference accepts, each with one v4 fault (weight version, routes, group id). */
export function invalidV4RolloutArb(): fc.Arbitrary<V4InvalidCase> {
  return fc
    .record({
      base: acceptedV4RolloutArb({ maxActions: 10, v4: { routes: "always" } }),
      kind: fc.constantFrom("version" as const, "routes" as const, "group" as const),
      at: fc.nat(),
      pick: fc.nat(),
    })
    .map(({ base, kind, at, pick }): V4InvalidCase | null => {
      const r = cloneRollout(base);
      if (kind === "group") {
        const bad = [7, true, ["g"], { id: "g" }, 0][pick % 5];
        r.group_id = bad;
        return { rollout: r, code: "invalid_rollout", call: null, what: `group_id ${JSON.stringify(bad)}` };
      }
      const k = at % r.calls.length;
      const c = r.calls[k];
      const generated = (c.generation_token_ids as ArrayLike<number>).length;
      const full = (c.prompt_token_ids as ArrayLike<number>).length + generated;
      if (kind === "version") {
        const bad = BAD_VERSIONS[pick % BAD_VERSIONS.length](generated);
        c.weight_version = bad;
        return {
          rollout: r,
          code: "invalid_weight_version",
          call: c.id as string,
          what: `weight_version fault ${pick % BAD_VERSIONS.length}`,
        };
      }
      const shape = routeShape(c.routed_experts) ?? { layers: 1 + (pick % 2), topk: 1 + ((pick >> 1) % 2) };
      const { layers, topk } = shape;
      if (full === 0 || (routeShape(c.routed_experts) === null && base.calls.some((x) => routeShape(x.routed_experts))))
        return null;
      const lists = Array.from({ length: full }, () =>
        Array.from({ length: layers }, () => new Array<number>(topk).fill(1)),
      );
      const i = pick % full;
      const fault = (pick >> 2) % 3;
      let what: string;
      if (fault === 0 && layers * topk > 1) {
        lists[i][0][0] = -1; // mixes −1 with other values
        what = `entry ${i} mixes −1 with ids`;
      } else if (fault === 1 && full >= 2) {
        lists.splice(0, 2); // two entries short of len(full(c))
        what = "S = len(full(c)) − 2";
      } else {
        lists[i][layers - 1][topk - 1] = -2 - (pick % 5); // another negative id
        what = `entry ${i} holds ${lists[i][layers - 1][topk - 1]}`;
      }
      c.routed_experts = (pick >> 4) % 2 === 0 ? lists : encodeEnvelope(lists, "int16", layers, topk);
      return { rollout: r, code: "invalid_routed_experts", call: c.id as string, what };
    })
    .filter((x): x is V4InvalidCase => x !== null);
}
