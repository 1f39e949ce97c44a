// A command given no input reads stdin; on a terminal it says so, instead of waiting silently.
// The terminal is a real pseudo-terminal from util-linux's `script` (in every Debian install).
import { spawn, spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../support/fixtures.js";

const BIN = join(ROOT, "bin", "callforest.js");
const NOTE = "callforest: reading rollouts from stdin (a terminal): paste JSONL and end with Ctrl-D";

/** Runs `callforest ...argv` on a pseudo-terminal; answers the note with Ctrl-D (end of input). */
function onTerminal(argv: string[]): Promise<{ code: number | null; output: string }> {
  const command = [process.execPath, BIN, ...argv].map((arg) => `'${arg}'`).join(" ");
  const child = spawn("script", ["-qfec", command, "/dev/null"], { stdio: ["pipe", "pipe", "inherit"] });
  let output = "";
  let answered = false;
  child.stdout.setEncoding("utf8").on("data", (text: string) => {
    output += text;
    if (!answered && output.includes(NOTE)) {
      answered = true;
      child.stdin.write("\x04");
    }
  });
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, output })));
}

describe("stdin on a terminal", () => {
  it.each([["rows"], ["show"], ["convert"]])("%s with no input says what it waits for", async (command) => {
    const run = await onTerminal([command]);
    expect(run.output).toContain(NOTE);
    expect(run.code).toBe(0); // Ctrl-D ended an empty input
  });

  it("says nothing when stdin is a pipe", () => {
    const run = spawnSync(process.execPath, [BIN, "rows", "--quiet"], { input: "", encoding: "utf8" });
    expect([run.status, run.stderr]).toEqual([0, ""]);
  });
});
