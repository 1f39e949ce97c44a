// The commit of a run (issue 31): what a failed write, a kill and a power loss leave behind. Each
// output file is fsynced before its rename and its directory after it; the report is renamed
// last and ends with a run record naming the rows output's size and SHA-256, so a rows file and a
// report of different runs are told apart; a streamed report ends with a record either way; the
// partial files of killed runs are removed by the next run into their directory; draw writes its
// pictures as rows writes its outputs.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import type * as fs from "node:fs";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, test, vi } from "vitest";
import { recordMatches, runRecordOf } from "../../src/cli/run-record.js";
import { LOGIN_BUG, ROOT } from "../support/fixtures.js";
import { tempDirs } from "../support/temp-dirs.js";
import { cli, lines } from "../ingest/cli.js";

// Every fsync and rename the CLI makes in this process, in order (see "fsync before rename"); a
// rename to `failRenameTo` fails, as a crash between two renames would stop the second.
const events: string[] = [];
let failRenameTo: string | null = null;
vi.mock("node:fs", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:fs")>();
  const where = (fd: number) => real.readlinkSync(`/proc/self/fd/${fd}`);
  return {
    ...real,
    fsyncSync: (fd: number) => {
      events.push(`fsync ${where(fd)}`);
      return real.fsyncSync(fd);
    },
    renameSync: (from: fs.PathLike, to: fs.PathLike) => {
      events.push(`rename ${String(from)} ${String(to)}`);
      if (String(to) === failRenameTo)
        throw Object.assign(new Error("EIO: rename"), { code: "EIO", syscall: "rename", path: String(from) });
      return real.renameSync(from, to);
    },
  };
});

const BIN = join(ROOT, "bin", "callforest.js");
const tempDir = tempDirs("commit");
const LINE = JSON.stringify(JSON.parse(readFileSync(LOGIN_BUG, "utf8"))) + "\n";
/** Partial files are named for this host (sink.ts). */
const HOST = hostname().replace(/[^A-Za-z0-9._]/g, "_") || "host";
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const partials = (dir: string) => readdirSync(dir).filter((name) => name.includes(".partial-"));

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

/**
 * The built CLI as its own process, `input` on its stdin (left open); `onLine(n)` runs once it
 * has written its n-th stdout line (a streamed report: a rollout planned and its rows written).
 */
function spawnCli(
  argv: string[],
  input: string,
  onLine: (n: number, child: ChildProcess) => void = () => {},
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...argv], { stdio: ["pipe", "pipe", "pipe"] });
    children.push(child);
    child.stdin!.write(input);
    let stdout = "";
    let stderr = "";
    let seen = 0;
    child.stdin!.on("error", () => {}); // killed while it reads
    child.stdout!.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      for (const count = stdout.split("\n").length - 1; seen < count; ) onLine(++seen, child);
    });
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

describe("a streamed report never claims rows that were not written", () => {
  test.each([["parquet"], ["jsonl"]])(
    "%s rows to a full disk, report on stdout: its last line says the run failed, and why",
    async (format) => {
      const run = await cli("rows", LOGIN_BUG, "-o", "/dev/full", "--format", format, "--report", "-", "--jobs", "1");
      expect([run.code, run.stderr]).toEqual([2, "callforest: cannot write /dev/full: no space left on device\n"]);
      const last = run.stdout.trimEnd().split("\n").at(-1)!;
      expect(JSON.parse(last)).toEqual({
        run: { status: "failed", error: "cannot write /dev/full: no space left on device" },
      });
      expect(runRecordOf(run.stdout)?.status).toBe("failed");
    },
  );

  test("a run that succeeds ends its streamed report with a record of the rows file, after the rename", async () => {
    const dir = tempDir();
    const rows = join(dir, "rows.parquet");
    const run = await cli("rows", LOGIN_BUG, "-o", rows, "--report", "-", "--quiet");
    expect(run.code).toBe(0);
    expect(lines(run.stdout)).toHaveLength(1);
    expect(recordMatches(run.stdout, readFileSync(rows))).toBe(true);
    expect(runRecordOf(run.stdout)).toMatchObject({ status: "ok", rollouts: 1, rejected: 0, records: 5, output: rows });
  });
});

