// explain on a harness that renders every prompt through a model's real chat template and
// tokenizer (./harness): (a) each break is found where the rendered prompt parts from what was
// sampled, and the report's prefix_break agrees, (b) with the causes it was built with (the first,
// and `also`: what else the template changed in that turn), (c) the same conversations
// token-in/token-out give one tree per context and no breaks, (d) a template that leaves out the
// assistant turn's terminator breaks at each resent turn's stop token (`special_token`).
// EXPLAIN_CONVERSATIONS sets how many conversations per model (default 12); EXPLAIN_TABLE=1
// prints the accuracy table of docs/breaks.md.
import { beforeAll, describe, expect, it } from "vitest";
import { init } from "../../src/index.js";
import { explainRollout, type ExplainedCall } from "../../src/explain/analyze.js";
import type { Callforest } from "../../src/types.js";
import { conversation, type Expected, type Fault } from "./harness/agent.js";
import { model, type ModelName } from "./harness/model.js";

const CONVERSATIONS = Number(process.env.EXPLAIN_CONVERSATIONS ?? 12);
const MODELS: ModelName[] = ["qwen3", "llama3_1", "gptoss"];

let cf: Callforest;
beforeAll(async () => {
  cf = await init();
});

function explainOf(name: ModelName, rollout: Parameters<typeof explainRollout>[0]): ExplainedCall[] {
  const m = model(name);
  const plan = cf.plan(rollout);
  try {
    expect(plan.report.status).toBe("ok");
    const explained = explainRollout(rollout, plan.forest, true, { decode: m.decode, isSpecial: m.isSpecial });
    // (a) The report's prefix_break is explain's, on every call SPEC's rule covers.
    expect(
      explained.filter((call) => call.kind === "prefix_break").map((call) => [call.call, call.near, call.at]),
    ).toEqual(plan.report.diagnostics.filter((d) => d.code === "prefix_break").map((d) => [d.call, d.near, d.at]));
    return explained;
  } finally {
    plan.release();
  }
}

interface Tally {
  breaks: number;
  /** Near and at as the harness says. */
  placed: number;
  /** The first cause it was built with, and the later ones (`also`). */
  right: number;
  /** Breaks built with more than one change. */
  compound: number;
  wrong: Map<string, number>;
}

describe.each(MODELS)("real chat template: %s", (name) => {
  const tallies = new Map<string, Tally>();
  const misses: string[] = [];
  /** Every cause the conversations were built with, first or later in a break. */
  const built = new Set<string>();
  /** How often each cause came later in a break (`also`), and how often that break was named right. */
  const later = new Map<string, { n: number; right: number }>();
  let unexpected = 0;

  it(`render mode: every break placed and named (${CONVERSATIONS} conversations)`, () => {
    const m = model(name);
    for (let seed = 1; seed <= CONVERSATIONS; seed++) {
      const { rollout, expected } = conversation(m, seed, "render");
      const explained = new Map(explainOf(name, rollout).map((call) => [call.call, call]));
      const wanted = new Map(expected.map((e) => [e.call, e]));
      for (const call of explained.values()) if (!wanted.has(call.call)) unexpected++;
      for (const e of expected) {
        const tally = tallies.get(e.cause) ?? { breaks: 0, placed: 0, right: 0, compound: 0, wrong: new Map() };
        tallies.set(e.cause, tally);
        tally.breaks++;
        for (const cause of [e.cause, ...e.also]) built.add(cause);
        if (e.also.length > 0) tally.compound++;
        const got = explained.get(e.call);
        if (got && got.near === e.near && got.at === e.at) tally.placed++;
        const right = got !== undefined && causesOf(got) === causesOf(e);
        for (const cause of e.also) {
          const count = later.get(cause) ?? { n: 0, right: 0 };
          later.set(cause, { n: count.n + 1, right: count.right + (right ? 1 : 0) });
        }
        if (right) tally.right++;
        else {
          const wrong = got === undefined ? "missed" : causesOf(got);
          tally.wrong.set(wrong, (tally.wrong.get(wrong) ?? 0) + 1);
          misses.push(describeMiss(rollout.rollout_id, e, got));
        }
      }
    }
    if (process.env.EXPLAIN_TABLE) printTable(name, tallies, later);
    if (process.env.EXPLAIN_DEBUG) console.log(misses.join("\n"), unexpected);
    // Every cause the harness builds occurs, and each break is where the rendered prompt parted.
    const required = (cause: string) => CONVERSATIONS >= (RARE.has(cause) ? 60 : 12);
    expect([...built].sort()).toEqual(BUILT[name].filter((cause) => required(cause) || built.has(cause)));
    for (const [cause, tally] of tallies) expect(tally.placed, cause).toBe(tally.breaks);
    expect(misses).toEqual([]);
    expect(unexpected).toBe(0);
  });

  it.each(RARE_FAULTS.filter(([, models]) => models.includes(name)))(
    "render mode, the harness's %s mistake on every turn it fits: named on each break",
    (fault) => {
      const m = model(name);
      let breaks = 0;
      for (let seed = 1; seed <= 3; seed++) {
        const { rollout, expected } = conversation(m, seed, "render", fault);
        const explained = explainOf(name, rollout);
        expect(explained.map((call) => [call.call, call.near, call.at, causesOf(call)])).toEqual(
          expected.map((e) => [e.call, e.near, e.at, causesOf(e)]),
        );
        breaks += expected.filter((e) => causesOf(e).includes(RARE_CAUSE[fault]!)).length;
      }
      expect(breaks).toBeGreaterThan(0);
    },
  );

  // Harmony's turns end otherwise (gpt-oss's template already rewrites the stop token).
  if (name !== "gptoss")
    it("render mode, a template without the assistant turn's terminator: named on each break", () => {
      const m = model(name);
      let breaks = 0;
      for (let seed = 1; seed <= 3; seed++) {
        const { rollout, expected } = conversation(m, seed, "render", undefined, { terminatorLost: true });
        const explained = explainOf(name, rollout);
        expect(explained.map((call) => [call.call, call.near, call.at, causesOf(call)])).toEqual(
          expected.map((e) => [e.call, e.near, e.at, causesOf(e)]),
        );
        // Every turn the next call resends breaks, at its stop token at the latest.
        breaks += expected.filter((e) => causesOf(e).endsWith("special_token")).length;
      }
      expect(breaks).toBeGreaterThan(10);
    });

  it("token-in/token-out: one tree per context, no breaks, a lost newline after each stop named", () => {
    const m = model(name);
    let glued = 0;
    for (let seed = 1; seed <= CONVERSATIONS; seed++) {
      const { rollout, contexts, expected } = conversation(m, seed, "tito");
      const plan = cf.plan(rollout);
      try {
        expect(plan.report.status).toBe("ok");
        expect(plan.report.roots).toBe(contexts);
        expect(plan.report.diagnostics).toEqual([]);
      } finally {
        plan.release();
      }
      const explained = explainOf(name, rollout);
      expect(explained.filter((call) => call.kind === "prefix_break")).toEqual([]);
      const roots = explained.filter((call) => call.kind === "root");
      expect(roots.map((call) => call.cause)).toEqual(Array(contexts - 1).fill("compaction"));
      // A harness that loses the template's newline after each stop token: every call it adds to.
      const glue = explained.filter((call) => call.kind === "glue");
      expect(glue.map((call) => [call.call, call.near, call.at, call.cause])).toEqual(
        expected.filter((e) => e.cause === "glue_differs").map((e) => [e.call, e.near, e.at, e.cause]),
      );
      glued += glue.length;
    }
    // Only Qwen3's template writes a newline after its stop token.
    if (name === "qwen3") expect(glued).toBeGreaterThan(0);
    else expect(glued).toBe(0);
  });
});

