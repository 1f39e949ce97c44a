// What the agent loop needs from an environment: tools, a first observation, tool execution.
import type { FunctionTool } from "./responses.js";

export interface ObservationImage {
  bytes: Uint8Array;
  mime: "image/png" | "image/jpeg" | "image/webp";
}

export interface Observation {
  text: string;
  images?: ObservationImage[];
  /** The episode is over (the loop stops after recording this observation). */
  done?: boolean;
}

/** A text or image part of a message of the initial context. */
export type TaskPart = { type: "text"; text: string } | { type: "image"; image: ObservationImage };

/** One item of the initial context, before its images are stored. */
export type TaskItem =
  | { kind: "user"; role?: "system" | "developer"; parts: TaskPart[] }
  | { kind: "message"; id?: string; text: string }
  | { kind: "reasoning"; id?: string; text: string }
  | { kind: "function_call"; id?: string; callId: string; name: string; arguments: string }
  | { kind: "function_output"; callId: string; output: string };
// A tool output given as parts becomes two items: its text as the function output, its images in a
// user message after it (how the runtime shows an environment's tool images).

/**
 * What an environment's `startContext()` returns instead of one observation: the whole initial
 * context (src/compaction/task-input.ts reads one from a run body).
 */
export interface TaskInput {
  context: TaskItem[];
}

export interface Environment {
  readonly instructions?: string;
  readonly tools: FunctionTool[];
  /** The task: the initial context's user message (not called when `startContext` is given). */
  start(): Promise<Observation> | Observation;
  /** The task as a whole initial context: items of any role, earlier turns (see TaskInput). */
  startContext?(): Promise<TaskInput> | TaskInput;
  /** Runs one function call; `args` is the parsed JSON arguments (or the raw text if not JSON). */
  call(name: string, args: unknown): Promise<Observation> | Observation;
  /** The rollout's reward once the loop ends. */
  reward(): number;
}