describe("the commit of a run", () => {
  test.each(["rows.jsonl", "rows.parquet", "rows.arrow"])(
    "%s: the report's last line names the rows file's size and SHA-256",
    async (name) => {
      const dir = tempDir();
      const rows = join(dir, name);
      const report = join(dir, "report.jsonl");
      expect((await cli("rows", LOGIN_BUG, "-o", rows, "--report", report, "--quiet")).code).toBe(0);
      const bytes = readFileSync(rows);
      expect(runRecordOf(readFileSync(report, "utf8"))).toEqual({
        status: "ok",
        rollouts: 1,
        rejected: 0,
        records: 5,
        output: rows,
        bytes: bytes.byteLength,
        sha256: sha256(bytes),
      });
    },
  );

  test("rows on stdout: the report file records what was streamed", async () => {
    const dir = tempDir();
    const report = join(dir, "report.jsonl");
    const run = await cli("rows", LOGIN_BUG, "--report", report, "--quiet");
    expect(run.code).toBe(0);
    const record = runRecordOf(readFileSync(report, "utf8"));
    expect(record).toMatchObject({
      output: "-",
      bytes: Buffer.byteLength(run.stdout),
      sha256: sha256(Buffer.from(run.stdout)),
    });
  });

  test("fsync before rename: each file's data, then the rename, then its directory; the report last", async () => {
    const dir = tempDir();
    const rows = join(dir, "rows.parquet");
    const report = join(dir, "report.jsonl");
    events.length = 0;
    expect((await cli("rows", LOGIN_BUG, "-o", rows, "--report", report, "--quiet")).code).toBe(0);
    const mine = events.filter((event) => event.includes(dir));
    const renames = mine.filter((event) => event.startsWith("rename "));
    expect(renames.map((event) => event.split(" ")[2])).toEqual([rows, report]);
    for (const rename of renames) {
      const [, from, to] = rename.split(" ");
      const at = mine.indexOf(rename);
      expect(mine.slice(0, at)).toContain(`fsync ${from}`);
      expect(mine.slice(at + 1)).toContain(`fsync ${dirname(to)}`);
    }
  });

  test("a report kept from another run is told from the report of the rows beside it", async () => {
    const dir = tempDir();
    const rows = join(dir, "rows.jsonl");
    const report = join(dir, "report.jsonl");
    const input = join(dir, "two.jsonl");
    writeFileSync(input, LINE + LINE.replace('"login-bug"', '"second"'));
    expect((await cli("rows", input, "-o", rows, "--report", report, "--quiet")).code).toBe(0);
    expect(recordMatches(readFileSync(report, "utf8"), readFileSync(rows))).toBe(true);
    // A new run whose report cannot be put in place after its rows were: what a kill between
    // the two renames leaves.
    failRenameTo = report;
    let run: Awaited<ReturnType<typeof cli>>;
    try {
      run = await cli("rows", LOGIN_BUG, "-o", rows, "--report", report, "--quiet");
    } finally {
      failRenameTo = null;
    }
    expect([run.code, run.stderr]).toEqual([2, `callforest: cannot write ${report}: input/output error\n`]);
    expect(lines(readFileSync(rows, "utf8"))).toHaveLength(5); // the new rows
    expect(recordMatches(readFileSync(report, "utf8"), readFileSync(rows))).toBe(false); // the old report
    expect(partials(dir)).toEqual([]);
  });
});