/** Mistakes the harness makes on few turns (plain answers only): 12 conversations may hold none. */
const RARE_FAULTS: [Fault, ModelName[]][] = [
  ["as_text", ["qwen3", "llama3_1", "gptoss"]],
  ["dup_stop", ["qwen3", "llama3_1"]],
];
const RARE_CAUSE: Partial<Record<Fault, string>> = { as_text: "special_as_text", dup_stop: "stop_duplicated" };
const RARE = new Set(Object.values(RARE_CAUSE));

/** The causes each model's conversations are built with (12 conversations hold all but the rare ones). */
const CHAT_CAUSES = [
  "compaction",
  "reasoning_dropped",
  "retokenized",
  "rewritten",
  "rewritten_prompt",
  "special_as_text",
  "special_token",
  "stop_duplicated",
  "whitespace",
];
const BUILT: Record<ModelName, string[]> = {
  qwen3: CHAT_CAUSES,
  llama3_1: CHAT_CAUSES,
  // Harmony's tool-call header is built, a doubled stop token is not (sorted: compared so).
  gptoss: [...CHAT_CAUSES.filter((cause) => cause !== "stop_duplicated"), "header_rewritten"].sort(),
};

/** A break's causes as one string: the first, then `also`. */
function causesOf(e: { cause: string; also?: readonly string[] }): string {
  return [e.cause, ...(e.also ?? [])].join(" → ");
}

function describeMiss(rollout: string, e: Expected, got: ExplainedCall | undefined): string {
  return `${rollout} ${e.call}: built ${causesOf(e)} near ${e.near} at ${e.at}, explained ${
    got ? `${causesOf(got)} near ${got.near} at ${got.at}` : "nothing"
  }`;
}

function printTable(name: string, tallies: Map<string, Tally>, later: Map<string, { n: number; right: number }>): void {
  const lines = [...tallies].map(([cause, t]) => {
    const wrong = [...t.wrong].map(([c, n]) => `${c} ${n}`).join(", ");
    const next = later.get(cause);
    return `| ${name} | ${cause} | ${t.breaks} | ${t.compound} | ${t.placed} | ${t.right} (${((100 * t.right) / t.breaks).toFixed(1)}%) | ${next ? `${next.n} (${next.right} right)` : "—"} | ${wrong || "—"} |`;
  });
  for (const [cause, next] of later)
    if (!tallies.has(cause)) lines.push(`| ${name} | ${cause} | 0 | — | — | — | ${next.n} (${next.right} right) | — |`);
  console.log(lines.join("\n"));
}
