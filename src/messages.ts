// Messages: one-line words for errors, values, calls and rejections, shared by every module that
// names what and where.
import { formatFloat32 } from "./codecs/float32.js";

/** "1 row", "2 rows" ("1 leaf", "2 leaves" with `plural`). */
export function countOf(n: number, noun: string, plural = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : plural}`;
}

/** The first line of an error's message (or of what was thrown): messages here are one line. */
export function errorLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split("\n")[0];
}

/** How a call is named in messages: its id when it has a usable one, and its position. */
export function callName(id: unknown, index: number): string {
  return typeof id === "string" && id !== "" ? `call ${JSON.stringify(id)} (calls[${index}])` : `calls[${index}]`;
}

/** callName for a raw call value (which may not even be an object). */
export function callLabel(call: unknown, index: number): string {
  return callName(typeof call === "object" && call !== null ? (call as { id?: unknown }).id : undefined, index);
}

/**
 * JSON.stringify replacer: a typed array nested in a value (the scanner reads token arrays into
 * them at any depth) shows as the list it was in the input, not as {"0":...}; float32 values in
 * their shortest form. Top-level ones are described by describeValue itself.
 */
function listTypedArrays(_key: string, value: unknown): unknown {
  if (value instanceof Float32Array) return Array.from(value, (v) => Number(formatFloat32(v)));
  return ArrayBuffer.isView(value) && !(value instanceof DataView)
    ? Array.from(value as unknown as ArrayLike<number>)
    : value;
}

/**
 * Values nested deeper are not written out in messages. JSON.stringify recurses, and how deep it
 * gets before the stack runs out depends on the thread (a worker's stack is not the main
 * thread's): the words must not (`rows --jobs 2` writes what `--jobs 1` writes).
 */
const MAX_WRITTEN_DEPTH = 1000;

/**
 * Whether objects and arrays nest more than `limit` deep in `value`: walked without recursion,
 * touching only objects (a 20 M-number array is one loop). A part shared by several paths is
 * walked again only when reached deeper than before; a cycle counts as too deep (JSON.stringify
 * refuses it anyway).
 */
function nestedDeeperThan(value: unknown, limit: number): boolean {
  const deepest = new Map<object, number>();
  const pending: object[] = [];
  const depths: number[] = [];
  const visit = (child: unknown, depth: number) => {
    if (
      typeof child === "object" &&
      child !== null &&
      !ArrayBuffer.isView(child) &&
      (deepest.get(child) ?? 0) < depth
    ) {
      deepest.set(child, depth);
      pending.push(child);
      depths.push(depth);
    }
  };
  visit(value, 1);
  while (pending.length > 0) {
    const item = pending.pop()!;
    const depth = depths.pop()!;
    if (depth > limit) return true;
    if (Array.isArray(item)) {
      for (let i = 0; i < item.length; i++) visit(item[i], depth + 1);
    } else {
      for (const key in item) if (Object.hasOwn(item, key)) visit((item as Record<string, unknown>)[key], depth + 1);
    }
  }
  return false;
}

/** A value, shortened for a one-line message. Never throws (BigInt, cycles, NaN included). */
export function describeValue(value: unknown): string {
  let text: string;
  if (typeof value === "number" || typeof value === "bigint" || value === undefined) {
    text = typeof value === "bigint" ? `${value}n` : String(value);
  } else if (typeof value === "function" || typeof value === "symbol") {
    text = typeof value;
  } else if (ArrayBuffer.isView(value)) {
    text = `${value.constructor.name}(${(value as unknown as ArrayLike<unknown>).length ?? value.byteLength})`;
  } else {
    try {
      if (nestedDeeperThan(value, MAX_WRITTEN_DEPTH)) throw new RangeError("too deep to write out");
      text = JSON.stringify(value, listTypedArrays) ?? String(value);
    } catch {
      text = Array.isArray(value) ? "an array" : "an object";
    }
  }
  return shortened(text);
}

/** A value's text cut to 40 characters for a message (`...` marks the cut). */
export function shortened(text: string): string {
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}

/**
 * A rejection as one line of notes: `where: rejected (reason): detail`, with an importer's own
 * code after the reason when it has one that differs.
 */
export function rejectionLine(where: string, reason: string, detail: string | undefined, code?: string): string {
  const own = code === undefined || code === reason ? "" : `, ${code}`;
  return oneLine(`${where}: rejected (${reason}${own}): ${detail}`);
}

/**
 * `text` with control characters (C0, DEL and C1, such as the CSI a terminal obeys), the two
 * Unicode line separators and the bidirectional overrides escaped as in JSON (`\u009b`), for
 * messages that must stay one line, and say what they hold, whatever a file name or an id from
 * the data holds.
 */
export function oneLine(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, (c) => {
    const named: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };
    return named[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
  });
}

// The planner names the call at fault first in its detail: `call "ID" (calls[N])`, or `calls[N]`
// when the call has no usable id (callName above). Anchored: an importer's detail may mention
// other lists' `calls[N]` (e.g. `ng_model_call_capture.calls[0]`), which are not the rollout's.
const CALL_AT_FAULT = /^(?:call ("(?:[^"\\]|\\.)*") \(calls\[(\d+)\]\)|calls\[(\d+)\])/;

/** The call a rejection's detail starts with: its position, and its id when it had one. */
export function callAtFault(detail: string): { index: number; id: string | null } | null {
  const match = CALL_AT_FAULT.exec(detail);
  if (match === null) return null;
  if (match[1] === undefined) return { index: Number(match[3]), id: null };
  let id: string | null = null;
  try {
    id = JSON.parse(match[1]) as string;
  } catch {
    id = null;
  }
  return { index: Number(match[2]), id };
}
