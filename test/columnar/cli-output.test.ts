// `rows` output options and files: the format from -o's name or --format (a clash is a usage
// error), compression and row groups, the same bytes whatever --jobs is, and outputs written
// whole or not at all (a failed or killed run leaves the previous files as they were).
import { spawn } from "node:child_process";
import {
  chmodSync,
  existsSync,
  lstatSync,
  readFileSync,
  readdirSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { cli, lines, tempDir } from "../ingest/cli.js";
import { LOGIN_BUG, ROOT } from "../support/fixtures.js";
import { duckdb, jsonlRecords, mixedBatch, parquetRecords } from "./support.js";

const BIN = join(ROOT, "bin", "callforest.js");

describe("choosing the format", () => {
  test.each([
    [
      ["-o", "x.parquet", "--format", "jsonl"],
      "callforest: -o x.parquet names parquet output but --format is jsonl: rename the file or drop --format\n",
    ],
    [
      ["-o", "x.jsonl", "--format", "arrow"],
      "callforest: -o x.jsonl names jsonl output but --format is arrow: rename the file or drop --format\n",
    ],
    [["--format", "csv"], "callforest: unknown --format 'csv': expected jsonl, parquet, arrow, arrows\n"],
    [
      ["-o", "x.csv"],
      "callforest: -o x.csv: unknown file ending '.csv': expected .jsonl, .ndjson, .parquet, .arrow, .arrows, " +
        "or say what to write with --format\n",
    ],
    [
      ["-o", "x.parqet"],
      "callforest: -o x.parqet: unknown file ending '.parqet': expected .jsonl, .ndjson, .parquet, .arrow, .arrows, " +
        "or say what to write with --format\n",
    ],
    [["-o", "x.jsonl", "--compression", "zstd"], "callforest: --compression applies to Parquet output, not jsonl\n"],
    [["-o", "x.arrow", "--compression", "zstd"], "callforest: --compression applies to Parquet output, not arrow\n"],
    [
      ["-o", "x.parquet", "--compression", "lz4"],
      "callforest: unknown --compression 'lz4': expected none, snappy, zstd\n",
    ],
    [
      ["--row-group-rows", "10"],
      "callforest: --row-group-rows applies to parquet, arrow and arrows output, not jsonl\n",
    ],
    [
      ["-o", "x.parquet", "--row-group-rows", "0"],
      "callforest: --row-group-rows must be a positive integer, got '0'\n",
    ],
    [
      ["-o", "x.parquet", "--mask-format", "ints"],
      "callforest: --mask-format shapes JSONL only: parquet output holds loss_mask as a list of booleans\n",
    ],
  ])("%j is a usage error (exit 2, one line), and writes nothing", async (argv, message) => {
    const dir = tempDir();
    const run = await cli("rows", LOGIN_BUG, ...argv.map((arg) => (arg.startsWith("x.") ? join(dir, arg) : arg)));
    expect(run.code).toBe(2);
    expect(run.stderr.replace(dir + "/", "")).toBe(message);
    expect(readdirSync(dir)).toEqual([]);
  });

  test(
    "the name decides (.parquet, .arrow, .arrows, .jsonl); " +
      "--format decides for a name with another ending, and for stdout; a name with no ending is JSONL",
    async () => {
      const dir = tempDir();
      const magic = (path: string) => readFileSync(path).subarray(0, 6).toString("latin1");
      for (const [name, argv, start] of [
        ["a.parquet", [], "PAR1"],
        ["a.arrow", [], "ARROW1"],
        ["a.jsonl", [], '{"rol'],
        ["a.out", ["--format", "parquet"], "PAR1"],
        ["b.out", ["--format", "jsonl"], '{"rol'],
        ["rows", [], '{"rol'],
      ] as const) {
        const run = await cli("rows", LOGIN_BUG, "-o", join(dir, name), "--quiet", ...argv);
        expect(run.code, name).toBe(0);
        expect(magic(join(dir, name)).startsWith(start), name).toBe(true);
      }
      // The IPC stream format starts with a message (continuation marker), not a file magic.
      await cli("rows", LOGIN_BUG, "-o", join(dir, "a.arrows"), "--quiet");
      expect([...readFileSync(join(dir, "a.arrows")).subarray(0, 4)]).toEqual([255, 255, 255, 255]);
      const piped = await spawned(["rows", LOGIN_BUG, "--format", "parquet", "--quiet"]);
      expect(piped.code).toBe(0);
      expect(piped.stdout.equals(readFileSync(join(dir, "a.parquet")))).toBe(true);
    },
  );
});

describe("Parquet settings", () => {
  test("zstd by default; --compression snappy and none; DuckDB reads each", async () => {
    const dir = tempDir();
    const input = mixedBatch(dir, 10);
    const db = await duckdb();
    for (const [argv, codec] of [
      [[], "ZSTD"],
      [["--compression", "snappy"], "SNAPPY"],
      [["--compression", "none"], "UNCOMPRESSED"],
    ] as const) {
      const out = join(dir, `${codec}.parquet`);
      expect((await cli("rows", input, "-o", out, "--quiet", ...argv)).code).toBe(0);
      const codecs = await db.runAndReadAll(`SELECT DISTINCT compression FROM parquet_metadata('${out}')`);
      expect(codecs.getRows().map((row) => String(row[0]))).toEqual([codec]);
    }
    db.closeSync();
  });

  test("--row-group-rows N: row groups of N records (the last may hold fewer)", async () => {
    const dir = tempDir();
    const out = join(dir, "rows.parquet");
    expect((await cli("rows", mixedBatch(dir, 30), "-o", out, "--quiet", "--row-group-rows", "7")).code).toBe(0);
    const db = await duckdb();
    const groups = await db.runAndReadAll(
      `SELECT DISTINCT row_group_id, row_group_num_rows FROM parquet_metadata('${out}') ORDER BY row_group_id`,
    );
    const sizes = groups.getRows().map((row) => Number(row[1]));
    db.closeSync();
    expect(sizes.length).toBeGreaterThan(3);
    expect(sizes.slice(0, -1).every((size) => size === 7)).toBe(true);
    expect(sizes[sizes.length - 1]).toBeLessThanOrEqual(7);
  });

  test("an input with no rows: a file with SPEC's schema and no rows", async () => {
    const dir = tempDir();
    const input = join(dir, "empty.jsonl");
    writeFileSync(input, "");
    for (const name of ["empty.parquet", "empty.arrow", "empty.arrows"]) {
      expect((await cli("rows", input, "-o", join(dir, name), "--quiet")).code).toBe(0);
    }
    const { records, types } = await parquetRecords(join(dir, "empty.parquet"));
    expect(records).toEqual([]);
    expect(Object.keys(types)).toEqual([
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
      "routed_experts",
      "weight_versions",
    ]);
  });
});

test.each([".parquet", ".arrow", ".arrows"])(
  "%s: the same bytes with --jobs 1 and --jobs 2 (many batches, groups cut across them)",
  async (extension) => {
    const dir = tempDir();
    const input = mixedBatch(dir, 60);
    const outputs: Buffer[] = [];
    for (const jobs of ["1", "2"]) {
      const out = join(dir, `jobs${jobs}${extension}`);
      const run = await cli(
        "rows",
        input,
        "-o",
        out,
        "--quiet",
        "--jobs",
        jobs,
        "--batch-bytes",
        "20000",
        "--row-group-rows",
        "9",
      );
      expect(run.code).toBe(0);
      outputs.push(readFileSync(out));
    }
    expect(outputs[0].equals(outputs[1])).toBe(true);
  },
);

/** Runs the built CLI as its own process; `feed` writes to its stdin (else none). */
function spawned(
  argv: string[],
  options: { feed?: (stdin: NodeJS.WritableStream, child: ReturnType<typeof spawn>) => void } = {},
) {
  return new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: Buffer; stderr: string }>(
    (resolve, reject) => {
      const child = spawn(process.execPath, [BIN, ...argv], {
        stdio: [options.feed ? "pipe" : "ignore", "pipe", "pipe"],
      });
      const out: Buffer[] = [];
      let err = "";
      child.stdout!.on("data", (chunk: Buffer) => out.push(chunk));
      child.stderr!.on("data", (chunk: Buffer) => (err += chunk.toString()));
      child.on("error", reject);
      child.on("close", (code, signal) => resolve({ code, signal, stdout: Buffer.concat(out), stderr: err }));
      if (options.feed) options.feed(child.stdin!, child);
    },
  );
}

