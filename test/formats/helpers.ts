// Helpers for the format tests (the fixture paths are in test/support/fixtures.ts).
import { readFileSync } from "node:fs";

export function readJson(path: string): any {
  return JSON.parse(readFileSync(path, "utf8"));
}

export function readJsonl(path: string): any[] {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line));
}

/** A deep copy, so tests can break one field without touching the shared value. */
export function clone<T>(value: T): T {
  return JSON.parse(JSON.stringify(value));
}
