// What the agent loop needs from an environment: tools, a first observation, tool execution.
import type { FunctionTool } from "./responses.js";
import type { TaskInput } from "./task-input.js";

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
