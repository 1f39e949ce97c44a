import { describe, expect, it } from "vitest";
import { breakCause, classify, glueCause, rootCause, tokenAfter, type CauseOptions } from "../../src/explain/cause.js";

// A toy vocabulary: each id one piece of text; 90-99 special.
const VOCAB: Record<number, string> = {
  1: "sys",
  2: " prompt",
  3: "\n",
  4: "user: hi",
  5: "Hel",
  6: "lo",
  7: "Hello",
  8: " world",
  9: "\n\n",
  10: ".",
  11: "hmm",
  12: " ok",
  13: "other",
  14: " Summary",
  15: " of",
  16: " work",
  17: "Sys2",
  20: "tool:",
  21: " ls",
  50: "<think>",
  51: "</think>",
  60: "commentary",
  61: " to=functions.run",
  62: " json",
  63: "json",
  64: " ",
  65: '{"a":',
  66: "1}",
  67: " 1}",
  70: "<|",
  71: "end|>",
  90: "<|end|>",
  91: "<|eot|>",
  92: "<|channel|>",
  93: "<|message|>",
  94: "<|constrain|>",
  95: "<|call|>",
};
const text: CauseOptions = {
  decode: (ids) => ids.map((id) => VOCAB[id] ?? `?${id}`).join(""),
  isSpecial: (id) => id >= 90,
};

