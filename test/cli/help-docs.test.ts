// docs/cli.md documents every option each command's --help lists (commands added later
// included): in the command's synopsis line, or in the section whose heading names it.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildProgram } from "../../src/cli/main.js";
import { ROOT } from "../support/fixtures.js";

const doc = readFileSync(join(ROOT, "docs", "cli.md"), "utf8");

/** The synopsis entry of `command`: its `callforest <command>` line and the indented ones after it. */
function synopsisOf(command: string): string {
  const synopsis = /^```\n(callforest [\s\S]*?)```/m.exec(doc)?.[1] ?? "";
  const entry = new RegExp(`^callforest ${command} .*(?:\\n {2,}.*)*`, "m").exec(synopsis + "\n");
  return entry?.[0] ?? "";
}

/** The text of the `##` sections whose heading names `command` (`## draw, view`). */
function sectionsOf(command: string): string {
  return doc
    .split(/^(?=## )/m)
    .filter((section) => /^## (.*)/.exec(section)?.[1].split(/,\s*/).includes(command))
    .join("\n");
}

const commands = (await buildProgram()).commands.map((command) => ({
  name: command.name(),
  flags: command.options.filter((option) => !option.hidden).map((option) => [option.long!, option.short] as const),
}));

describe("docs/cli.md", () => {
  it("has a synopsis entry for every command", () => {
    expect(commands.map(({ name }) => name)).toEqual(expect.arrayContaining(["rows", "explain", "agent-demo"]));
    expect(commands.filter(({ name }) => synopsisOf(name) === "").map(({ name }) => name)).toEqual([]);
  });

  it.each(commands.map(({ name, flags }) => [name, flags] as const))(
    "documents every option `%s --help` lists",
    (name, flags) => {
      const text = `${synopsisOf(name)}\n${sectionsOf(name)}`;
      const mentions = (flag: string | undefined) =>
        flag !== undefined && new RegExp(`(^|[\\s\`\\[])${flag}(?![\\w-])`).test(text);
      expect(flags.filter(([long, short]) => !mentions(long) && !mentions(short)).map(([long]) => long)).toEqual([]);
    },
  );
});
