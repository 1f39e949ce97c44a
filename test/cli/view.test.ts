// `callforest view` as a user starts it: the URL alone on stdout, and on stderr how to stop it
// (issue 39); Ctrl-C (SIGINT) ends it with status 0.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { expect, test } from "vitest";
import { LOGIN_BUG, ROOT } from "../support/fixtures.js";

test("view prints its URL on stdout and how to stop it on stderr; SIGINT stops it", async () => {
  const child = spawn(process.execPath, [join(ROOT, "bin", "callforest.js"), "view", LOGIN_BUG, "--port", "0"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  try {
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = once(child, "exit");
    // Both lines are written before it serves: wait for both.
    while (!stderr.endsWith("\n") || !stdout.endsWith("\n"))
      await Promise.race([once(child.stdout, "data"), once(child.stderr, "data")]);
    expect(stdout).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/[A-Za-z0-9_-]{24}\/\?input=input%2Flogin-bug\.json\n$/);
    expect(stderr).toBe("callforest: serving the page until interrupted: press Ctrl-C to stop\n");
    child.kill("SIGINT");
    const [code] = await exited;
    expect(code).toBe(0);
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
  }
});
