// startLines (src/formats/text.ts): the line each value of a `.json` input starts on, which its
// reports give as `line` (issue 39).
import { describe, expect, it } from "vitest";
import { parseJsonInput, startLines } from "../../src/formats/text.js";

describe("startLines", () => {
  it.each([
    ['{"a":1}', false, [1]],
    ['\n\n  {"a":1}', false, [3]],
    ["[]", true, [1]],
    ["[\n]", true, [1]],
    ['[{"a":1},\n{"b":2}, 3,\n\n[4, 5]]', true, [1, 1, 2, 2, 4]],
    ['[\n  "x,\\"[\\n",\n  {"y": ["a,b", {"z": "]"}]},\n  null\n]', true, [1, 2, 3, 4]],
    ['\uFEFF[\n{"é\\u00e9": "\\\\"},\n7]', true, [1, 2, 3]],
  ])("%j (elements: %s) starts its values on lines %j", (text, elements, expected) => {
    expect(startLines(text, elements)).toEqual(expected);
    expect(startLines(new TextEncoder().encode(text), elements)).toEqual(expected);
  });

  it("numbers each element of a .json array by the line it starts on", () => {
    const items = parseJsonInput("x.json", new TextEncoder().encode('[\n  {"a": 1},\n\n  {"b": 2}\n]'));
    expect(items.map((item) => [item.where, item.line])).toEqual([
      ["x.json[0]", 2],
      ["x.json[1]", 4],
    ]);
  });
});
