// SPEC's worked example gives exactly SPEC's five rows — masks and logprobs included — on every
// backend, from plain and typed arrays, through the API, the builder and the CLI.
import { beforeAll, describe, expect, it } from "vitest";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { init, type Callforest, type Plan, type Rollout } from "../../src/index.js";
import { main } from "../../src/cli/main.js";
import {
  EXAMPLE_PATH,
  EXPECTED_COUNTS,
  EXPECTED_ROWS,
  buildFrom,
  loadExample,
  packMask,
  typedExample,
} from "../support/worked-example.js";
import { captureOutput } from "../support/capture.js";
import { tempDirs } from "../support/temp-dirs.js";

const tmp = tempDirs("example");

const BACKENDS = [
  { name: "ts", options: { backend: "ts" as const } },
  { name: "wasm simd", options: { backend: "wasm" as const, simd: true } },
  { name: "wasm scalar", options: { backend: "wasm" as const, simd: false } },
];

function expectSpecRows(plan: Plan): void {
  expect(plan.report).toMatchObject({ rollout_id: "login-bug", status: "ok", ...EXPECTED_COUNTS, diagnostics: [] });
  expect(plan.rows).toHaveLength(5);
  plan.rows.forEach((row, i) => {
    const want = EXPECTED_ROWS[i];
    expect(row).toMatchObject({
      index: i,
      rolloutId: "login-bug",
      leaf: want.leaf,
      agent: want.agent,
      calls: want.calls,
      trained: want.trained,
      context: want.context,
      reward: 1,
      numTokens: want.tokenIds.length,
    });
    expect(row.tokenIds).toBeInstanceOf(Int32Array);
    expect(Array.from(row.tokenIds)).toEqual(want.tokenIds);
    expect(row.logprobs).toBeInstanceOf(Float32Array);
    expect(Array.from(row.logprobs)).toEqual(want.logprobs.map(Math.fround));
    expect(row.lossMask).toBeInstanceOf(Uint8Array);
    expect(Array.from(row.lossMask)).toEqual(Array.from(packMask(want.mask)));
  });
}

describe.each(BACKENDS)("worked example on $name", ({ options }) => {
  let cf: Callforest;
  beforeAll(async () => {
    cf = await init(options);
  });

  it("reports its backend", () => {
    expect(cf.backend).toBe(options.backend);
    expect(cf.simd).toBe(options.backend === "wasm" && options.simd);
  });

  it("plans plain arrays into SPEC's five rows", () => {
    const plan = cf.plan(loadExample());
    expectSpecRows(plan);
    plan.release();
  });

  it("plans typed arrays into the same rows", () => {
    const plan = cf.plan(typedExample());
    expectSpecRows(plan);
    plan.release();
  });

  it("links the forest as SPEC's table says", () => {
    const plan = cf.plan(loadExample());
    const parents = Object.fromEntries(plan.forest.map((c) => [c.id, c.parent]));
    expect(parents).toEqual({
      C1: null,
      C2: null,
      C3: "C1",
      C4: "C2",
      C5: null,
      C6: "C5",
      C7: "C3",
      C8: "C7",
      C9: "C8",
      C10: "C7",
      C11: null,
      C12: "C11",
    });
    expect(plan.forest.filter((c) => c.root).map((c) => c.id)).toEqual(["C1", "C2", "C5", "C11"]);
    expect(plan.forest.filter((c) => c.leaf).map((c) => c.id)).toEqual(["C4", "C6", "C9", "C10", "C12"]);
    expect(plan.forest.find((c) => c.id === "C7")!.children).toEqual(["C8", "C10"]);
    plan.release();
  });

  it("builds the same rows through the builder, writing arrays in place", () => {
    const plan = buildFrom(cf, loadExample());
    expectSpecRows(plan);
    plan.release();
  });
});

