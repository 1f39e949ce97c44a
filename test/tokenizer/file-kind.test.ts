// tokenizerFileKind: a tokenizer file told from its text (tokenizer.json or .tiktoken rank file),
// or one line naming it and what is wrong (explain.test.ts runs the same through the CLI).
import { describe, expect, test } from "vitest";
import { tokenizerFileKind } from "../../src/tokenizer/file-kind.js";

const RANKS_DIGIT_FIRST = "4pyF 0\nIQ== 1\n"; // a base64 token may start with a digit

describe("tokenizerFileKind", () => {
  test.each([
    ["o200k_base.tiktoken", RANKS_DIGIT_FIRST],
    ["ranks.txt", RANKS_DIGIT_FIRST],
    ["ranks.txt", "4pyF 0"],
    ["o200k_base.tiktoken", "IQ== 0\n"],
    ["o200k_base.tiktoken", "123 0\n"],
  ])("%s holding %j: a rank file, whatever its first character", (name, text) => {
    expect(tokenizerFileKind(name, text)).toEqual({ kind: "tiktoken" });
  });

  test("a tokenizer.json", () => {
    expect(tokenizerFileKind("tokenizer.json", ' \n{"model": {"type": "BPE"}}')).toEqual({
      kind: "json",
      value: { model: { type: "BPE" } },
    });
  });

  test.each([
    ["broken.json", '{"model": ', /^broken\.json: not valid JSON \(.*\), so not a tokenizer\.json$/],
    ["broken.tiktoken", "  [1, ", /^broken\.tiktoken: not valid JSON \(/],
    ["number.json", "42", /^number\.json: JSON a number, not a tokenizer\.json/],
    ["x.tiktoken", '"text"', /^x\.tiktoken: JSON a string, not a tokenizer\.json/],
    ["null.json", "null", /^null\.json: JSON null, not a tokenizer\.json/],
    ["digits.txt", "4pyF\n", /^digits\.txt: neither a tokenizer\.json \(JSON\) nor a \.tiktoken rank file/],
    ["notes.txt", "hello\nworld\n", /^notes\.txt: neither a tokenizer\.json/],
    ["empty.txt", " \n", /^empty\.txt: empty, not a tokenizer\.json nor a \.tiktoken rank file$/],
  ])("%s: one line naming it and what is wrong", (name, text, message) => {
    let error: Error | undefined;
    try {
      tokenizerFileKind(name, text);
    } catch (caught) {
      error = caught as Error;
    }
    expect(error?.message).toMatch(message);
    expect(error?.message.split("\n")).toHaveLength(1);
  });
});
