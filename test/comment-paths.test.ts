// File paths named in comments point at files that exist: a comment saying where something lives
// (`the host's copy is src/core/types.ts`) must not outlive a move. A path counts when it has a
// folder and a file ending, and is found from the repository root, the file's folder, or one of
// the source roots; built outputs (build/, dist/) are not in the repository and are not checked.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "./support/fixtures.js";

const SOURCES = ["src", "assembly", "bench", "web", "test", "scripts", "bin", ".ci"];
const PATH = /(?<![\w./@:-])(\.{0,2}\/?[\w.-]+(?:\/[\w.-]+)+\.(?:ts|js|md|json|jsonl|sh|wasm|html))(?![\w/])/g;
/** Where a line's comment starts: a line comment, a block comment's line, or a shell comment. */
const COMMENT = /(^\s*(\/\/|\*|\/\*|#))|\s\/\/\s/;

/** `file:line: path` for each path named in a comment that resolves to no file. */
function stalePaths(): string[] {
  const files = execFileSync("git", ["ls-files", ...SOURCES], { cwd: ROOT, encoding: "utf8" })
    .split("\n")
    .filter((file) => /\.(ts|js|mjs|sh|html)$/.test(file) || file === ".ci/run");
  const stale: string[] = [];
  for (const file of files) {
    readFileSync(join(ROOT, file), "utf8")
      .split("\n")
      .forEach((line, i) => {
        const at = line.search(COMMENT);
        if (at < 0) return;
        for (const [, path] of line.slice(at).matchAll(PATH)) {
          if (/^(\.\/)?(build|dist)\//.test(path)) continue;
          const bases = [
            ROOT,
            join(ROOT, dirname(file)),
            ...["src", "assembly", "test", "web"].map((d) => join(ROOT, d)),
          ];
          if (!bases.some((base) => existsSync(join(base, path)))) stale.push(`${file}:${i + 1}: ${path}`);
        }
      });
  }
  return stale;
}

describe("comments", () => {
  it("name only files that exist", () => {
    expect(stalePaths()).toEqual([]);
  });
});