describe("outputs are written whole or not at all", () => {
  const OLD_ROWS = "previous rows\n";
  const OLD_REPORT = "previous report\n";

  /** A directory with previous outputs in it. */
  function previous(rowsName: string) {
    const dir = tempDir();
    const rows = join(dir, rowsName);
    const report = join(dir, "report.jsonl");
    writeFileSync(rows, OLD_ROWS);
    writeFileSync(report, OLD_REPORT);
    return { dir, rows, report };
  }

  test.each(["rows.parquet", "rows.jsonl"])(
    "%s: a run that fails half-way (its second input unreadable) leaves both files as they were, and no other file",
    async (name) => {
      const { dir, rows, report } = previous(name);
      // Reading a process's own memory at offset 0 fails (EIO) after the first input was planned.
      const run = await cli("rows", LOGIN_BUG, "/proc/self/mem", "-o", rows, "--report", report, "--quiet");
      expect([run.code, run.stderr]).toEqual([2, "callforest: cannot read /proc/self/mem: input/output error\n"]);
      expect(readFileSync(rows, "utf8")).toBe(OLD_ROWS);
      expect(readFileSync(report, "utf8")).toBe(OLD_REPORT);
      expect(readdirSync(dir).sort()).toEqual(["report.jsonl", name].sort());
    },
  );

  test(
    "a full disk for the rows: exit 2 with one line, " +
      "and the report file is not replaced by one saying every rollout was ok",
    async () => {
      const { report } = previous("unused");
      for (const argv of [
        ["-o", "/dev/full"],
        ["--format", "parquet", "-o", "/dev/full"],
      ]) {
        const run = await cli("rows", LOGIN_BUG, ...argv, "--report", report, "--quiet");
        expect([run.code, run.stderr]).toEqual([2, "callforest: cannot write /dev/full: no space left on device\n"]);
        expect(readFileSync(report, "utf8")).toBe(OLD_REPORT);
      }
    },
  );

  test(
    "a successful run replaces both files; a replaced file keeps its permissions, " +
      "a symbolic link stays a link to the new file",
    async () => {
      const { dir, rows, report } = previous("rows.parquet");
      chmodSync(rows, 0o600);
      const link = join(dir, "latest.jsonl");
      symlinkSync(report, link);
      const run = await cli("rows", LOGIN_BUG, "-o", rows, "--report", link, "--quiet");
      expect(run.code).toBe(0);
      expect(readFileSync(rows).subarray(0, 4).toString()).toBe("PAR1");
      expect(statSync(rows).mode & 0o777).toBe(0o600);
      expect(lstatSync(link).isSymbolicLink()).toBe(true);
      expect(JSON.parse(lines(readFileSync(report, "utf8"))[0]).status).toBe("ok");
      expect(readdirSync(dir).sort()).toEqual(["latest.jsonl", "report.jsonl", "rows.parquet"]);
    },
  );

  test("special files are written in place, as before: /dev/null", async () => {
    const run = await cli("rows", LOGIN_BUG, "-o", "/dev/null", "--format", "parquet", "--quiet");
    expect(run.code).toBe(0);
    expect(statSync("/dev/null").isCharacterDevice()).toBe(true);
  });

  /** Starts `rows` on stdin, feeds it rollouts until its temporary output exists, then sends `signal`. */
  async function interrupted(signal: NodeJS.Signals, name: string) {
    const { dir, rows, report } = previous(name);
    const line = JSON.stringify(JSON.parse(readFileSync(LOGIN_BUG, "utf8"))) + "\n";
    const run = await spawned(["rows", "-", "-o", rows, "--report", report, "--quiet", "--jobs", "1"], {
      feed: (stdin, child) => {
        stdin.on("error", () => {}); // the child is killed while it reads
        stdin.write(line.repeat(200));
        const poll = setInterval(() => {
          if (readdirSync(dir).some((file) => file.includes(".partial-"))) {
            clearInterval(poll);
            // Mid-run (stdin is still open, so it cannot end), and staged: the removal of its
            // partial files on a signal is armed before the first is made, so no delay is needed.
            child.kill(signal);
          }
        }, 20);
      },
    });
    return { dir, rows, report, run };
  }

  test.each(["rows.parquet", "rows.jsonl"])(
    "%s: kill -9 mid-run leaves the previous files as they were (a hidden partial file may stay)",
    async (name) => {
      const { dir, rows, report, run } = await interrupted("SIGKILL", name);
      expect(run.signal).toBe("SIGKILL");
      expect(readFileSync(rows, "utf8")).toBe(OLD_ROWS);
      expect(readFileSync(report, "utf8")).toBe(OLD_REPORT);
      expect(readdirSync(dir).filter((file) => !file.startsWith("."))).toEqual(["report.jsonl", name].sort());
    },
  );

  test("SIGTERM mid-run: the previous files as they were, and the partial files removed", async () => {
    const { dir, rows, report, run } = await interrupted("SIGTERM", "rows.parquet");
    expect(run.signal).toBe("SIGTERM");
    expect(readFileSync(rows, "utf8")).toBe(OLD_ROWS);
    expect(readFileSync(report, "utf8")).toBe(OLD_REPORT);
    expect(readdirSync(dir).sort()).toEqual(["report.jsonl", "rows.parquet"]);
  });
});

test("the JSONL rows of a run equal its Parquet rows (a check of the helpers the read-back tests use)", async () => {
  const dir = tempDir();
  const jsonl = join(dir, "r.jsonl");
  const parquet = join(dir, "r.parquet");
  await cli("rows", LOGIN_BUG, "-o", jsonl, "--quiet");
  await cli("rows", LOGIN_BUG, "-o", parquet, "--quiet");
  const expected = jsonlRecords(jsonl);
  expect(expected.length).toBe(5);
  expect((await parquetRecords(parquet)).records).toEqual(expected);
  expect(existsSync(join(dir, ".r.parquet.partial"))).toBe(false);
});
