// One run at a time per output (issue 39): two runs of one shard could leave a part from one and
// its report from the other. A run holds `.NAME.lock` beside each output until its files are in
// place; a second run is refused in one line naming the first; a killed run's lock is taken over.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { generateSmallRollouts } from "../../bench/generate.js";
import { recordMatches } from "../../src/cli/run-record.js";
import { rolloutToJson } from "../../src/ingest/read.js";
import { HOST } from "../../src/ingest/sink.js";
import { cli } from "../ingest/cli.js";
import { ROOT } from "../support/fixtures.js";
import { tempDirs } from "../support/temp-dirs.js";

const BIN = join(ROOT, "bin", "callforest.js");
const tempDir = tempDirs("output-lock");

/** A shard of a few small rollouts at `path`; returns its text. */
function shard(path: string, seed: number): string {
  const text =
    generateSmallRollouts(3, seed, { arrays: "plain" })
      .map((r, k) => rolloutToJson({ ...r, rollout_id: `r${seed}-${k}` }))
      .join("\n") + "\n";
  writeFileSync(path, text);
  return text;
}

/** A process id that no longer exists (a child that has exited). */
function deadPid(): number {
  const done = spawnSync(process.execPath, ["-e", "console.log(process.pid)"], { encoding: "utf8" });
  return Number(done.stdout.trim());
}

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

describe("rows: one run at a time per output", () => {
  test("a second run of a shard while the first writes it is refused, naming the first; the first's part and report agree", async () => {
    const dir = tempDir();
    const out = join(dir, "dataset");
    const fifoDir = join(dir, "a");
    mkdirSync(fifoDir);
    const fifo = join(fifoDir, "s1.jsonl");
    expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
    const other = join(dir, "s1.jsonl");
    shard(other, 2);
    const first = spawn(process.execPath, [BIN, "rows", fifo, "--output-dir", out, "--quiet"], { stdio: "ignore" });
    children.push(first);
    const exited = new Promise<number | null>((resolve) => first.on("close", (code) => resolve(code)));
    // The FIFO opens once the first run reads its shard: its outputs are locked by then.
    const writer = createWriteStream(fifo);
    await new Promise((resolve) => writer.once("open", resolve));
    const second = await cli("rows", other, "--output-dir", out, "--quiet");
    const lock = join(out, ".s1.jsonl.lock");
    expect([second.code, second.stderr]).toEqual([
      2,
      `callforest: ${join(out, "s1.jsonl")} is being written by another run (process ${first.pid} on ${HOST}): ` +
        `wait for it to end, or remove ${lock} if no run is writing\n`,
    ]);
    const text = shard(join(dir, "first.jsonl"), 1);
    writer.end(text);
    expect(await exited).toBe(0);
    const report = readFileSync(join(out, "_reports", "s1.jsonl"), "utf8");
    expect(recordMatches(report, readFileSync(join(out, "s1.jsonl")))).toBe(true);
    expect(report).toContain('"rollout_id":"r1-0"');
    expect(readdirSync(out).filter((name) => name.endsWith(".lock"))).toEqual([]);
    expect(readdirSync(join(out, "_reports")).filter((name) => name.endsWith(".lock"))).toEqual([]);
  });

  test("-o and --report are locked too, and released after the run", async () => {
    const dir = tempDir();
    const input = join(dir, "in.jsonl");
    shard(input, 3);
    const rows = join(dir, "rows.jsonl");
    const report = join(dir, "report.jsonl");
    writeFileSync(join(dir, ".report.jsonl.lock"), `${HOST} ${process.ppid}\n`); // a live process
    const refused = await cli("rows", input, "-o", rows, "--report", report);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(
      `callforest: ${report} is being written by another run (process ${process.ppid} on ${HOST}): ` +
        `wait for it to end, or remove ${join(dir, ".report.jsonl.lock")} if no run is writing\n`,
    );
    expect([existsSync(rows), existsSync(report), existsSync(join(dir, ".rows.jsonl.lock"))]).toEqual([
      false,
      false,
      false,
    ]);
  });

  test("a lock a killed run of this host left is taken over; another host's is not", async () => {
    const dir = tempDir();
    const input = join(dir, "in.jsonl");
    shard(input, 4);
    const rows = join(dir, "rows.jsonl");
    const lock = join(dir, ".rows.jsonl.lock");
    writeFileSync(lock, `${HOST} ${deadPid()}\n`);
    const run = await cli("rows", input, "-o", rows, "--quiet");
    expect([run.code, run.stderr]).toEqual([0, ""]);
    expect(existsSync(rows)).toBe(true);
    expect(existsSync(lock)).toBe(false);
    writeFileSync(lock, `elsewhere.example 1\n`);
    const refused = await cli("rows", input, "-o", rows, "--quiet");
    expect([refused.code, refused.stderr]).toEqual([
      2,
      `callforest: ${rows} is being written by another run (process 1 on elsewhere.example): ` +
        `wait for it to end, or remove ${lock} if no run is writing\n`,
    ]);
  });
});
