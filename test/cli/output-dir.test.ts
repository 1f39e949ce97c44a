// `rows --output-dir`: a partitioned dataset (issue 28). One part per input shard, each written
// whole with its own report (DIR/_reports/<shard>.jsonl, its run record naming the part); DuckDB
// reads DIR/*.parquet as one table, the same rows as one run over every shard; a rerun of a shard
// replaces only its part; a killed run leaves hidden partial files, never a part that looks whole.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createWriteStream, existsSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { generateSmallRollouts } from "../../bench/generate.js";
import { recordMatches, runRecordOf } from "../../src/cli/run-record.js";
import { rolloutToJson } from "../../src/ingest/read.js";
import { parquetRecords } from "../columnar/support.js";
import { cli, lines } from "../ingest/cli.js";
import { ROOT } from "../support/fixtures.js";
import { tempDirs } from "../support/temp-dirs.js";

const BIN = join(ROOT, "bin", "callforest.js");
const tempDir = tempDirs("output-dir");

/** `count` shards of a few small rollouts each (distinct ids), in DIR/shards. */
function shards(dir: string, count = 3): string {
  const at = join(dir, "shards");
  spawnSync("mkdir", ["-p", at]);
  for (let i = 1; i <= count; i++) {
    const rollouts = generateSmallRollouts(4, 100 + i, { arrays: "plain" }).map((r, k) =>
      rolloutToJson({ ...r, rollout_id: `s${i}-${k}` }),
    );
    writeFileSync(join(at, `s${i}.jsonl`), rollouts.join("\n") + "\n");
  }
  return at;
}

const byRollout = (records: Record<string, unknown>[]) =>
  [...records].sort((a, b) =>
    a.rollout_id === b.rollout_id
      ? (a.row as number) - (b.row as number)
      : String(a.rollout_id) < String(b.rollout_id)
        ? -1
        : 1,
  );

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

