// readRollouts in the Node entry (src/read-node.ts): a file in any format the CLI reads yields the
// rollouts the CLI's reader (src/ingest/read.ts) converts, and each rejection the CLI's line.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { init, readRollouts, type ReadRejection, type ReadRollout } from "../src/index.js";
import { readRollouts as cliRead } from "../src/ingest/read.js";
import { rejectionLine } from "../src/messages.js";
import type { FromOption } from "../src/formats/types.js";
import { tokenDirectory } from "../src/files/tokens-dir.js";
import {
  COMPETITIVE_CODING,
  LOGIN_BUG,
  OBSERVED_DIR,
  OBSERVED_ROWS,
  ROOT,
  VLLM_ROUND_TRIP,
} from "./support/fixtures.js";
import { tempDirs } from "./support/temp-dirs.js";

const tmp = tempDirs("read-node");
const ATIF = join(ROOT, "examples", "atif", "fix-login", "agent", "trajectory.json");
const COMPACTION = join(ROOT, "test", "fixtures", "gym-compaction", "context_compacted_response.json");

async function collect(
  source: Parameters<typeof readRollouts>[0],
  options: Parameters<typeof readRollouts>[1] = {},
): Promise<{ rollouts: ReadRollout[]; rejections: ReadRejection[] }> {
  const rollouts: ReadRollout[] = [];
  const rejections: ReadRejection[] = [];
  for await (const r of readRollouts(source, { ...options, onRejected: (x) => rejections.push(x) })) rollouts.push(r);
  return { rollouts, rejections };
}

/** What the CLI's reader makes of the same file: rollouts as readRollouts yields them, and the rejection lines. */
async function viaCli(file: string, from: FromOption, tokens?: string) {
  const rollouts: ReadRollout[] = [];
  const lines: string[] = [];
  const options = tokens === undefined ? { from } : { from, tokens: tokenDirectory(tokens) };
  for await (const { where, result } of cliRead([file], options)) {
    if (result.ok)
      rollouts.push(
        result.diagnostics.length === 0 ? result.rollout : { ...result.rollout, diagnostics: result.diagnostics },
      );
    else lines.push(rejectionLine(where, result.reason, result.detail, result.code));
  }
  return { rollouts, lines };
}

describe("readRollouts (Node)", () => {
  it.each([
    ["callforest", LOGIN_BUG, undefined],
    ["gym-rollout", COMPETITIVE_CODING, undefined],
    ["gym-rollout", VLLM_ROUND_TRIP, undefined],
    ["gym-observed", OBSERVED_ROWS, OBSERVED_DIR],
    ["gym-compaction", COMPACTION, undefined],
    ["atif", ATIF, undefined],
  ] as const)("reads %s (%s) as the CLI does", async (from, file, tokens) => {
    for (const format of [from, "auto"] as const) {
      const read = await collect(file, { from: format, tokens });
      const cli = await viaCli(file, format, tokens);
      expect(read.rollouts).toEqual(cli.rollouts);
      expect(read.rejections.map((r) => r.message)).toEqual(cli.lines);
      expect(read.rollouts.length + read.rejections.length).toBeGreaterThan(0);
    }
  });

  it("reads a JSONL file for cf.plan, as the README's example does", async () => {
    const dir = tmp();
    const file = join(dir, "run.jsonl");
    const rollout = JSON.parse(await import("node:fs").then((fs) => fs.readFileSync(LOGIN_BUG, "utf8")));
    writeFileSync(file, `${JSON.stringify(rollout)}\n\n${JSON.stringify({ ...rollout, rollout_id: "again" })}\n`);
    const cf = await init({ backend: "ts" });
    const trained: number[] = [];
    for await (const r of readRollouts(file)) {
      const plan = cf.plan(r);
      trained.push(plan.report.trained_tokens);
      plan.release();
    }
    expect(trained).toEqual([21, 21]);
  });

  it("gives each rejection the CLI's line and reads on; by default the line goes to console.warn", async () => {
    const dir = tmp();
    const file = join(dir, "mixed.jsonl");
    writeFileSync(
      file,
      `{"rollout_id":"a","reward":0,"calls":[]}\n{oops\n{"steps":7,"agent":{}}\n{"rollout_id":"b","reward":1,"calls":[]}\n`,
    );
    const { rollouts, rejections } = await collect(file);
    expect(rollouts.map((r) => r.rollout_id)).toEqual(["a", "b"]);
    expect(rejections.map((r) => [r.where, r.line, r.reason, r.code])).toEqual([
      [`${file}:2`, 2, "malformed_json", "malformed_json"],
      [`${file}:3`, 3, "invalid_rollout", "unknown_format"],
    ]);
    expect(rejections[0].message).toMatch(new RegExp(`^${file}:2: rejected \\(malformed_json\\): not JSON at byte 1`));
    const warned: string[] = [];
    const warn = console.warn;
    console.warn = (line: string) => warned.push(line);
    try {
      for await (const _ of readRollouts(file));
    } finally {
      console.warn = warn;
    }
    expect(warned).toEqual(rejections.map((r) => r.message));
  });

  it("reads a trajectory's subagents and its Harbor trial's reward beside it, and an ATIF stream without them", async () => {
    const { rollouts } = await collect(ATIF);
    expect(rollouts.map((r) => [r.rollout_id, r.reward, r.agents?.length, r.calls.length])).toEqual([
      ["fix-login__a1b2c3", 1, 2, 5],
    ]);
    const dir = tmp();
    mkdirSync(join(dir, "agent"));
    writeFileSync(join(dir, "agent", "t.json"), JSON.stringify({ session_id: "s", agent: {}, steps: [] }));
    const { rollouts: bare } = await collect(join(dir, "agent", "t.json"), { reward: 0.5 });
    expect(bare).toEqual([
      { rollout_id: "s", reward: 0.5, agents: [{ id: "s", parent: null, mode: "leader" }], calls: [] },
    ]);
  });

  it("takes bytes, Node and web streams, a Blob, and a file: URL", async () => {
    const text = (await import("node:fs")).readFileSync(LOGIN_BUG);
    const expected = (await collect(LOGIN_BUG)).rollouts;
    const split = [text.subarray(0, 100), text.subarray(100, 101), text.subarray(101)];
    for (const source of [
      new Uint8Array(text),
      Readable.from(split),
      new Blob([text]),
      new URL(`file://${LOGIN_BUG}`),
      Readable.toWeb(Readable.from(split)) as ReadableStream<Uint8Array>,
    ]) {
      expect((await collect(source)).rollouts).toEqual(expected);
    }
    // An input named by neither .json nor .jsonl: JSONL, lines split across chunks, a BOM skipped.
    const line = JSON.stringify(JSON.parse(text.toString()));
    const jsonl = Buffer.from(`\uFEFF${line}\n\n${line}\n`);
    const parts = [jsonl.subarray(0, 7), jsonl.subarray(7, 300), jsonl.subarray(300)];
    const { rollouts, rejections } = await collect(Readable.from(parts), { name: "run" });
    expect(rejections).toEqual([]);
    expect(rollouts).toEqual([...expected, ...expected]);
  });

  it("a file it cannot read throws one line naming it", async () => {
    await expect(collect(join(tmp(), "missing.jsonl"))).rejects.toThrow(/^cannot read .*missing\.jsonl: no such file$/);
  });
});
