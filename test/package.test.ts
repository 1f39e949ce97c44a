// The package as users get it after `npm ci` (which builds dist/ and build/*.wasm): the bin, the
// quick-start demo, and loading from CommonJS (possible only because init() uses no top-level await).
import { describe, expect, it } from "vitest";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

const root = new URL("..", import.meta.url).pathname;

function run(args: string[]) {
  return spawnSync(process.execPath, args, { cwd: root, encoding: "utf8" });
}

describe("the built package", () => {
  it("has been built (npm ci runs prepare)", () => {
    for (const file of ["dist/index.js", "dist/cli/main.js", "build/core-simd.wasm", "build/core-scalar.wasm"]) {
      expect(existsSync(root + file), `${file} is missing: run npm run build`).toBe(true);
    }
  });

  it("runs the quick-start demo through the bin", () => {
    const out = execFileSync(process.execPath, ["bin/callforest.js", "demo"], { cwd: root, encoding: "utf8" });
    expect(out).toContain("every generated token trained exactly once: 21 of 21");
  });

  it("loads from CommonJS with require()", () => {
    const script =
      "const { init } = require('callforest');" +
      "const fs = require('fs');" +
      "init().then((cf) => { const p = cf.plan(JSON.parse(fs.readFileSync('examples/login-bug.json', 'utf8')));" +
      "console.log(cf.backend, p.report.rows); });";
    const result = run(["--experimental-require-module", "--no-warnings", "-e", script]);
    expect(result.stderr).toBe("");
    expect(result.stdout.trim()).toBe("wasm 5");
  });

  it("answers --help for every command and exits 2 on bad arguments", () => {
    for (const command of ["rows", "show", "demo", "convert", "draw", "view", "agent-demo"]) {
      const help = run(["bin/callforest.js", command, "--help"]);
      expect(help.status, command).toBe(0);
      expect(help.stdout).toContain(`Usage: callforest ${command}`);
    }
    const bad = run(["bin/callforest.js", "rows", "--backend", "gpu", "examples/login-bug.json"]);
    expect(bad.status).toBe(2);
    expect(bad.stderr.trim().split("\n")).toEqual(["callforest: unknown --backend 'gpu': expected wasm or ts"]);
    const unknown = run(["bin/callforest.js", "frobnicate"]);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr.trim().split("\n")).toHaveLength(1);
  });
});
