// The CLI's input and output edges: unwritable outputs and write failures are one line and exit 2
// on every command that writes a stream; errors map to exit codes 1 / 2 / 70; every reader
// (rows, show/draw/convert, the page) splits lines, skips blank ones and checks UTF-8 alike.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  symlinkSync,
  watch,
  writeFileSync,
} from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { buildProgram, main } from "../../src/cli/main.js";
import { EX_SOFTWARE, StrictFailure, UsageError, failureOf } from "../../src/cli/errors.js";
import { readRollouts, type ReadItem } from "../../src/ingest/read.js";
import { holdsOneValue, jsonlItems, opensDocument, parseJsonInput } from "../../src/formats/text.js";
import { FileError } from "../../src/files/file-error.js";
import { openByteSink, withSinks } from "../../src/ingest/sink.js";
import { withoutLeadingMark } from "../../src/ingest/batches.js";
import { inputSize } from "../../src/ingest/run.js";
import { LOGIN_BUG } from "../support/fixtures.js";
import { cli, goodLines, lines } from "../ingest/cli.js";
import { tempDirs } from "../support/temp-dirs.js";

const tmp = tempDirs("io");
const BOM = "\uFEFF";

// Linux's always-full device: the write-failure tests below need it (CI runs on Debian).
const DEV_FULL = "/dev/full";
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

