// explain on a harness that renders every prompt through a model's real chat template and
// tokenizer (./harness): (a) each break is found where the rendered prompt parts from what was
// sampled, and the report's prefix_break agrees, (b) with the cause it was built with, (c) the same conversations token-in/token-out
// give one tree per context and no breaks. EXPLAIN_CONVERSATIONS sets how many conversations per
// model (default 12); EXPLAIN_TABLE=1 prints the accuracy table of docs/breaks.md.
import { beforeAll, describe, expect, it } from "vitest";
import { init } from "../../src/index.js";
import { explainRollout, type ExplainedCall } from "../../src/explain/analyze.js";
import type { Callforest } from "../../src/types.js";
import { conversation, type Expected } from "./harness/agent.js";
import { model, type ModelName } from "./harness/model.js";

const CONVERSATIONS = Number(process.env.EXPLAIN_CONVERSATIONS ?? 12);
const MODELS: ModelName[] = ["qwen3", "llama3_1"];

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
  /** The cause it was built with. */
  right: number;
  wrong: Map<string, number>;
}

describe.each(MODELS)("real chat template: %s", (name) => {
  const tallies = new Map<string, Tally>();
  const misses: string[] = [];
  let unexpected = 0;

  it(`render mode: every break placed and named (${CONVERSATIONS} conversations)`, () => {
    const m = model(name);
    for (let seed = 1; seed <= CONVERSATIONS; seed++) {
      const { rollout, expected } = conversation(m, seed, "render");
      const explained = new Map(explainOf(name, rollout).map((call) => [call.call, call]));
      const wanted = new Map(expected.map((e) => [e.call, e]));
      for (const call of explained.values()) if (!wanted.has(call.call)) unexpected++;
      for (const e of expected) {
        const tally = tallies.get(e.cause) ?? { breaks: 0, placed: 0, right: 0, wrong: new Map() };
        tallies.set(e.cause, tally);
        tally.breaks++;
        const got = explained.get(e.call);
        if (got && got.near === e.near && got.at === e.at) tally.placed++;
        if (got?.cause === e.cause) tally.right++;
        else {
          tally.wrong.set(got?.cause ?? "missed", (tally.wrong.get(got?.cause ?? "missed") ?? 0) + 1);
          misses.push(describeMiss(rollout.rollout_id, e, got));
        }
      }
    }
    if (process.env.EXPLAIN_TABLE) printTable(name, tallies);
    if (process.env.EXPLAIN_DEBUG) console.log(misses.join("\n"), unexpected);
    // Every cause the harness builds occurs, and each break is where the rendered prompt parted.
    expect([...tallies.keys()].sort()).toEqual(
      [
        "compaction",
        "reasoning_dropped",
        "retokenized",
        "rewritten",
        "rewritten_prompt",
        "special_token",
        "whitespace",
      ].filter((cause) => CONVERSATIONS >= 12 || tallies.has(cause)),
    );
    for (const [cause, tally] of tallies) expect(tally.placed, cause).toBe(tally.breaks);
    expect(misses).toEqual([]);
    expect(unexpected).toBe(0);
  });

  it("token-in/token-out: one tree per context, no breaks", () => {
    const m = model(name);
    for (let seed = 1; seed <= CONVERSATIONS; seed++) {
      const { rollout, contexts } = conversation(m, seed, "tito");
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
      expect(explained.map((call) => call.cause)).toEqual(Array(contexts - 1).fill("compaction"));
    }
  });
});

function describeMiss(rollout: string, e: Expected, got: ExplainedCall | undefined): string {
  return `${rollout} ${e.call}: built ${e.cause} near ${e.near} at ${e.at}, explained ${
    got ? `${got.cause} near ${got.near} at ${got.at}` : "nothing"
  }`;
}

function printTable(name: string, tallies: Map<string, Tally>): void {
  const lines = [...tallies].map(([cause, t]) => {
    const wrong = [...t.wrong].map(([c, n]) => `${c} ${n}`).join(", ");
    return `| ${name} | ${cause} | ${t.breaks} | ${t.placed} | ${t.right} (${((100 * t.right) / t.breaks).toFixed(1)}%) | ${wrong || "—"} |`;
  });
  console.log(lines.join("\n"));
}
