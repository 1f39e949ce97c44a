// A dropped or opened file's text as rollouts, by the CLI's rules (src/formats/read.ts): a name
// ending in .json is one JSON value (an array = one rollout per element), anything else is JSONL
// (one value a line, blank lines skipped). Each value goes through the same format adapters.
import { toCanonical, type ConvertResult } from "../src/formats/index.js";

export interface LoadedItem {
  /** `file:line`, `file`, or `file[i]`, as the CLI names inputs. */
  where: string;
  line?: number;
  result: ConvertResult;
}

function notJson(error: unknown): ConvertResult {
  const why = error instanceof Error ? error.message.split("\n")[0] : String(error);
  return { ok: false, format: null, reason: "malformed_json", code: "malformed_json", detail: `not JSON (${why})`, rolloutId: null };
}

export function loadText(name: string, text: string): LoadedItem[] {
  if (name.toLowerCase().endsWith(".json")) {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      return [{ where: name, result: notJson(error) }];
    }
    if (Array.isArray(value)) return value.map((v, i) => ({ where: `${name}[${i}]`, result: toCanonical(v) }));
    return [{ where: name, result: toCanonical(value) }];
  }
  const items: LoadedItem[] = [];
  const lines = text.split(/\r?\n/);
  lines.forEach((line, i) => {
    if (line.trim().length === 0) return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (error) {
      items.push({ where: `${name}:${i + 1}`, line: i + 1, result: notJson(error) });
      return;
    }
    items.push({ where: `${name}:${i + 1}`, line: i + 1, result: toCanonical(value) });
  });
  return items;
}