describe("outputs that cannot be written: one line, exit 2, no stack trace", () => {
  it("convert -o into a missing directory", async () => {
    const r = await cli("convert", LOGIN_BUG, "-o", "/nonexistent/y");
    expect(r).toEqual({ code: 2, stdout: "", stderr: "callforest: cannot write /nonexistent/y: no such directory\n" });
  });

  it("rows -o / --report into a missing directory", async () => {
    let r = await cli("rows", LOGIN_BUG, "-o", "/nonexistent/x");
    expect(r).toEqual({ code: 2, stdout: "", stderr: "callforest: cannot write /nonexistent/x: no such directory\n" });
    const dir = tmp();
    r = await cli("rows", LOGIN_BUG, "-o", join(dir, "rows.jsonl"), "--report", "/nonexistent/report.jsonl");
    expect(r).toEqual({
      code: 2,
      stdout: "",
      stderr: "callforest: cannot write /nonexistent/report.jsonl: no such directory\n",
    });
  });

  it("rows -o where no file can be created, though the directory is there (/proc)", async () => {
    const r = await cli("rows", LOGIN_BUG, "-o", "/proc/out.jsonl");
    // As root the directory is "writable" and the open fails; as anyone else access() says why.
    expect([r.code, r.stdout]).toEqual([2, ""]);
    expect(r.stderr).toMatch(
      /^callforest: cannot write \/proc\/out\.jsonl: (cannot create a file there|permission denied)\n$/,
    );
  });

  it("rows -o a directory", async () => {
    const dir = tmp();
    const r = await cli("rows", LOGIN_BUG, "-o", dir);
    expect(r).toEqual({ code: 2, stdout: "", stderr: `callforest: cannot write ${dir}: is a directory\n` });
  });

  it("a write that fails later (a full disk) is reported by rows and convert, not masked by close", async () => {
    expect(existsSync(DEV_FULL), `${DEV_FULL} is needed by this test`).toBe(true);
    const input = join(tmp(), "many.jsonl");
    writeFileSync(input, goodLines(50).join("\n") + "\n");
    for (const argv of [
      ["rows", input, "-o", "/dev/full", "--quiet"],
      ["rows", input, "--report", "/dev/full", "--quiet"],
      ["convert", input, "-o", "/dev/full"],
    ]) {
      const r = await cli(...argv);
      expect([r.code, r.stderr], argv.join(" ")).toEqual([
        2,
        "callforest: cannot write /dev/full: no space left on device\n",
      ]);
    }
  });

  it("convert of a single rollout to a full disk names the disk's error, not a closed stream", async () => {
    const r = await cli("convert", LOGIN_BUG, "-o", "/dev/full");
    expect([r.code, r.stderr]).toEqual([2, "callforest: cannot write /dev/full: no space left on device\n"]);
  });

  it("show, demo and draw -o - on a stdout that fails: one line and exit 2, as a real process", () => {
    const bin = join(ROOT, "bin/callforest.js");
    for (const argv of [["show", LOGIN_BUG], ["demo"], ["draw", LOGIN_BUG, "-o", "-"]]) {
      const full = openSync(DEV_FULL, "w");
      try {
        const run = spawnSync(process.execPath, [bin, ...argv], { stdio: ["ignore", full, "pipe"], encoding: "utf8" });
        expect([argv[0], run.status, run.stderr]).toEqual([
          argv[0],
          2,
          "callforest: cannot write <stdout>: no space left on device\n",
        ]);
      } finally {
        closeSync(full);
      }
    }
  });

  it(
    "a reader that closes the pipe early (| head) " + "ends rows, show and convert quietly with 141, as SIGPIPE would",
    () => {
      const bin = join(ROOT, "bin/callforest.js");
      const input = join(tmp(), "many.jsonl");
      writeFileSync(input, goodLines(300).join("\n") + "\n"); // megabytes of output: more than a pipe holds
      const runs = [
        ["rows", input, "--quiet"],
        ["rows", input, "--quiet", "-o", "/dev/stdout"],
        ["show", input],
        ["convert", input],
      ];
      for (const argv of runs) {
        // A real shell pipe (Node's own child pipes are sockets, which /dev/stdout cannot open).
        const quoted = [process.execPath, bin, ...argv].map((a) => `'${a}'`).join(" ");
        const errFile = join(tmp(), "stderr.txt");
        const run = spawnSync(
          "bash",
          ["-c", `${quoted} 2>"$ERR" | head -c 1000 >/dev/null; echo "\${PIPESTATUS[0]}"`],
          {
            encoding: "utf8",
            env: { ...process.env, ERR: errFile },
          },
        );
        expect(run.status).toBe(0);
        expect([argv.join(" "), run.stdout.trim(), readFileSync(errFile, "utf8")]).toEqual([argv.join(" "), "141", ""]);
      }
    },
  );

  it(
    "a stderr that fails (closed early, full disk) " + "does not cut the rows short: the run ends, then exits 141 or 2",
    () => {
      const bin = join(ROOT, "bin/callforest.js");
      const dir = tmp();
      const input = join(dir, "notes.jsonl");
      // a note for every other line
      writeFileSync(input, Array.from({ length: 2000 }, () => `[1]\n${goodLines(0)[0]}`).join("\n") + "\n");
      for (const jobs of ["1", "2"]) {
        const rows = join(dir, `rows${jobs}.jsonl`);
        const closed = spawnSync(
          "bash",
          [
            "-c",
            `'${process.execPath}' '${bin}' rows '${input}' -o '${rows}' --jobs ${jobs} ` +
              `2>&1 | head -n 1 >/dev/null; echo "\${PIPESTATUS[0]}"`,
          ],
          { encoding: "utf8" },
        );
        expect([jobs, closed.stdout.trim(), lines(readFileSync(rows, "utf8")).length]).toEqual([jobs, "141", 2000 * 5]);
      }
      const full = openSync(DEV_FULL, "w");
      try {
        const rows = join(dir, "full.jsonl");
        const run = spawnSync(process.execPath, [bin, "rows", input, "-o", rows], {
          stdio: ["ignore", "ignore", full],
        });
        expect([run.status, lines(readFileSync(rows, "utf8")).length]).toEqual([2, 2000 * 5]);
      } finally {
        closeSync(full);
      }
    },
  );

  it("a stderr pipe still holding notes when the run ends: the exit waits for it, and its reader leaving is exit 141", async () => {
    const bin = join(ROOT, "bin/callforest.js");
    const dir = tmp();
    const input = join(dir, "notes.jsonl");
    // ~460 KB of notes: more than the pipe and this end's buffer take unread, so the writer
    // holds the rest in memory when its work is done.
    writeFileSync(input, Array.from({ length: 4000 }, () => `[1]\n${goodLines(0)[0]}`).join("\n") + "\n");
    for (const jobs of ["1", "2"]) {
      const rows = join(dir, `rows${jobs}.jsonl`);
      const child = spawn(process.execPath, [bin, "rows", input, "-o", rows, "--jobs", jobs], {
        stdio: ["ignore", "ignore", "pipe"],
      });
      child.stderr!.pause(); // nobody reads the notes
      const exit = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
      // The rows are put in place at the end of the run: then the reader leaves, unread.
      await new Promise<void>((resolve) => {
        const watcher = watch(dir, () => {
          if (existsSync(rows)) {
            watcher.close();
            resolve();
          }
        });
        if (existsSync(rows)) {
          watcher.close();
          resolve();
        }
      });
      child.stderr!.destroy();
      expect([jobs, await exit, lines(readFileSync(rows, "utf8")).length]).toEqual([jobs, 141, 4000 * 5]);
    }
  });

  it(
    "outputs are refused before any is opened: an unwritable --report leaves -o as it was; " +
      "stdin's file and one FIFO twice are refused",
    async () => {
      const dir = tmp();
      const precious = join(dir, "prev.jsonl");
      writeFileSync(precious, "precious\n");
      let r = await cli("rows", LOGIN_BUG, "-o", precious, "--report", join(dir, "missing", "r.jsonl"));
      expect([r.code, readFileSync(precious, "utf8")]).toEqual([2, "precious\n"]);
      const bin = join(ROOT, "bin/callforest.js");
      const input = join(dir, "in.jsonl");
      writeFileSync(input, goodLines(2).join("\n") + "\n");
      const stdin = openSync(input, "r"); // `< in.jsonl`: stdin is the file itself
      const same = spawnSync(process.execPath, [bin, "rows", "-", "-o", input], {
        stdio: [stdin, "pipe", "pipe"],
        encoding: "utf8",
      });
      closeSync(stdin);
      expect([same.status, same.stderr, readFileSync(input, "utf8").length > 0]).toEqual([
        2,
        `callforest: -o ${input}: is also the input <stdin>; write the output somewhere else\n`,
        true,
      ]);
      const fifo = join(dir, "fifo");
      execFileSync("mkfifo", [fifo]);
      r = await cli("rows", input, "-o", fifo, "--report", fifo);
      expect([r.code, r.stderr]).toEqual([
        2,
        `callforest: --report ${fifo}: is also -o ${fifo}; write the output somewhere else\n`,
      ]);
      expect(inputSize([fifo])).toBe(null); // a pipe's size says nothing: no "small input" rule, no percentage
      expect([inputSize([]), inputSize(["-"])]).toEqual([null, null]); // stdin, named or not
    },
  );

  it("-o /dev/stdout is stdout, even where it cannot be opened by name (Node's child pipes are sockets)", () => {
    const bin = join(ROOT, "bin/callforest.js");
    for (const argv of [
      ["rows", LOGIN_BUG, "-o", "/dev/stdout", "--quiet"],
      ["convert", LOGIN_BUG, "-o", "/dev/stdout"],
    ]) {
      const run = spawnSync(process.execPath, [bin, ...argv], { encoding: "utf8" });
      expect([argv[0], run.status, run.stderr, lines(run.stdout).length]).toEqual([
        argv[0],
        0,
        "",
        argv[0] === "rows" ? 5 : 1,
      ]);
    }
  });

  it("/dev/stderr and /dev/fd/N are the streams themselves: a file the shell appends them to is not emptied", () => {
    const dir = tmp();
    const log = join(dir, "log");
    const sh = (command: string) =>
      spawnSync("bash", ["-c", command], {
        encoding: "utf8",
        env: { ...process.env, CF: join(ROOT, "bin/callforest.js"), IN: LOGIN_BUG, LOG: log },
      });
    for (const report of ["/dev/stderr", "/dev/fd/2"]) {
      writeFileSync(log, "before\n");
      const run = sh(`node "$CF" rows "$IN" -o /dev/null --report ${report} 2>>"$LOG"`);
      const logged = lines(readFileSync(log, "utf8"));
      expect([report, run.status, logged[0], logged.length, JSON.parse(logged[1]).status]).toEqual([
        report,
        0,
        "before",
        2,
        "ok",
      ]);
    }
    writeFileSync(log, "before\n");
    let run = sh(`node "$CF" rows "$IN" --quiet -o /dev/fd/1 >>"$LOG"`);
    expect([run.status, lines(readFileSync(log, "utf8")).length]).toEqual([0, 1 + 5]);
    // Any descriptor: written where the shell opened it, never reopened (truncated).
    for (const [command, added] of [
      [`node "$CF" rows "$IN" --quiet -o /dev/fd/3 3>>"$LOG"`, 5],
      [`node "$CF" rows "$IN" --quiet -o /dev/null --report /proc/self/fd/3 3>>"$LOG"`, 1],
      [`node "$CF" draw "$IN" -o /dev/fd/3 3>>"$LOG"`, -1],
    ] as const) {
      writeFileSync(log, "before\n");
      run = sh(command);
      const logged = readFileSync(log, "utf8");
      expect([command, run.status, logged.startsWith("before\n")]).toEqual([command, 0, true]);
      if (added > 0) expect(lines(logged)).toHaveLength(1 + added);
      else expect(logged).toContain("</svg>");
    }
    // However the name is spelled: still the descriptor, still appended to.
    for (const [command, added] of [
      [`node "$CF" rows "$IN" -o /dev/null --report /dev//stderr 2>>"$LOG"`, 1],
      [`cd /dev && node "$CF" rows "$IN" -o /dev/null --report stderr 2>>"$LOG"`, 1],
      [`node "$CF" convert "$IN" -o /dev/./stdout >>"$LOG"`, 1],
      [`node "$CF" rows "$IN" --quiet -o /proc/thread-self/fd/3 3>>"$LOG"`, 5],
      [`node "$CF" rows "$IN" --quiet -o /dev/stdin <"$LOG"`, 5], // stdin's file, not an input here
    ] as const) {
      writeFileSync(log, "before\n");
      run = sh(command);
      expect([
        command,
        run.status,
        lines(readFileSync(log, "utf8"))[0],
        lines(readFileSync(log, "utf8")).length,
      ]).toEqual([command, 0, "before", 1 + added]);
    }
    // Descriptors the shell did not open may still be open: Node's own event fds and self-pipes.
    // Writing to one lost the rows, hung or crashed; each is refused like any descriptor not open.
    for (let fd = 3; fd <= 12; fd++) {
      for (const argv of [
        ["rows", LOGIN_BUG, "--quiet", "-o", `/dev/fd/${fd}`],
        ["rows", LOGIN_BUG, "-o", "/dev/null", "--report", `/dev/fd/${fd}`],
        ["draw", LOGIN_BUG, "-o", `/dev/fd/${fd}`],
      ]) {
        // No deadline of its own (a loaded machine is slow, not hung): a hang is the watchdog's to name.
        const alone = spawnSync(process.execPath, [join(ROOT, "bin/callforest.js"), ...argv], {
          encoding: "utf8",
          stdio: ["ignore", "pipe", "pipe"],
        });
        expect([argv.join(" "), alone.status, alone.stderr]).toEqual([
          argv.join(" "),
          2,
          expect.stringMatching(new RegExp(`^callforest: cannot write /dev/fd/${fd}: [^\n]+\n$`)),
        ]);
      }
    }
    run = sh(`node "$CF" rows "$IN" -o /dev/fd/57`); // not open
    expect([run.status, run.stderr]).toEqual([2, "callforest: cannot write /dev/fd/57: not an open file descriptor\n"]);
    run = sh(`node "$CF" rows "$IN" --quiet -o /proc/self/fd/1 | wc -l`);
    expect([run.status, run.stdout.trim()]).toEqual([0, "5"]);
  });

  it(
    "rows and reports on one standard stream, or a stream appended to an input, " +
      "are refused; stdout and stderr may share a file",
    () => {
      const bin = join(ROOT, "bin/callforest.js");
      for (const [argv, message] of [
        [["-o", "-", "--report", "-"], "--report -: -o - writes to stdout too"],
        [["--report", "/dev/stdout"], "--report /dev/stdout: -o (stdout) writes to stdout too"],
        [["-o", "/dev/stderr", "--report", "/dev/fd/2"], "--report /dev/fd/2: -o /dev/stderr writes to stderr too"],
      ] as const) {
        const run = spawnSync(process.execPath, [bin, "rows", LOGIN_BUG, ...argv], { encoding: "utf8" });
        expect([run.status, run.stdout, run.stderr]).toEqual([
          2,
          "",
          `callforest: ${message}; write one of them somewhere else\n`,
        ]);
      }
      const dir = tmp();
      const input = join(dir, "in.jsonl");
      writeFileSync(input, goodLines(2).join("\n") + "\n");
      const sh = (command: string) =>
        spawnSync("bash", ["-c", command], {
          encoding: "utf8",
          env: { ...process.env, CF: bin, IN: input, OUT: join(dir, "out") },
        });
      let run = sh(`node "$CF" rows "$IN" >>"$IN"`);
      expect([run.status, run.stderr]).toEqual([
        2,
        `callforest: -o (stdout): is also the input ${input}; write the output somewhere else\n`,
      ]);
      expect(readFileSync(input, "utf8")).toBe(goodLines(2).join("\n") + "\n");
      run = sh(`node "$CF" rows "$IN" --quiet --report "$OUT" >"$OUT"`); // stdout's file as --report too
      expect([run.status, run.stderr]).toEqual([
        2,
        `callforest: --report ${join(dir, "out")}: is also -o (stdout); write the output somewhere else\n`,
      ]);
      // Stdin given by default (no input named) is an input too.
      for (const command of [
        `node "$CF" rows -o "$IN" <"$IN"`,
        `node "$CF" rows <"$IN" >>"$IN"`,
        `node "$CF" convert <"$IN" >>"$IN"`,
      ]) {
        run = sh(command);
        expect([command, run.status, run.stderr]).toEqual([
          command,
          2,
          expect.stringMatching(/: is also the input <stdin>; write the output somewhere else\n$/),
        ]);
      }
      expect(readFileSync(input, "utf8")).toBe(goodLines(2).join("\n") + "\n");
      // An output file that stdout or stderr already goes to would be emptied under the shell's redirection.
      for (const [command, where] of [
        [`node "$CF" rows "$IN" -o "$OUT" 2>>"$OUT"`, "-o OUT: is also where stderr goes"],
        [`node "$CF" rows "$IN" -o /dev/null --report "$OUT" 2>>"$OUT"`, "--report OUT: is also where stderr goes"],
        [`node "$CF" convert "$IN" -o "$OUT" >>"$OUT"`, "-o OUT: is also where stdout goes"],
      ] as const) {
        const out = join(dir, "out");
        writeFileSync(out, "keep\n");
        run = sh(command);
        // The message goes to stderr, which is the file itself in the 2>> cases: kept, then the line.
        const message = `callforest: ${where.replace("OUT", out)}; write the output somewhere else\n`;
        expect([command, run.status, readFileSync(out, "utf8") + run.stderr]).toEqual([command, 2, `keep\n${message}`]);
      }
      run = sh(`node "$CF" rows "$IN" --report /dev/stderr >"$OUT" 2>&1`);
      const shared = lines(readFileSync(join(dir, "out"), "utf8")).map(
        (line) => JSON.parse(line) as { status?: string; loss_mask?: string },
      );
      expect([
        run.status,
        shared.filter((o) => o.status === "ok").length,
        shared.filter((o) => o.loss_mask !== undefined).length > 2,
      ]).toEqual([0, lines(readFileSync(input, "utf8")).length, true]);
    },
  );

  it("the progress bar stays off a terminal that rows or reports are written to", () => {
    const input = join(tmp(), "in.jsonl");
    writeFileSync(input, goodLines(3).join("\n") + "\n");
    // `script` runs the command on a pseudo-terminal (stdout and stderr both on it).
    const onTerminal = (args: string) =>
      spawnSync("script", ["-qec", `node ${join(ROOT, "bin/callforest.js")} rows ${input} ${args}`, "/dev/null"], {
        encoding: "utf8",
      }).stdout;
    const BAR = "░";
    expect(onTerminal(`-o ${join(tmp(), "rows.jsonl")}`)).toContain(BAR); // the bar is drawn
    for (const args of [
      "",
      `-o /dev/null --report /dev/stderr`,
      `-o /dev/null --report -`,
      `-o /dev/null --report /dev/tty`,
      `-o /dev/fd/3 3>/dev/tty`,
    ]) {
      const shown = onTerminal(args);
      expect(shown, args).not.toContain(BAR);
      expect(shown, args).toContain('"rollout_id"');
    }
  });

  it("stdin redirected from a directory is refused as a named directory is, on every command that reads it", () => {
    const dir = tmp();
    const bin = join(ROOT, "bin/callforest.js");
    for (const argv of [["rows"], ["rows", "-"], ["convert"], ["show", "-"], ["draw", "-", "-o", "-"]]) {
      const run = spawnSync("bash", ["-c", `node "$CF" ${argv.join(" ")} <"$DIR"`], {
        encoding: "utf8",
        env: { ...process.env, CF: bin, DIR: dir },
      });
      expect([argv.join(" "), run.status, run.stderr]).toEqual([
        argv.join(" "),
        2,
        "callforest: cannot read <stdin>: is a directory\n",
      ]);
    }
    const empty = spawnSync(process.execPath, [bin, "draw", "-", "-o", "-"], { input: "", encoding: "utf8" });
    expect([empty.status, empty.stderr]).toEqual([2, "callforest: <stdin> holds no rollout\n"]);
  });

  it("a note stays one line whatever the file name holds", async () => {
    const input = join(tmp(), "odd\nname.jsonl");
    writeFileSync(input, "not json\n");
    const r = await cli("rows", input, "-o", join(tmp(), "rows.jsonl"), "--quiet");
    const notes = r.stderr.trimEnd().split("\n");
    expect(notes[0]).toBe(
      `${input.replace("\n", "\\n")}:1: rejected (malformed_json): ` +
        `not JSON at byte 1: unexpected 'o' where 'null' should be`,
    );
    expect(notes).toHaveLength(1);
  });

  it("a read error in the middle of an input names the input, and closes it", async () => {
    // The descriptors this process holds on a process's memory file: none once each command is done.
    const onMem = () =>
      readdirSync("/proc/self/fd").filter((fd) => {
        try {
          return /^\/proc\/\d+\/mem$/.test(readlinkSync(`/proc/self/fd/${fd}`));
        } catch {
          return false; // closed meanwhile
        }
      });
    for (const command of ["rows", "show", "convert"]) {
      const r = await cli(
        command,
        "/proc/self/mem",
        ...(command === "rows" ? ["-o", join(tmp(), "rows.jsonl"), "--quiet"] : []),
      );
      expect([command, r.code, r.stderr, onMem()]).toEqual([
        command,
        2,
        "callforest: cannot read /proc/self/mem: input/output error\n",
        [],
      ]);
    }
  });

  it("show names file:line for a rollout the planner rejects, as for one the importer rejects", async () => {
    const input = join(tmp(), "bad.jsonl");
    writeFileSync(
      input,
      `${goodLines(1)[0]}\n{"rollout_id":"x","reward":0,"calls":[{"id":"a","prompt_token_ids":[-1],` +
        `"generation_token_ids":[2],"generation_log_probs":[-1]}]}\n`,
    );
    const r = await cli("show", input);
    expect(r.code).toBe(0);
    expect(r.stdout.trimEnd().split("\n").at(-1)).toBe(
      `${input}:2: rejected (invalid_token): call "a" (calls[0]): ` +
        `prompt_token_ids[0] is -1, not an integer in [0, 2^31-1]`,
    );
    // An importer's rejection carries its own code too, as convert and rows say it.
    const unknown = join(tmp(), "unknown.jsonl");
    writeFileSync(unknown, "[1]\n");
    expect((await cli("show", unknown)).stdout).toBe(
      `${unknown}:1: rejected (invalid_rollout, unknown_format): the value is an array, expected a JSON object\n`,
    );
    // One blank line between rollouts, none before the first.
    const alone = await cli("show", LOGIN_BUG);
    expect(r.stdout.startsWith("\n")).toBe(false);
    expect(r.stdout.endsWith(`\n\n${r.stdout.trimEnd().split("\n").at(-1)}\n`)).toBe(true);
    expect(alone.stdout.includes("\n\n\n")).toBe(false);
  });

  it("an output that is also an input (or another output) is refused before anything is written", async () => {
    const dir = tmp();
    const input = join(dir, "in.jsonl");
    writeFileSync(input, goodLines(3).join("\n") + "\n");
    const before = readFileSync(input, "utf8");
    for (const [argv, message] of [
      [
        ["convert", input, "-o", input],
        `callforest: -o ${input}: is also the input ${input}; write the output somewhere else`,
      ],
      [
        ["rows", input, "--report", input, "--quiet"],
        `callforest: --report ${input}: is also the input ${input}; write the output somewhere else`,
      ],
      [
        ["rows", input, "-o", join(dir, "x"), "--report", join(dir, "x"), "--quiet"],
        `callforest: --report ${join(dir, "x")}: is also -o ${join(dir, "x")}; write the output somewhere else`,
      ],
    ] as const) {
      const r = await cli(...argv);
      expect([r.code, r.stderr]).toEqual([2, message + "\n"]);
    }
    expect(readFileSync(input, "utf8")).toBe(before);
    // Nor through a symbolic link: to the directory, or a link to a file not there yet.
    mkdirSync(join(dir, "real"));
    symlinkSync(join(dir, "real"), join(dir, "linked"));
    symlinkSync(join(dir, "real", "y"), join(dir, "dangling"));
    for (const [output, report] of [
      [join(dir, "real", "x"), join(dir, "linked", "x")],
      [join(dir, "real", "y"), join(dir, "dangling")],
      [join(dir, "dangling"), join(dir, "linked", "y")],
    ]) {
      const r = await cli("rows", input, "-o", output, "--report", report, "--quiet");
      expect([r.code, r.stderr]).toEqual([
        2,
        `callforest: --report ${report}: is also -o ${output}; write the output somewhere else\n`,
      ]);
    }
    expect(readdirSync(join(dir, "real"))).toEqual([]); // refused before anything was written
    // Devices are not files: /dev/null may take both outputs.
    const both = await cli("rows", input, "-o", "/dev/null", "--report", "/dev/null", "--quiet");
    expect([both.code, both.stderr]).toEqual([0, ""]);
  });

  it("ByteSink: a write waiting on 'drain' wakes with the failure, and close() reports it", async () => {
    const sink = openByteSink("/dev/full");
    const big = new Uint8Array(16 << 20); // more than the stream's buffer: the write waits
    await expect(Promise.resolve().then(() => sink.write(big))).rejects.toThrow(
      "cannot write /dev/full: no space left on device",
    );
    await expect(sink.close()).rejects.toBeInstanceOf(FileError);
    await expect(sink.close()).rejects.toThrow("cannot write /dev/full: no space left on device");
  });

  it("ByteSink: writes made while the stream is full share one wait on 'drain', and all get the failure", async () => {
    const sink = openByteSink("/dev/full");
    const big = new Uint8Array(16 << 20);
    const first = sink.write(big);
    const waits = Array.from({ length: 20 }, () => sink.write(new Uint8Array(1024)));
    expect(first).toBeInstanceOf(Promise);
    expect(new Set([first, ...waits]).size).toBe(1); // one promise: no listener per write (no MaxListeners warning)
    const outcomes = await Promise.allSettled([first, ...waits]);
    expect(outcomes.every((outcome) => outcome.status === "rejected")).toBe(true);
    await expect(sink.close()).rejects.toThrow("cannot write /dev/full: no space left on device");
  });

  it("ByteSink: once drained, the next write that fills the stream waits again", async () => {
    const dir = tmp();
    const sink = openByteSink(join(dir, "out"));
    const first = sink.write(new Uint8Array(16 << 20).fill(1));
    await first;
    const second = sink.write(new Uint8Array(16 << 20).fill(2));
    expect(second).toBeInstanceOf(Promise);
    expect(second).not.toBe(first);
    await second;
    await sink.close();
    sink.commit?.();
    const written = readFileSync(join(dir, "out"));
    expect(written.length).toBe(32 << 20);
    expect([written[0], written[(16 << 20) - 1], written[16 << 20], written.at(-1)]).toEqual([1, 1, 2, 2]);
  });

  it("withSinks: the work's own error wins over a close() failure, and every sink is closed", async () => {
    const dir = tmp();
    const closed: string[] = [];
    const boom = new Error("the work failed");
    await expect(
      withSinks([join(dir, "a"), join(dir, "b")], async (sinks) => {
        for (const [i, sink] of sinks.entries()) {
          const close = sink!.close.bind(sink);
          sink!.close = async () => {
            closed.push(String(i));
            await close();
            throw new Error("close failed");
          };
        }
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(closed).toEqual(["0", "1"]);
  });
});

describe("exit codes", () => {
  it("maps usage, --strict, file-system and internal errors", () => {
    const system = (code: string, syscall: string, path?: string) =>
      Object.assign(new Error(`${code}: oops, ${syscall}`), { code, syscall, path });
    expect(failureOf(new UsageError("bad --x"))).toEqual({ exitCode: 2, message: "bad --x" });
    expect(failureOf(new StrictFailure("2 of 3 rollouts rejected"))).toEqual({
      exitCode: 1,
      message: "2 of 3 rollouts rejected",
    });
    expect(failureOf(system("ENOENT", "open", "/in.jsonl"))).toEqual({
      exitCode: 2,
      message: "cannot read /in.jsonl: no such file",
    });
    expect(failureOf(system("EACCES", "open", "/in.jsonl"))).toEqual({
      exitCode: 2,
      message: "cannot read /in.jsonl: permission denied",
    });
    expect(failureOf(system("EISDIR", "read", "/d"))).toEqual({
      exitCode: 2,
      message: "cannot read /d: is a directory",
    });
    expect(failureOf(system("ENOSPC", "write", "/out"))).toEqual({
      exitCode: 2,
      message: "cannot write /out: no space left on device",
    });
    expect(failureOf(new FileError("write", "/out", system("EPIPE", "write")))).toEqual({ exitCode: 141, message: "" });
    expect(failureOf(new FileError("write", "<stdout>", system("EPIPE", "write")))).toEqual({
      exitCode: 141,
      message: "",
    });
    expect(failureOf(new Error("assertion failed\n    at somewhere"))).toEqual({
      exitCode: EX_SOFTWARE,
      message: "internal error: assertion failed",
    });
    expect(failureOf(new TypeError("x is undefined"))).toEqual({
      exitCode: 70,
      message: "internal error: x is undefined",
    });
    expect(failureOf(Object.assign(new Error("not a system error"), { code: "unsafe_rollout_id" })).exitCode).toBe(70);
  });

  it("an internal error is one line and exit 70", async () => {
    const err: string[] = [];
    const stdout = vi.spyOn(process.stdout, "write").mockImplementation(() => {
      throw new TypeError("stdout exploded");
    });
    const stderr = vi
      .spyOn(process.stderr, "write")
      .mockImplementation((chunk: unknown) => (err.push(String(chunk)), true));
    let code: number;
    try {
      code = await main(["show", LOGIN_BUG]);
    } finally {
      stdout.mockRestore();
      stderr.mockRestore();
    }
    expect([code, err.join("")]).toEqual([70, "callforest: internal error: stdout exploded\n"]);
  });

  it("rows --help says when --jobs pays, with docs/performance.md's figures (issue 39)", async () => {
    const rows = (await buildProgram()).commands.find((c) => c.name() === "rows")!;
    const help = rows.helpInformation().replace(/\s+/g, " ");
    const jobs = help.slice(help.indexOf("--jobs <n>"), help.indexOf("--quiet"));
    const figures = [...jobs.matchAll(/(\d+\.\d+)x/g)].map((m) => m[1]);
    expect(figures.length).toBeGreaterThanOrEqual(4);
    const performance = readFileSync(join(ROOT, "docs", "performance.md"), "utf8");
    const section = performance.slice(
      performance.indexOf("## --jobs on 2 cores"),
      performance.indexOf("## End to end"),
    );
    for (const figure of figures) expect([figure, performance.includes(`${figure}×`)]).toEqual([figure, true]);
    expect(section).toContain("0.77×");
    expect(section).toContain("0.90×");
  });

  it("rows --help says small inputs run in-process", async () => {
    const rows = (await buildProgram()).commands.find((c) => c.name() === "rows")!;
    expect(rows.helpInformation().replace(/\s+/g, " ")).toContain(
      "small inputs, at most one 2 MB batch, run in-process",
    );
  });
});

/** A dropped file's items as the page reads them (web/main.ts's eachItem, all at once rather than in slices). */
function pageItems(name: string, content: Uint8Array | string): ReadItem[] {
  const bytes = typeof content === "string" ? new TextEncoder().encode(content) : content;
  if (holdsOneValue(name, bytes)) return parseJsonInput(name, bytes);
  return Array.from(jsonlItems(name, bytes), ({ item }) => item);
}

/** What each reader makes of `content` as a file named `name`: [where, reason or "ok"] per item. */
async function readers(name: string, content: Uint8Array | string) {
  const dir = tmp();
  const file = join(dir, name);
  writeFileSync(file, content);
  const summary = (items: ReadItem[]) =>
    items.map((i) => [i.where.slice(dir.length + 1), i.result.ok ? "ok" : i.result.reason]);
  const read: ReadItem[] = [];
  for await (const item of readRollouts([file])) read.push(item);
  const page = pageItems(file, typeof content === "string" ? content : new Uint8Array(content));
  const report = join(dir, "report.jsonl");
  const rows = await cli("rows", file, "-o", join(dir, "rows.jsonl"), "--report", report);
  expect(rows.code).toBe(0);
  const reports = lines(readFileSync(report, "utf8")).map((l) => JSON.parse(l));
  return {
    read: summary(read),
    page: summary(page),
    rows: reports.map((r) => [r.line === undefined ? name : `${name}:${r.line}`, r.status === "ok" ? "ok" : r.reason]),
    details: read.map((i) => (i.result.ok ? "" : i.result.detail)),
    rowDetails: reports.map((r) => r.detail ?? ""),
    file,
  };
}

describe("every reader reads the same lines", () => {
  const [a, b, c] = goodLines(2, 3);

  /** rows, show/draw/convert and the page agree: the same items, numbered alike. */
  const expectEveryReader = (got: { read: unknown; page: unknown; rows: unknown }, want: unknown) => {
    expect(got.read).toEqual(want);
    expect(got.page).toEqual(want);
    expect(got.rows).toEqual(want);
  };

  it(
    "a file named neither .json nor .jsonl goes by its first line, " + "on every reader (the page too); .JSON is .json",
    async () => {
      const pretty = `\n${JSON.stringify([JSON.parse(a), JSON.parse(b)], null, 2)}\n`;
      const document = await readers("rollouts.txt", pretty);
      expect([document.read, document.page]).toEqual([
        [
          ["rollouts.txt[0]", "ok"],
          ["rollouts.txt[1]", "ok"],
        ],
        [
          ["rollouts.txt[0]", "ok"],
          ["rollouts.txt[1]", "ok"],
        ],
      ]);
      // reports of a value's elements give the line each starts on (issue 39)
      const starts = pretty.split("\n").flatMap((text, i) => (text === "  {" ? [`rollouts.txt:${i + 1}`] : []));
      expect(starts[0]).toBe("rollouts.txt:3");
      expect(document.rows).toEqual(starts.map((where) => [where, "ok"]));
      expectEveryReader(await readers("rollouts.txt", `${a}\n${b}\n`), [
        ["rollouts.txt:1", "ok"],
        ["rollouts.txt:2", "ok"],
      ]);
      const asJsonl = await readers("pretty.ndjson", pretty); // a JSONL name is JSONL, whatever it holds
      expect([asJsonl.read[0], asJsonl.read.length > 10]).toEqual([["pretty.ndjson:2", "malformed_json"], true]);
      expectEveryReader(asJsonl, asJsonl.read);
      // `.JSON` is `.json`: a compact array on one line is one value, not a JSONL line.
      const upper = await readers("ROLLOUTS.JSON", `${JSON.stringify([JSON.parse(a), JSON.parse(b)])}\n`);
      expect([upper.read, upper.rows]).toEqual([
        [
          ["ROLLOUTS.JSON[0]", "ok"],
          ["ROLLOUTS.JSON[1]", "ok"],
        ],
        [
          ["ROLLOUTS.JSON:1", "ok"],
          ["ROLLOUTS.JSON:1", "ok"],
        ],
      ]);
    },
  );

  it("a lone CR is not a line break (rows, show/draw/convert and the page agree)", async () => {
    const got = await readers("cr.jsonl", `${a}\r${b}\n${c}\r\n`);
    const want = [
      ["cr.jsonl:1", "malformed_json"],
      ["cr.jsonl:2", "ok"],
    ];
    expectEveryReader(got, want);
    expect(got.details).toEqual(got.rowDetails);
  });

  it("a byte order mark opening the file is skipped (JSONL and .json); one further in is malformed_json", async () => {
    expectEveryReader(await readers("bom.jsonl", `${BOM}${a}\n${BOM}${b}\n${c}\n`), [
      ["bom.jsonl:1", "ok"],
      ["bom.jsonl:2", "malformed_json"],
      ["bom.jsonl:3", "ok"],
    ]);
    const bom = await readers("bom.json", `${BOM}${a}`);
    expect([bom.read, bom.page, bom.rows]).toEqual([
      [["bom.json", "ok"]],
      [["bom.json", "ok"]],
      [["bom.json:1", "ok"]],
    ]);
    // The mark alone, and stdin, and a read that hands out one byte at a time.
    expectEveryReader(await readers("mark-only.jsonl", BOM), []);
    const dir = tmp();
    const file = join(dir, "in.jsonl");
    writeFileSync(file, `${BOM}${a}\n`);
    const run = spawnSync(process.execPath, [join(ROOT, "bin/callforest.js"), "rows", "-", "--quiet"], {
      input: readFileSync(file),
      encoding: "utf8",
    });
    expect([run.status, run.stderr, lines(run.stdout).length]).toEqual([0, "", 5]);
    const bytes = readFileSync(file);
    let at = 0;
    const trickle = withoutLeadingMark({
      read: async (into, offset) => (at < bytes.length ? ((into[offset] = bytes[at++]), 1) : 0),
      close: async () => {},
    });
    const out = new Uint8Array(bytes.length);
    let filled = 0;
    for (let n = -1; n !== 0; filled += n) n = await trickle.read(out, filled, out.length - filled);
    expect(Buffer.from(out.subarray(0, filled)).toString()).toBe(`${a}\n`);
  });

  it(
    "stdin that opens with `{` or `[` alone is one pretty-printed value " +
      "(cat x.json | callforest ...), on every command",
    () => {
      const bin = join(ROOT, "bin/callforest.js");
      const pretty = readFileSync(LOGIN_BUG, "utf8");
      expect(pretty.split("\n")[0]).toBe("{");
      const second = JSON.stringify({ ...JSON.parse(pretty), rollout_id: "second" }, null, 2);
      const array = `${BOM}[\n${pretty.trimEnd()},\n${second}\n]\n`;
      const stdin = (input: string, ...argv: string[]) =>
        spawnSync(process.execPath, [bin, ...argv], { input, encoding: "utf8" });
      const report = join(tmp(), "report.jsonl");
      let run = stdin(pretty, "rows", "--report", report);
      expect([
        run.status,
        run.stderr,
        lines(run.stdout).length,
        JSON.parse(lines(readFileSync(report, "utf8"))[0]).status,
      ]).toEqual([0, "", 5, "ok"]);
      run = stdin(array, "rows", "-", "--quiet", "--jobs", "2");
      expect([
        run.status,
        run.stderr,
        lines(run.stdout)
          .map((l) => JSON.parse(l).rollout_id)
          .join(),
      ]).toEqual([0, "", "login-bug,".repeat(5) + "second,".repeat(4) + "second"]);
      run = stdin(array, "convert");
      expect([run.status, lines(run.stdout).map((l) => JSON.parse(l).rollout_id)]).toEqual([
        0,
        ["login-bug", "second"],
      ]);
      run = stdin(pretty, "show", "-");
      expect([run.status, run.stdout]).toEqual([0, stdin(pretty.replace(/\n\s*/g, ""), "show", "-").stdout]);
      run = stdin(pretty, "draw", "-", "-o", "-");
      expect([run.status, run.stdout.startsWith("<?xml")]).toEqual([0, true]);
      // Blank lines before it; and inputs with no name to go by: /dev/stdin, a pipe, another name.
      run = stdin(`\n\n${pretty}`, "rows", "--quiet");
      expect([run.status, run.stderr, lines(run.stdout).length]).toEqual([0, "", 5]);
      const txt = join(tmp(), "rollout.txt");
      writeFileSync(txt, pretty);
      for (const command of [
        `node "$CF" rows /dev/stdin --quiet <"$IN"`,
        `node "$CF" rows <(cat "$IN") --quiet`,
        `node "$CF" rows "$TXT" --quiet`,
      ]) {
        const sh = spawnSync("bash", ["-c", command], {
          encoding: "utf8",
          env: { ...process.env, CF: bin, IN: LOGIN_BUG, TXT: txt },
        });
        expect([command, sh.status, sh.stderr, lines(sh.stdout).length]).toEqual([command, 0, "", 5]);
      }
      const jsonl = join(tmp(), "pretty.jsonl"); // a .jsonl name is JSONL, as ever
      writeFileSync(jsonl, pretty);
      expect(stdin("", "rows", jsonl, "--quiet").stderr.split("\n")[0]).toMatch(
        /pretty\.jsonl:1: rejected \(malformed_json\)/,
      );
      // JSONL on stdin is read as ever, and a broken document is one rejection, not one per line.
      run = stdin(goodLines(2).join("\n"), "rows", "--quiet");
      expect([run.status, run.stderr]).toEqual([0, ""]);
      run = stdin(pretty.slice(0, 200), "rows");
      expect(run.stderr.split("\n")[0]).toMatch(/^<stdin>: rejected \(malformed_json\): /);
      expect(run.stderr.split("\n")[1]).toBe("callforest: 1 rollout (0 ok, 1 rejected), 0 rows");
    },
  );

  it("opensDocument: only a first line of `{` or `[` alone (after a byte order mark, around blanks)", () => {
    const bytes = (text: string) => new TextEncoder().encode(text);
    for (const text of ["{\n", "[\n", ' { \r\n"a": 1}', `${BOM}[\n1]`, "{", "\n \r\n\t{\n"])
      expect(opensDocument(bytes(text)), JSON.stringify(text)).toBe(true);
    for (const text of ['{"a": 1}\n{\n', '{ "a"\n', "[1,\n2]", "\n\n{}\n", "", "\n\n", "{}\n"])
      expect(opensDocument(bytes(text)), JSON.stringify(text)).toBe(false);
    // Past 16 MB of blanks it is JSONL, as a stream is sniffed (view - and the page read it so too).
    expect([
      opensDocument(bytes(`${" ".repeat((16 << 20) - 3)}{\n}`)),
      opensDocument(bytes(`${" ".repeat(16 << 20)}{\n}`)),
    ]).toEqual([true, false]);
  });

  it("a pretty-printed JSON value in a JSONL file: its first line says what is likely wrong", async () => {
    const got = await readers("pretty.jsonl", JSON.stringify(JSON.parse(a), null, 2) + "\n");
    expect(got.details[0]).toBe(
      "not JSON at byte 1: cut off: the line ends where a key string should be " +
        "(a JSON value spread over lines? JSONL holds one a line; a .json file may hold one value over many)",
    );
    expect(got.details[1]).not.toContain("spread over lines"); // `"rollout_id": ...,`
    expect(got.rowDetails).toEqual(got.details);
  });

  it("blank means spaces, tabs and CRs only; other white space is a malformed line", async () => {
    const got = await readers("blank.jsonl", `${a}\n \t\r\n\n\f\n\u00a0\n${b}\n`);
    const want = [
      ["blank.jsonl:1", "ok"],
      ["blank.jsonl:4", "malformed_json"],
      ["blank.jsonl:5", "malformed_json"],
      ["blank.jsonl:6", "ok"],
    ];
    expectEveryReader(got, want);
  });

  it("invalid UTF-8 in a JSONL line is malformed_json with its line number", async () => {
    const bad = Buffer.concat([
      Buffer.from(`${a}\n`),
      Buffer.from(b.replace('"rollout_id":"', '"rollout_id":"\u00e9')),
      Buffer.from(`\n${c}\n`),
    ]);
    const at = bad.indexOf(0xc3, a.length + 1);
    bad[at] = 0xff; // the é's first byte: the line is no longer UTF-8
    const got = await readers("utf8.jsonl", bad);
    const want = [
      ["utf8.jsonl:1", "ok"],
      ["utf8.jsonl:2", "malformed_json"],
      ["utf8.jsonl:3", "ok"],
    ];
    expectEveryReader(got, want);
    expect(got.details[1]).toMatch(/^not JSON at byte \d+: invalid UTF-8$/);
    expect(got.details).toEqual(got.rowDetails);
  });

  it("a .json file with invalid UTF-8 is malformed_json, not silently repaired", async () => {
    const example = readFileSync(LOGIN_BUG);
    const at = example.indexOf(Buffer.from('"rollout_id": "')) + 15;
    expect(at).toBeGreaterThan(15);
    const bad = Buffer.concat([example.subarray(0, at), Buffer.from([0xc3, 0x28]), example.subarray(at)]);
    const got = await readers("bad.json", bad);
    expect(got.read).toEqual([["bad.json", "malformed_json"]]);
    expect(got.page).toEqual([["bad.json", "malformed_json"]]);
    expect(got.rows).toEqual([["bad.json", "malformed_json"]]);
    expect(got.details[0]).toBe(`not JSON at byte ${at}: invalid UTF-8`);
    const convert = await cli("convert", got.file);
    expect(convert.code).toBe(0);
    expect(convert.stdout).toBe("");
    expect(convert.stderr).toMatch(/bad\.json: rejected \(malformed_json\): not JSON at byte \d+: invalid UTF-8\n$/);
  });
});
