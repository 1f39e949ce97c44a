// examples/qwen3.json: a Qwen3 conversation of the real-template harness (test/support/qwen3-example.ts).
// The shipped file is exactly what the builder writes (CALLFOREST_WRITE_EXAMPLES=1 rewrites it), and
// the output docs/breaks.md shows for `callforest explain examples/qwen3.json --tokenizer qwen3` is
// what the command prints: the doc's lines, in order, among the command's.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { captureOutput } from "../support/capture.js";
import { ROOT } from "../support/fixtures.js";
import { qwen3ExampleText } from "../support/qwen3-example.js";

const EXAMPLE = "examples/qwen3.json";
const COMMAND = `$ callforest explain ${EXAMPLE} --tokenizer qwen3`;

/** The lines the doc shows under COMMAND, in its fenced block. */
function docLines(): string[] {
  const doc = readFileSync(join(ROOT, "docs", "breaks.md"), "utf8");
  const block = doc.split("```").find((part) => part.trimStart().startsWith(COMMAND));
  expect(block, `docs/breaks.md has no block starting ${COMMAND}`).toBeDefined();
  return block!.trim().split("\n").slice(1);
}

describe(EXAMPLE, () => {
  it("is what the builder writes", () => {
    const text = qwen3ExampleText();
    if (process.env.CALLFOREST_WRITE_EXAMPLES === "1") writeFileSync(join(ROOT, EXAMPLE), text);
    expect(readFileSync(join(ROOT, EXAMPLE), "utf8")).toBe(text);
  });

  it("explain prints what docs/breaks.md shows", async () => {
    const run = await captureOutput(() => main(["explain", EXAMPLE, "--tokenizer", "qwen3"]));
    expect(run.code).toBe(0);
    expect(run.stderr).toBe("");
    const printed = run.stdout.split("\n");
    const shown = docLines();
    expect(shown.filter((line) => line.startsWith(`${EXAMPLE}: `)).length).toBeGreaterThan(2);
    // Each shown line is printed, after the one shown before it.
    let from = 0;
    for (const line of shown) {
      const found = printed.indexOf(line, from);
      expect(found, `not printed (in this order): ${line}`).toBeGreaterThanOrEqual(0);
      from = found + 1;
    }
  });
});
