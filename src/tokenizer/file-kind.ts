// What a tokenizer file holds, told from its text before any decoder loads: a tokenizer.json (a
// JSON object with a "model") or a .tiktoken rank file (lines of "<base64 token> <rank>"). Anything
// else is one line naming the file and what is wrong with it. Browser-safe: explain and the page.

export type TokenizerFileKind = { kind: "json"; value: Record<string, unknown> } | { kind: "tiktoken" };

const RANK_LINE = /^[A-Za-z0-9+/]+={0,2} \d+\r?$/;

/** Throws an Error whose message is one line starting with `name`. */
export function tokenizerFileKind(name: string, text: string): TokenizerFileKind {
  const start = text.trimStart()[0];
  if (start === undefined) return fail(name, "empty, not a tokenizer.json nor a .tiktoken rank file");
  // `{` or `[` can only be JSON, broken or not. Any other start is JSON only if it parses (a
  // string, number, true, false, null): a rank line may start with a digit too ("4pyF 0"), so
  // text that does not parse is tried as a rank file below.
  let json: { value: unknown } | null = null;
  if (start === "{" || start === "[") {
    try {
      json = { value: JSON.parse(text) };
    } catch (error) {
      const why = (error as Error).message.replace(/\s+/g, " ").slice(0, 120);
      return fail(name, `not valid JSON (${why}), so not a tokenizer.json`);
    }
  } else {
    try {
      json = { value: JSON.parse(text) };
    } catch {
      // Not JSON: maybe a rank file.
    }
  }
  if (json !== null) {
    const { value } = json;
    if (value === null || typeof value !== "object" || Array.isArray(value))
      return fail(name, `JSON ${describe(value)}, not a tokenizer.json (a JSON object with a "model")`);
    const { model } = value as { model?: unknown };
    if (typeof model !== "object" || model === null)
      return fail(name, 'a JSON object, but not a tokenizer.json (it has no "model" object)');
    return { kind: "json", value: value as Record<string, unknown> };
  }
  const newline = text.indexOf("\n");
  const firstLine = newline < 0 ? text : text.slice(0, newline);
  if (name.endsWith(".tiktoken") || RANK_LINE.test(firstLine)) return { kind: "tiktoken" };
  return notEither(name);
}

function notEither(name: string): never {
  return fail(name, 'neither a tokenizer.json (JSON) nor a .tiktoken rank file (lines of "<base64 token> <rank>")');
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return value.length === 0 ? "[] (an empty array)" : "an array";
  return `a ${typeof value}`;
}

function fail(name: string, what: string): never {
  throw new Error(`${name}: ${what}`);
}
