// A line longer than the reader could ever take is rejected without being kept: the CLI's memory
// stays bounded by the reader's limit, not by the line (a stray binary file, /dev/zero), and the
// rollouts around it come out as always. Run as a real process, so its peak memory can be read.
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../support/fixtures.js";
import { goodLines, lines, tempDir } from "./cli.js";

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
  maxRssBytes: number;
}

/** `callforest ...argv` in a child process, fed `lineBytes` of one long line between two good ones on stdin. */
async function rowsOnLongLine(argv: string[], lineBytes: number, [before, after]: string[]): Promise<Outcome> {
  const preload = join(tempDir(), "max-rss.cjs");
  writeFileSync(
    preload,
    'process.on("exit", () => process.stderr.write(`max-rss-kb=${process.resourceUsage().maxRSS}\\n`));\n',
  );
  const child = spawn(process.execPath, ["--require", preload, join(ROOT, "bin", "callforest.js"), ...argv], {
    cwd: ROOT,
  });
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
  child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
  const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
  const write = (chunk: string | Buffer) =>
    new Promise<void>((resolve, reject) => child.stdin.write(chunk, (error) => (error ? reject(error) : resolve())));
  await write(before + "\n");
  const block = Buffer.alloc(4 << 20, "1,"); // digits and commas: it could be token arrays, it is just too long
  for (let left = lineBytes; left > 0; left -= block.length)
    await write(left >= block.length ? block : block.subarray(0, left));
  await write("\n" + after + "\n");
  child.stdin.end();
  const code = await exited;
  const text = Buffer.concat(stderr).toString("utf8");
  const rss = /max-rss-kb=(\d+)\n$/.exec(text);
  expect(rss, text).not.toBeNull();
  return {
    code,
    stdout: Buffer.concat(stdout).toString("utf8"),
    stderr: text.slice(0, rss!.index),
    maxRssBytes: Number(rss![1]) * 1024,
  };
}

describe("a line longer than the reader takes", () => {
  it("is rejected in order with rollout_too_large, never held in memory, on worker threads too", async () => {
    const [before, after] = goodLines(2, 21);
    const lineBytes = 640 << 20; // 2.5 times what the JSON.parse reader takes (256 MB)
    const run = await rowsOnLongLine(
      ["rows", "--backend", "ts", "--jobs", "2", "--report", "-", "-o", "/dev/null"],
      lineBytes,
      [before, after],
    );
    expect([run.code, run.stderr]).toEqual([0, ""]); // with --report, no summary
    const reports = lines(run.stdout).map((line) => JSON.parse(line));
    expect(reports.map((r) => [r.line, r.status, r.reason ?? null])).toEqual([
      [1, "ok", null],
      [2, "rejected", "rollout_too_large"],
      [3, "ok", null],
    ]);
    expect(reports[1].detail).toBe(
      `the line has ${lineBytes} bytes, more than the JSON.parse reader takes (256 MB); ` +
        `the WASM scanner (--backend wasm) reads lines of up to 4 GiB`,
    );
    expect(reports.map((r) => r.rollout_id)).toEqual([
      JSON.parse(before).rollout_id,
      null,
      JSON.parse(after).rollout_id,
    ]);
    // Held whole, the line alone would take 640 MB; dropped past the limit, the run stays well under it.
    expect(run.maxRssBytes).toBeLessThan(520 << 20);
  });
});