describe("zero copy on the WASM backend", () => {
  it("hands out rows and builder slots as views over one linear memory", async () => {
    const cf = await init();
    const builder = cf.builder({ rollout_id: "r", reward: 0 });
    const slot = builder.stage(3, 2);
    slot.promptTokenIds.set([1, 2, 3]);
    slot.generationTokenIds.set([4, 5]);
    slot.logprobs.set([-1, -2]);
    builder.commit({ id: "a" });
    const plan = builder.finish();
    const row = plan.rows[0];
    expect(Array.from(row.tokenIds)).toEqual([1, 2, 3, 4, 5]);
    // One buffer for the slot and every array of every row: the instance's memory.
    expect(row.tokenIds.buffer).toBe(slot.promptTokenIds.buffer);
    expect(row.logprobs.buffer).toBe(row.tokenIds.buffer);
    expect(row.lossMask.buffer).toBe(row.tokenIds.buffer);
    expect(row.tokenIds.buffer.byteLength).toBeGreaterThanOrEqual(65536);
    plan.release();
  });
});

describe("worked example through the CLI", () => {
  it("writes SPEC's five rows and one report line", async () => {
    const dir = tmp();
    for (const backend of ["wasm", "ts"]) {
      const rowsFile = join(dir, `rows-${backend}.jsonl`);
      const reportFile = join(dir, `report-${backend}.jsonl`);
      const run = await captureOutput(() =>
        main(["rows", EXAMPLE_PATH, "-o", rowsFile, "--report", reportFile, "--backend", backend]),
      );
      expect(run.code).toBe(0);
      const lines = readFileSync(rowsFile, "utf8")
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l));
      expect(lines).toHaveLength(5);
      lines.forEach((line, i) => {
        const want = EXPECTED_ROWS[i];
        expect(Object.keys(line)).toEqual([
          "rollout_id",
          "row",
          "leaf",
          "agent",
          "calls",
          "trained",
          "context",
          "num_tokens",
          "token_ids",
          "logprobs",
          "loss_mask",
          "reward",
          "group_id",
          "media",
        ]);
        expect(line).toEqual({
          rollout_id: "login-bug",
          row: i,
          leaf: want.leaf,
          agent: want.agent,
          calls: want.calls,
          trained: want.trained,
          context: want.context,
          num_tokens: want.tokenIds.length,
          token_ids: want.tokenIds,
          // Shortest float32 text: reads back as the input's decimal.
          logprobs: want.logprobs,
          loss_mask: Buffer.from(packMask(want.mask)).toString("base64"),
          reward: 1,
          group_id: null,
          media: [],
        });
      });
      const reports = readFileSync(reportFile, "utf8")
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l));
      expect(reports).toEqual([
        // A .json input's line: where the rollout starts (docs/cli.md).
        { rollout_id: "login-bug", status: "ok", line: 1, ...EXPECTED_COUNTS, diagnostics: [] },
        // the run record (docs/cli.md)
        { run: expect.objectContaining({ status: "ok", rollouts: 1, rejected: 0, records: 5, output: rowsFile }) },
      ]);
    }
  });

  it("shows the forest and the rows table", async () => {
    const run = await captureOutput(() => main(["show", EXAMPLE_PATH]));
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("4 trees, 5 leaves, 5 rows");
    expect(run.stdout).toMatch(/├─ C8 \[F · fork\].*\n\s+│\s+└─ C9 \[F · fork\].*leaf → row 2/);
    expect(run.stdout).toMatch(/2\s+C9\s+F\s+C1 C3 C7 C8 C9\s+C8 C9\s+C1 C3 C7/);
    expect(run.stdout).toMatch(/3\s+C10\s+L\s+C1 C3 C7 C10\s+C1 C3 C7 C10\s+–/);
  });

  it("show prints the whole forest and rows table exactly (marks, agents, alignment, token totals)", async () => {
    const run = await captureOutput(() => main(["show", EXAMPLE_PATH]));
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(
      [
        "rollout login-bug: 12 calls, 12 eligible, 4 trees, 5 leaves, 5 rows",
        "agents: L (leader), B (background) ← L, A (fresh) ← L, F (fork) ← L",
        "",
        "forest",
        "  C1 [L · leader] 5+2 tokens  root, trained in row 3",
        "  └─ C3 [L · leader] 8+2 tokens  trained in row 3",
        "     └─ C7 [L · leader] 12+2 tokens  trained in row 3",
        "        ├─ C8 [F · fork] 15+2 tokens  trained in row 2",
        "        │  └─ C9 [F · fork] 18+1 tokens  leaf → row 2",
        "        └─ C10 [L · leader] 16+3 tokens  leaf → row 3",
        "  C2 [B · background] 3+2 tokens  root, trained in row 0",
        "  └─ C4 [B · background] 7+1 tokens  leaf → row 0",
        "  C5 [A · fresh] 3+2 tokens  root, trained in row 1",
        "  └─ C6 [A · fresh] 6+2 tokens  leaf → row 1",
        "  C11 [L · leader] 6+1 tokens  root, trained in row 4",
        "  └─ C12 [L · leader] 8+1 tokens  leaf → row 4",
        "",
        "rows",
        "  row  leaf  agent  path (root first)  trains        context only  tokens",
        "  0    C4    B      C2 C4              C2 C4         –             8",
        "  1    C6    A      C5 C6              C5 C6         –             8",
        "  2    C9    F      C1 C3 C7 C8 C9     C8 C9         C1 C3 C7      19",
        "  3    C10   L      C1 C3 C7 C10       C1 C3 C7 C10  –             19",
        "  4    C12   L      C11 C12            C11 C12       –             9",
        "",
        "tokens: 21 generated, 21 trained, 63 in rows, 49 unique",
        "",
      ].join("\n"),
    );
  });

  it("show lists the calls it did not link, each with why (an unkept retry, an empty generation)", async () => {
    const file = join(tmp(), "unlinked.json");
    const rollout = loadExample() as Rollout & { calls: { kept?: boolean }[] };
    rollout.calls.splice(1, 0, { ...structuredClone(rollout.calls[0]), id: "retry", kept: false });
    rollout.calls.push({
      id: "empty",
      agent: "L",
      prompt_token_ids: [1],
      generation_token_ids: [],
      generation_log_probs: [],
    });
    writeFileSync(file, JSON.stringify(rollout));
    const run = await captureOutput(() => main(["show", file]));
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("\n  not linked: retry (not kept), empty (empty generation)\n");
    expect(run.stdout).toContain("rollout login-bug: 14 calls, 12 eligible, 4 trees");
  });

  it(
    "show escapes control characters from the data (no forged lines, " + "no terminal escapes) and counts in words",
    async () => {
      const file = join(tmp(), "names.jsonl");
      const rollout = {
        rollout_id: "r\nFAKE LINE",
        reward: 1,
        calls: [
          {
            id: "a\r\u001b[31mRED\u009b2J\u202eevil",
            agent: "L\nX",
            prompt_token_ids: [1],
            generation_token_ids: [2],
            generation_log_probs: [-0.5],
          },
        ],
      };
      writeFileSync(file, JSON.stringify(rollout) + "\n");
      const run = await captureOutput(() => main(["show", file]));
      expect(run.code).toBe(0);
      expect(run.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
      expect(run.stdout.split("\n")[0]).toBe("rollout r\\nFAKE LINE: 1 call, 1 eligible, 1 tree, 1 leaf, 1 row");
      expect(run.stdout).toContain("a\\r\\u001b[31mRED\\u009b2J\\u202eevil [L\\nX]");
    },
  );

  it("demo plans the built-in example", async () => {
    const run = await captureOutput(() => main(["demo"]));
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("row 3  C10   19 tokens  0000011011001100111");
    expect(run.stdout).toContain("every generated token trained exactly once: 21 of 21");
  });
});

// Keep the type import used: the example file is a Rollout.
export type { Rollout };
