// Append-only semantic history of one rollout: model outputs and environment observations.
// Entries are frozen when appended; policies read them and never change them.
import { CompactionError } from "./errors.js";

export type UserPart = { type: "text"; text: string } | { type: "image"; mediaId: string };

/** Where an entry came from: the initial context, the model, or the environment. */
export type Origin = "initial" | "model" | "environment";

interface EntryBase {
  /** Position in the history (0-based). */
  seq: number;
  /** Model call that produced the entry, or after which it was observed (-1: initial context). */
  turn: number;
  origin: Origin;
}

/** A message the model reads: the task, an observation, or a system or developer message of the initial context. */
export interface UserEntry extends EntryBase {
  kind: "user";
  /** Absent: "user". System and developer messages come only from the initial context. */
  role?: "system" | "developer";
  parts: readonly UserPart[];
}
/** Reasoning; `id` may be absent on an earlier turn given as initial context. */
export interface ReasoningEntry extends EntryBase {
  kind: "reasoning";
  id?: string;
  text: string;
}
/** An assistant message: the model's, or an earlier turn given as initial context. */
export interface MessageEntry extends EntryBase {
  kind: "message";
  id?: string;
  text: string;
}
export interface FunctionCallEntry extends EntryBase {
  kind: "function_call";
  id?: string;
  callId: string;
  name: string;
  arguments: string;
}
export interface FunctionOutputEntry extends EntryBase {
  kind: "function_output";
  callId: string;
  output: string;
}

export type HistoryEntry = UserEntry | ReasoningEntry | MessageEntry | FunctionCallEntry | FunctionOutputEntry;

/** An entry as handed to `append` (the history assigns `seq`). */
export type NewEntry =
  | Omit<UserEntry, "seq">
  | Omit<ReasoningEntry, "seq">
  | Omit<MessageEntry, "seq">
  | Omit<FunctionCallEntry, "seq">
  | Omit<FunctionOutputEntry, "seq">;

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value as object)) deepFreeze(v);
  }
  return value;
}

/** True when the entry is a user message carrying at least one image (one "image group"). */
export function isImageGroup(entry: HistoryEntry): entry is UserEntry {
  return entry.kind === "user" && entry.parts.some((p) => p.type === "image");
}

export function imagesOf(entry: HistoryEntry): string[] {
  return entry.kind === "user" ? entry.parts.flatMap((p) => (p.type === "image" ? [p.mediaId] : [])) : [];
}

export class SemanticHistory {
  private readonly list: HistoryEntry[] = [];

  /** Appends a copy of the entry, frozen; returns it. Initial-context entries must come first. */
  append(entry: NewEntry): HistoryEntry {
    if (entry.origin === "initial" && this.list.some((e) => e.origin !== "initial")) {
      throw new CompactionError(`history: initial-context entry appended after entry ${this.list.length - 1}`);
    }
    const copy = deepFreeze({ ...structuredClone(entry), seq: this.list.length } as HistoryEntry);
    this.list.push(copy);
    return copy;
  }

  get length(): number {
    return this.list.length;
  }

  at(seq: number): HistoryEntry {
    const entry = this.list[seq];
    if (!entry) throw new CompactionError(`history: no entry ${seq} (history has ${this.list.length})`);
    return entry;
  }

  /** A read-only snapshot of the entries. */
  entries(): readonly HistoryEntry[] {
    return this.list.slice();
  }
}