describe("breakCause", () => {
  it("reasoning_dropped with id markers and no decoder (the worked example)", () => {
    const full = [1, 2, 3, 4, 50, 11, 12, 51, 20, 21, 99];
    const prompt = [1, 2, 3, 4, 20, 21, 99, 30, 31];
    expect(breakCause(full, prompt, 4, { reasoning: [{ open: [50], close: [51] }] }).cause).toBe("reasoning_dropped");
    // Without markers and a decoder nothing is known.
    expect(breakCause(full, prompt, 4).cause).toBe("unknown");
    // The prompt does not go on with what follows the block: not dropped reasoning.
    expect(breakCause(full, [1, 2, 3, 4, 13], 4, { reasoning: [{ open: [50], close: [51] }] }).cause).toBe("unknown");
  });

  it("reasoning_dropped from text markers, whitespace after the block skipped", () => {
    const full = [1, 2, 3, 50, 11, 51, 9, 7, 90];
    const prompt = [1, 2, 3, 7, 90, 3, 4];
    expect(breakCause(full, prompt, 3, text).cause).toBe("reasoning_dropped");
  });

  it("retokenized: the same text split otherwise", () => {
    expect(breakCause([1, 2, 3, 5, 6, 8, 90], [1, 2, 3, 7, 8, 90, 4], 3, text).cause).toBe("retokenized");
  });

  it("whitespace: only whitespace differs", () => {
    expect(breakCause([1, 2, 7, 3, 90], [1, 2, 7, 90, 3, 4], 3, text).cause).toBe("whitespace");
  });

  it("special_token: a stop token replaced, lost or added", () => {
    expect(breakCause([1, 2, 7, 91], [1, 2, 7, 90, 3, 4], 3, text).cause).toBe("special_token");
    expect(breakCause([1, 2, 7, 90, 8], [1, 2, 7, 8, 3], 3, text).cause).toBe("special_token");
    expect(breakCause([1, 2, 7, 8, 90], [1, 2, 7, 90, 8, 90], 3, text).cause).toBe("special_token");
    // The predicate alone (no decoder) tells a special token.
    expect(breakCause([1, 2, 7, 91], [1, 2, 7, 90, 3, 4], 3, { isSpecial: text.isSpecial }).cause).toBe(
      "special_token",
    );
  });

  it("special_as_text: a special token written out as text tokens (decoded with it, encoded split)", () => {
    expect(breakCause([1, 2, 7, 90], [1, 2, 7, 70, 71, 90, 3], 3, text)).toEqual({ cause: "special_as_text" });
    // Without the special-token predicate it is the same text split otherwise.
    expect(breakCause([1, 2, 7, 90], [1, 2, 7, 70, 71, 90, 3], 3, { decode: text.decode }).cause).toBe("retokenized");
  });

  it("header_rewritten: a message header's fields in another order, control tokens moved or dropped", () => {
    // gpt-oss samples `<|channel|>commentary to=functions.run <|constrain|>json<|message|>`; its
    // template writes ` to=functions.run<|channel|>commentary json<|message|>`.
    const sampled = [92, 60, 61, 64, 94, 63, 93];
    const rendered = [61, 92, 60, 62, 93];
    expect(breakCause([1, 2, ...sampled, 65, 66, 95], [1, 2, ...rendered, 65, 66, 95, 3], 2, text)).toEqual({
      cause: "header_rewritten",
    });
    // The same words reordered without control tokens among them are not a header.
    expect(breakCause([1, 2, 60, 61, 93, 95], [1, 2, 61, 60, 93, 95, 3], 2, text).cause).toBe("rewritten");
    // Other words are not a header written otherwise.
    expect(breakCause([1, 2, ...sampled, 95], [1, 2, 61, 92, 13, 62, 93, 95], 2, text).cause).toBe("rewritten");
  });

  it("a compound break: the first cause, then what else changed in the generation, in order", () => {
    // The reasoning dropped, then the stop token replaced.
    expect(breakCause([1, 2, 3, 50, 11, 51, 9, 7, 91], [1, 2, 3, 7, 90, 3, 4], 3, text)).toEqual({
      cause: "reasoning_dropped",
      also: ["special_token"],
    });
    // gpt-oss's tool call: the header rewritten, then the arguments serialized with a space.
    const full = [1, 2, 92, 60, 61, 64, 94, 63, 93, 65, 66, 95];
    const prompt = [1, 2, 61, 92, 60, 62, 93, 65, 67, 95, 3];
    expect(breakCause(full, prompt, 2, text)).toEqual({ cause: "header_rewritten", also: ["whitespace"] });
    // A template that also writes <|end|> where the model sampled <|call|>: a third cause.
    const ended = [1, 2, 61, 92, 60, 62, 93, 65, 67, 90, 3];
    expect(breakCause(full, ended, 2, text)).toEqual({
      cause: "header_rewritten",
      also: ["whitespace", "special_token"],
    });
    // A trailing newline stripped, then the stop token replaced.
    expect(breakCause([1, 2, 7, 3, 91], [1, 2, 7, 90, 4], 3, text)).toEqual({
      cause: "whitespace",
      also: ["special_token"],
    });
    // Nothing is listed after a rewritten stretch: where it ends is not known.
    expect(breakCause([1, 2, 7, 8, 91], [1, 2, 7, 13, 90], 3, text)).toEqual({ cause: "rewritten" });
  });

  it("rewritten, not whitespace: a whitespace token gone and other text after it", () => {
    expect(breakCause([1, 2, 3, 8, 90], [1, 2, 13, 90, 4], 2, text)).toEqual({ cause: "rewritten" });
  });

  it("rewritten: any other change", () => {
    expect(breakCause([1, 2, 7, 8, 90], [1, 2, 7, 13, 90], 3, text).cause).toBe("rewritten");
  });
});

describe("classify", () => {
  it("generation_cut: a root whose prompt stops inside the near call's generation", () => {
    // The prompt is the near call's prompt and the start of its generation: a root cause, not a
    // break's (docs/breaks.md: roots get rewritten_prompt, compaction, fresh or generation_cut).
    const near = { full: [1, 2, 3, 7, 8, 90], promptLength: 3 };
    expect(classify(near, [1, 2, 3, 7], 4, text)).toEqual({ cause: "generation_cut" });
    expect(classify(near, [1, 2, 3], 3)).toEqual({ cause: "generation_cut" });
  });
});