describe("rows --output-dir", () => {
  test("a directory of shards: a part and a report per shard, read by DuckDB as one table equal to one run's", async () => {
    const dir = tempDir();
    const input = shards(dir);
    const out = join(dir, "dataset");
    const run = await cli("rows", input, "--output-dir", out, "--format", "parquet", "--quiet");
    expect([run.code, run.stderr]).toEqual([0, ""]);
    expect(readdirSync(out).sort()).toEqual(["_reports", "s1.parquet", "s2.parquet", "s3.parquet"]);
    expect(readdirSync(join(out, "_reports")).sort()).toEqual(["s1.jsonl", "s2.jsonl", "s3.jsonl"]);
    for (const part of ["s1", "s2", "s3"]) {
      const report = readFileSync(join(out, "_reports", `${part}.jsonl`), "utf8");
      expect(lines(report).map((line) => JSON.parse(line).rollout_id)).toEqual([0, 1, 2, 3].map((k) => `${part}-${k}`));
      expect(runRecordOf(report)?.output).toBe(`${part}.parquet`);
      expect(recordMatches(report, readFileSync(join(out, `${part}.parquet`)))).toBe(true);
    }
    const single = join(dir, "single.parquet");
    const whole = await cli(
      "rows",
      ...["s1", "s2", "s3"].map((s) => join(input, `${s}.jsonl`)),
      "-o",
      single,
      "--quiet",
    );
    expect(whole.code).toBe(0);
    const parts = (await parquetRecords(join(out, "*.parquet"))).records;
    const expected = (await parquetRecords(single)).records;
    expect(parts.length).toBe(expected.length);
    expect(parts.length).toBeGreaterThan(12);
    expect(byRollout(parts)).toEqual(byRollout(expected));
  });

  test("JSONL parts, from shards named one by one; the summary counts every shard", async () => {
    const dir = tempDir();
    const input = shards(dir, 2);
    const out = join(dir, "jsonl");
    const run = await cli("rows", join(input, "s2.jsonl"), join(input, "s1.jsonl"), "--output-dir", out);
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/^callforest: 8 rollouts \(8 ok, 0 rejected\), \d+ rows\n$/);
    expect(readdirSync(out).sort()).toEqual(["_reports", "s1.jsonl", "s2.jsonl"]);
    expect(recordMatches(readFileSync(join(out, "_reports", "s1.jsonl"), "utf8"), readFileSync(join(out, "s1.jsonl"))));
  });

  test("a rerun of one shard replaces its part and report only", async () => {
    const dir = tempDir();
    const input = shards(dir);
    const out = join(dir, "dataset");
    expect((await cli("rows", input, "--output-dir", out, "--format", "parquet", "--quiet")).code).toBe(0);
    const identity = (name: string) => {
      const stat = statSync(join(out, name));
      return [stat.ino, stat.mtimeMs, stat.size];
    };
    const before = ["s1.parquet", "s3.parquet", "_reports/s1.jsonl", "_reports/s3.jsonl"].map(identity);
    const s2 = join(input, "s2.jsonl");
    writeFileSync(s2, readFileSync(s2, "utf8").split("\n").slice(1).join("\n")); // one rollout fewer
    const run = await cli("rows", s2, "--output-dir", out, "--format", "parquet", "--quiet");
    expect(run.code).toBe(0);
    expect(["s1.parquet", "s3.parquet", "_reports/s1.jsonl", "_reports/s3.jsonl"].map(identity)).toEqual(before);
    const report = readFileSync(join(out, "_reports", "s2.jsonl"), "utf8");
    expect(lines(report)).toHaveLength(3);
    expect(recordMatches(report, readFileSync(join(out, "s2.parquet")))).toBe(true);
  });

  test("kill -9 during a shard: the parts before it are whole, its own is a hidden partial file only", async () => {
    const dir = tempDir();
    const input = shards(dir, 2);
    const fifo = join(input, "s3.jsonl");
    expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
    const out = join(dir, "dataset");
    const child = spawn(
      process.execPath,
      [BIN, "rows", join(input, "s1.jsonl"), join(input, "s2.jsonl"), fifo, "--output-dir", out, "--format", "parquet"],
      { stdio: "ignore" },
    );
    children.push(child);
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on("close", (_, signal) => resolve(signal)));
    // The FIFO opens once the child reads its third shard: the first two are committed by then.
    const writer = createWriteStream(fifo);
    await new Promise((resolve) => writer.once("open", resolve));
    writer.on("error", () => {});
    writer.write(readFileSync(join(input, "s1.jsonl"), "utf8").split("\n")[0]);
    child.kill("SIGKILL");
    expect(await exited).toBe("SIGKILL");
    writer.destroy();
    const visible = readdirSync(out).filter((name) => !name.startsWith("."));
    expect(visible.sort()).toEqual(["_reports", "s1.parquet", "s2.parquet"]);
    expect(readdirSync(out).some((name) => name.startsWith(".s3.parquet.partial-"))).toBe(true);
    expect(
      readdirSync(join(out, "_reports"))
        .filter((name) => !name.startsWith("."))
        .sort(),
    ).toEqual(["s1.jsonl", "s2.jsonl"]);
    const rows = (await parquetRecords(join(out, "*.parquet"))).records;
    expect(new Set(rows.map((row) => String(row.rollout_id).slice(0, 2)))).toEqual(new Set(["s1", "s2"]));
  });

  test.each([
    [["-o", "x.parquet"], "callforest: --output-dir writes one file per input shard: drop -o (or --output-dir)\n"],
    [["--report", "r.jsonl"], "callforest: --output-dir writes each shard's report under _reports/: drop --report\n"],
  ])("%j beside --output-dir is a usage error, and nothing is written", async (argv, message) => {
    const dir = tempDir();
    const input = shards(dir, 1);
    const run = await cli(
      "rows",
      input,
      "--output-dir",
      join(dir, "out"),
      ...argv.map((a) => (a.includes(".") ? join(dir, a) : a)),
    );
    expect([run.code, run.stderr]).toEqual([2, message]);
    expect(existsSync(join(dir, "out"))).toBe(false);
  });

  test.each(["_under.jsonl", ".hid.jsonl", "_reports.jsonl", ".jsonl"])(
    "a shard named %s, whose part pyarrow would skip, is refused in one line",
    async (name) => {
      const dir = tempDir();
      const input = shards(dir, 1);
      const shard = join(dir, name);
      writeFileSync(shard, readFileSync(join(input, "s1.jsonl")));
      const run = await cli(
        "rows",
        join(input, "s1.jsonl"),
        shard,
        "--output-dir",
        join(dir, "out"),
        "--format",
        "parquet",
      );
      const stem = name.replace(/\.jsonl$/, "");
      expect([run.code, run.stderr]).toEqual([
        2,
        `callforest: ${shard} would write the part ${stem}.parquet, which dataset readers such as pyarrow skip ` +
          "(a name starting with '_' or '.'): rename the shard\n",
      ]);
      expect(existsSync(join(dir, "out"))).toBe(false);
    },
  );

  test("stdin, or two shards of one name, are usage errors", async () => {
    const dir = tempDir();
    const input = shards(dir, 1);
    writeFileSync(join(dir, "s1.json"), "{}");
    let run = await cli("rows", "-", "--output-dir", join(dir, "out"));
    expect([run.code, run.stderr]).toEqual([
      2,
      "callforest: --output-dir writes one part per input file: name the shards (files or a directory)\n",
    ]);
    run = await cli("rows", input, join(dir, "s1.json"), "--output-dir", join(dir, "out"));
    expect([run.code, run.stderr]).toEqual([
      2,
      `callforest: ${join(input, "s1.jsonl")} and ${join(dir, "s1.json")} would both write the part s1.jsonl: rename one\n`,
    ]);
    expect(existsSync(join(dir, "out"))).toBe(false);
  });
});
