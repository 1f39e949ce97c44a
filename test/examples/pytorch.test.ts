// examples/pytorch (issue 16): a real trainer's transformer, in PyTorch, computes the same
// per-token log-probabilities and summed loss from the CLI's packed trees and bins as from its
// rows. Runs in the project's .venv with the callforest Python package installed into it
// (scripts/ensure-python.sh, which `pretest` and CI run); without it this test fails, not skips.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, test } from "vitest";
import { ROOT } from "../support/fixtures.js";

const PYTHON = join(ROOT, ".venv", "bin", "python");

test("examples/pytorch/run.sh: packed trees and bins train the same as rows", () => {
  const probe = spawnSync(PYTHON, ["-c", "import torch, callforest"], { encoding: "utf8" });
  if (probe.status !== 0) {
    throw new Error(
      `PyTorch or the callforest package is missing: ${PYTHON} -c "import torch, callforest" failed ` +
        `(${(probe.stderr || String(probe.error ?? "")).trim().split("\n").pop()}). ` +
        "Build the environment with: bash scripts/ensure-python.sh",
    );
  }
  // No deadline of its own (PyTorch is slow on a loaded machine): a hang is the watchdog's to name.
  const run = spawnSync("bash", [join(ROOT, "examples", "pytorch", "run.sh")], {
    cwd: ROOT,
    encoding: "utf8",
    env: { ...process.env, PYTHON },
  });
  expect(run.status, `run.sh failed:\n${run.stdout}\n${run.stderr}`).toBe(0);
  expect(run.stdout).toMatch(/^check_packed: ok, \d+ trained tokens of 18 rollouts/m);
});

test("examples/pytorch/run.sh without a Python says how to get one, before doing any work (issue 39)", () => {
  const out = mkdtempSync(join(tmpdir(), "callforest-pytorch-"));
  try {
    const missing = join(out, "no-such-python");
    const run = spawnSync("bash", [join(ROOT, "examples", "pytorch", "run.sh")], {
      cwd: ROOT,
      encoding: "utf8",
      env: { ...process.env, PYTHON: missing, OUT: out },
    });
    expect([run.status, run.stdout]).toEqual([2, ""]);
    expect(run.stderr).toBe(
      `run.sh: no Python at ${missing}: build the project's with 'bash scripts/ensure-python.sh', ` +
        "or name one that has torch: PYTHON=/path/to/python bash examples/pytorch/run.sh\n",
    );
    expect(readdirSync(out)).toEqual([]);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
