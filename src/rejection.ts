// A rejected rollout: SPEC's reason code and a one-line detail naming what and where.
import type { RejectionCode } from "./types.js";

export class Rejection {
  constructor(
    readonly code: RejectionCode,
    readonly detail: string,
  ) {}
}

/** How a call is named in messages: its id when it has a usable one, and its position. */
export function callName(id: unknown, index: number): string {
  return typeof id === "string" && id !== "" ? `call ${JSON.stringify(id)} (calls[${index}])` : `calls[${index}]`;
}

/** callName for a raw call value (which may not even be an object). */
export function callLabel(call: unknown, index: number): string {
  return callName(typeof call === "object" && call !== null ? (call as { id?: unknown }).id : undefined, index);
}

/** A value, shortened for a one-line message. */
export function describeValue(value: unknown): string {
  if (value === undefined) return "undefined";
  const text = typeof value === "string" ? JSON.stringify(value) : JSON.stringify(value) ?? String(value);
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}