describe("glueCause: what a call adds after its parent's stop token", () => {
  // The template writes "\n" (3) after <|end|> (90) in the tree's first prompt.
  const follows = (stop: number) => tokenAfter([1, 2, 90, 3, 4, 90, 3], stop);
  it("stop_duplicated: the stop token again", () => {
    expect(glueCause(90, 90, follows, text.isSpecial)).toBe("stop_duplicated");
  });
  it("glue_differs: another token than the template writes after that stop token", () => {
    expect(glueCause(90, 4, follows, text.isSpecial)).toBe("glue_differs");
    expect(glueCause(90, 3, follows, text.isSpecial)).toBeNull();
  });
  it("nothing without a special-token predicate, after a token that is not special, or one the template does not write", () => {
    expect(glueCause(90, 4, follows, undefined)).toBeNull();
    expect(glueCause(7, 4, follows, text.isSpecial)).toBeNull();
    expect(glueCause(91, 4, follows, text.isSpecial)).toBeNull();
    expect(glueCause(90, undefined, follows, text.isSpecial)).toBeNull();
    // A stop token followed by several tokens in the rendered prompt: nothing is known.
    expect(tokenAfter([90, 3, 90, 4], 90)).toBeNull();
  });
});

describe("rootCause", () => {
  // system prompt, then turns, then a generation " Summary of work<|end|>"
  const history = [4, 20, 21, 3, 8, 3, 4, 12, 3, 20, 8, 3, 13, 3, 4, 21, 12, 8, 3, 4, 20, 20, 8, 3, 13, 3];
  const near = { full: [1, 2, 3, ...history, 14, 15, 16, 90], promptLength: 3 + history.length };
  it("rewritten_prompt: the rest of the near call's prompt comes back", () => {
    expect(rootCause(near, [17, 3, ...history, 14, 15, 16, 90, 3], 0, text).cause).toBe("rewritten_prompt");
  });
  it("rewritten_prompt: parts in the glue and goes on with the generation", () => {
    const prompt = [1, 2, 3, ...history.slice(0, -1), 9, 14, 15, 16, 90, 3];
    expect(rootCause(near, prompt, near.promptLength - 1, text).cause).toBe("rewritten_prompt");
  });
  it("compaction: the near call's generation is in the new context", () => {
    expect(rootCause(near, [1, 2, 3, 14, 15, 16, 3], 3, text).cause).toBe("compaction");
    expect(rootCause(near, [1, 2, 3, 14, 15, 16, 3], 3).cause).toBe("compaction");
  });
  it("fresh: nothing of it comes back", () => {
    expect(rootCause(near, [1, 2, 3, 13, 3], 3, text).cause).toBe("fresh");
    expect(classify(near, [13], 0).cause).toBe("fresh");
  });
});

describe("with a real tokenizer's decoder", () => {
  it("gpt-oss: the analysis channel dropped from the history is reasoning_dropped by default", async () => {
    const { encode } = await import("gpt-tokenizer/encoding/o200k_harmony");
    const { loadTokenizer } = await import("../../src/cli/tokenizer.js");
    const decoder = await loadTokenizer("o200k_harmony");
    // Harmony's control tokens by their text, from the decoder; the text between them encoded.
    const specials = new Map<string, number>();
    for (let id = 199990; id < 200020; id++) {
      const piece = decoder.piece(id);
      if (piece.special) specials.set(piece.text, id);
    }
    const ids = (text: string) =>
      text
        .split(/(<\|[a-z]+\|>)/)
        .filter(Boolean)
        .flatMap((part) => (specials.has(part) ? [specials.get(part)!] : encode(part)));
    const prompt = ids("<|start|>user<|message|>List the files.<|end|><|start|>assistant");
    const generation = ids(
      "<|channel|>analysis<|message|>The user wants a listing.<|end|><|start|>assistant<|channel|>final<|message|>Here they are.<|return|>",
    );
    const next = ids(
      "<|start|>user<|message|>List the files.<|end|><|start|>assistant<|channel|>final<|message|>Here they are.<|end|>" +
        "<|start|>user<|message|>Thanks.<|end|><|start|>assistant",
    );
    expect(specials.has("<|channel|>") && specials.has("<|start|>")).toBe(true);
    const full = [...prompt, ...generation];
    let at = 0;
    while (full[at] === next[at]) at++;
    expect(at).toBe(prompt.length + 1); // both go on with <|channel|>
    const options = {
      decode: (t: readonly number[]) => decoder.decode(t),
      isSpecial: (id: number) => decoder.piece(id).special,
    };
    expect(classify({ full, promptLength: prompt.length }, next, at, options).cause).toBe("reasoning_dropped");
  });
});
