// Structural checks of SPEC's canonical rollout (SPEC "Input"). Token and logprob values are
// checked while they are copied into a core (src/plan/plan-rollout.ts), not here.
import { callLabel, describeValue } from "../messages.js";
import { Rejection } from "./rejection.js";
import type { AgentInfo, Logprobs, PlanOptions, TokenIds } from "../types.js";

export interface RolloutHeader {
  rolloutId: string;
  reward: number;
  /** SPEC v4's group_id: null when absent or null. */
  groupId: string | null;
  /** Null when the rollout lists no agents (then any agent name is accepted). */
  agents: AgentInfo[] | null;
  /** Position of each listed agent by id; null without `agents`. */
  agentIndex: Map<string, number> | null;
  calls: unknown[];
}

export interface CallShape {
  id: string;
  agent: string;
  prompt: TokenIds;
  generation: TokenIds;
  logprobs: Logprobs;
  kept: boolean;
  /** `media` as given: checked by readMedia once the values are (SPEC's order of rejections). */
  media: unknown;
  /** `routed_experts` as given: checked by readRoutedExperts, also after the values. */
  routedExperts: unknown;
  /** `weight_version` as given: checked by readWeightVersion, also after the values. */
  weightVersion: unknown;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function isTokenArray(value: unknown): value is TokenIds {
  return Array.isArray(value) || value instanceof Int32Array;
}

/**
 * A typed array whose buffer was detached (transferred to a worker, or a WebAssembly memory that
 * grew under it): it reads as empty, and copying from it throws. (`ArrayBuffer.prototype.detached`
 * is newer than Node 20; a view over a detached buffer cannot be made.)
 */
export function isDetached(value: unknown): boolean {
  if (!ArrayBuffer.isView(value) || value.byteLength !== 0) return false;
  try {
    new Uint8Array(value.buffer);
    return false;
  } catch {
    return true;
  }
}

function isLogprobArray(value: unknown): value is Logprobs {
  return Array.isArray(value) || value instanceof Float32Array || value instanceof Float64Array;
}

/** The rollout id if the value has a usable one (for reports of rejected rollouts). */
export function rolloutIdOf(value: unknown): string | null {
  const id = isRecord(value) ? value.rollout_id : undefined;
  return typeof id === "string" && id !== "" ? id : null;
}

/** `NAME must be RULE, got VALUE`; `NAME is missing (it must be RULE)` when there is no value. */
function mustBe(name: string, rule: string, value: unknown): string {
  return value === undefined
    ? `${name} is missing (it must be ${rule})`
    : `${name} must be ${rule}, got ${describeValue(value)}`;
}

export function checkHeader(value: unknown): RolloutHeader | Rejection {
  const invalid = (detail: string) => new Rejection("invalid_rollout", detail);
  if (!isRecord(value)) return invalid(`a rollout must be a JSON object, got ${describeValue(value)}`);
  const { rollout_id: rolloutId, reward, agents, calls, group_id: group } = value;
  if (typeof rolloutId !== "string" || rolloutId === "") {
    return invalid(mustBe("rollout_id", "a non-empty string", rolloutId));
  }
  if (typeof reward !== "number" || !Number.isFinite(reward)) {
    return invalid(mustBe("reward", "a finite number", reward));
  }
  if (!Array.isArray(calls)) return invalid(mustBe("calls", "an array", calls));
  if (group !== undefined && group !== null && typeof group !== "string")
    return invalid(`group_id must be a string or null, got ${describeValue(group)}`);
  const groupId = (group as string | null | undefined) ?? null;
  if (agents === undefined) return { rolloutId, reward, groupId, agents: null, agentIndex: null, calls };
  if (!Array.isArray(agents)) return invalid(`agents must be an array, got ${describeValue(agents)}`);
  const checked: AgentInfo[] = [];
  const ids = new Map<string, number>();
  for (let i = 0; i < agents.length; i++) {
    const agent = agents[i];
    if (!isRecord(agent))
      return invalid(`agents[${i}] must be an object with a string id, got ${describeValue(agent)}`);
    if (typeof agent.id !== "string") return invalid(mustBe(`agents[${i}].id`, "a string", agent.id));
    if (ids.has(agent.id)) return invalid(`agents[${i}]: agent id ${JSON.stringify(agent.id)} is listed twice`);
    if (agent.parent !== null && agent.parent !== undefined && typeof agent.parent !== "string") {
      return invalid(`agents[${i}] (${JSON.stringify(agent.id)}): parent must be an agent id or null`);
    }
    if (agent.mode !== undefined && typeof agent.mode !== "string") {
      return invalid(`agents[${i}] (${JSON.stringify(agent.id)}): mode must be a string`);
    }
    ids.set(agent.id, i);
    const info: AgentInfo = { id: agent.id, parent: (agent.parent as string | null | undefined) ?? null };
    if (agent.mode !== undefined) info.mode = agent.mode as string;
    checked.push(info);
  }
  for (const agent of checked) {
    if (agent.parent !== null && !ids.has(agent.parent)) {
      return invalid(`agent ${JSON.stringify(agent.id)}: parent ${JSON.stringify(agent.parent)} is not a listed agent`);
    }
  }
  return { rolloutId, reward, groupId, agents: checked, agentIndex: ids, calls };
}

/**
 * What is wrong with a call's id, agent and kept flag, or null: one rule for plan()'s canonical
 * calls and the builder's commit().
 */
export function callIdentityProblem(id: unknown, agent: unknown, kept: unknown): string | null {
  if (typeof id !== "string" || id === "") return mustBe("id", "a non-empty string", id);
  if (agent !== undefined && typeof agent !== "string") return `agent must be a string, got ${describeValue(agent)}`;
  if (kept !== undefined && typeof kept !== "boolean") return `kept must be a boolean, got ${describeValue(kept)}`;
  return null;
}

/** PlanOptions as given (null: none); a `line` that is not a positive integer is a programming error. */
export function checkPlanOptions(options: PlanOptions | null | undefined, caller: string): PlanOptions {
  if (options === null || options === undefined) return {};
  if (options.line !== undefined && !(Number.isInteger(options.line) && options.line >= 1)) {
    throw new TypeError(`${caller}: options.line must be a positive integer, got ${JSON.stringify(options.line)}`);
  }
  if (options.trees !== undefined && typeof options.trees !== "boolean") {
    throw new TypeError(`${caller}: options.trees must be a boolean, got ${describeValue(options.trees)}`);
  }
  const capacity = options.capacity;
  if (capacity !== undefined && !(Number.isInteger(capacity) && capacity >= 1 && capacity <= 2 ** 31 - 1)) {
    throw new TypeError(
      `${caller}: options.capacity must be a positive integer (tokens a bin holds), got ${describeValue(capacity)}`,
    );
  }
  return options;
}

export function checkCallShape(call: unknown, index: number): CallShape | Rejection {
  const invalid = (detail: string) => new Rejection("invalid_rollout", `${callLabel(call, index)}: ${detail}`);
  if (!isRecord(call)) return invalid(`a call must be a JSON object, got ${describeValue(call)}`);
  const { id, agent, prompt_token_ids: prompt, generation_token_ids: generation } = call;
  const { generation_log_probs: logprobs, kept, media, routed_experts: routedExperts } = call;
  const weightVersion = call.weight_version;
  const problem = callIdentityProblem(id, agent, kept);
  if (problem !== null) return invalid(problem);
  for (const [name, array] of [
    ["prompt_token_ids", prompt],
    ["generation_token_ids", generation],
    ["generation_log_probs", logprobs],
  ] as const) {
    if (isDetached(array))
      return invalid(
        `${name} is a typed array whose buffer was detached (transferred, or a WebAssembly memory grew under it)`,
      );
  }
  if (!isTokenArray(prompt)) return invalid(mustBe("prompt_token_ids", "an array", prompt));
  if (!isTokenArray(generation)) {
    return invalid(mustBe("generation_token_ids", "an array", generation));
  }
  if (!isLogprobArray(logprobs)) {
    return invalid(mustBe("generation_log_probs", "an array", logprobs));
  }
  return {
    id: id as string,
    agent: (agent as string | undefined) ?? "",
    prompt,
    generation,
    logprobs,
    kept: kept !== false,
    media,
    routedExperts,
    weightVersion,
  };
}