describe("partial files of killed runs", () => {
  test("a run removes its directory's partial files of dead processes of this host, and no other", async () => {
    const dir = tempDir();
    const dead = spawnSync(process.execPath, ["-e", ""]).pid!;
    const live = spawn(process.execPath, ["-e", "setInterval(() => {}, 1 << 30)"], { stdio: "ignore" });
    children.push(live);
    const names = {
      dead: `.rows.jsonl.partial-${HOST}-${dead}-1`,
      legacy: `.old.parquet.partial-${dead}-3`, // named before hosts were
      live: `.rows.jsonl.partial-${HOST}-${live.pid}-1`,
      otherHost: `.rows.jsonl.partial-elsewhere-${dead}-1`,
      unrelated: ".rows.jsonl.partial-notes",
    };
    for (const name of Object.values(names)) writeFileSync(join(dir, name), "cut");
    expect((await cli("rows", LOGIN_BUG, "-o", join(dir, "rows.jsonl"), "--quiet")).code).toBe(0);
    expect(readdirSync(dir).sort()).toEqual([names.live, names.otherHost, names.unrelated, "rows.jsonl"].sort());
  });

  test("kill -9 mid-run leaves partial files; the next run into the directory removes them", async () => {
    const dir = tempDir();
    const rows = join(dir, "rows.parquet");
    writeFileSync(rows, "previous rows\n");
    // Killed once it has streamed its first report line: mid-run, its stdin still open (small
    // batches: a batch is planned once it is read whole).
    const argv = ["rows", "-", "-o", rows, "--report", "-", "--quiet", "--jobs", "1", "--batch-bytes", "8192"];
    const run = await spawnCli(argv, LINE.repeat(20), (n, child) => {
      if (n === 1) child.kill("SIGKILL");
    });
    expect(run.signal).toBe("SIGKILL");
    expect(partials(dir)).toHaveLength(1);
    expect(readFileSync(rows, "utf8")).toBe("previous rows\n");
    expect((await cli("rows", LOGIN_BUG, "-o", join(dir, "other.jsonl"), "--quiet")).code).toBe(0);
    expect(readdirSync(dir).sort()).toEqual(["other.jsonl", "rows.parquet"]);
  });
});

describe("draw writes its pictures whole or not at all", () => {
  /** `callforest draw ...argv` with files limited to `kb` KB: a write past it fails (EFBIG), as on a full disk. */
  const drawLimited = (kb: number, ...argv: string[]) =>
    spawnSync("bash", ["-c", `ulimit -f ${kb} && exec "$0" "$@"`, process.execPath, BIN, "draw", ...argv], {
      encoding: "utf8",
    });

  test("a failed write leaves the previous picture as it was, and no other file", () => {
    const dir = tempDir();
    const out = join(dir, "forest.svg");
    writeFileSync(out, "previous picture\n");
    const run = drawLimited(4, LOGIN_BUG, "-o", out);
    expect([run.status, run.stdout, run.stderr]).toEqual([2, "", `callforest: cannot write ${out}: file too large\n`]);
    expect(readFileSync(out, "utf8")).toBe("previous picture\n");
    expect(readdirSync(dir)).toEqual(["forest.svg"]);
  });

  test("several rollouts: a failed write leaves no picture, not even an empty or cut one", () => {
    const dir = tempDir();
    const input = join(dir, "three.jsonl");
    writeFileSync(input, ["a", "b", "c"].map((id) => LINE.replace('"login-bug"', JSON.stringify(id))).join(""));
    writeFileSync(join(dir, "forest.b.svg"), "previous picture\n");
    const run = drawLimited(4, input, "-o", join(dir, "forest.svg"));
    expect([run.status, run.stdout]).toEqual([2, ""]);
    expect(run.stderr).toMatch(/^callforest: cannot write .*forest\.a\.svg: file too large\n$/);
    expect(readdirSync(dir).sort()).toEqual(["forest.b.svg", "three.jsonl"]);
    expect(readFileSync(join(dir, "forest.b.svg"), "utf8")).toBe("previous picture\n");
  });

  test("a run that succeeds puts every picture in place and prints its path", () => {
    const dir = tempDir();
    const input = join(dir, "two.jsonl");
    writeFileSync(input, ["a", "b"].map((id) => LINE.replace('"login-bug"', JSON.stringify(id))).join(""));
    const run = drawLimited(1 << 20, input, "-o", join(dir, "forest.svg"));
    expect([run.status, run.stdout]).toEqual([0, `${join(dir, "forest.a.svg")}\n${join(dir, "forest.b.svg")}\n`]);
    expect(readdirSync(dir).sort()).toEqual(["forest.a.svg", "forest.b.svg", "two.jsonl"]);
    expect(existsSync(join(dir, "forest.svg"))).toBe(false);
    expect(readFileSync(join(dir, "forest.a.svg"), "utf8")).toMatch(/<\/svg>\n?$/);
  });
});
