// `atif`: an Agent Trajectory Interchange Format trajectory (Harbor's RFC 0001, ATIF-v1.0 to v1.7;
// docs/formats-atif.md). Each agent step whose `metrics` carry `prompt_token_ids` and
// `completion_token_ids` (v1.3/v1.4) is one call of the agent whose trajectory holds it; the
// subagent trajectories its observation references (`subagent_trajectory_ref`, embedded in
// `subagent_trajectories` by `trajectory_id` since v1.7, or a file by `trajectory_path`) are agents
// whose parent is that trajectory's agent. Files come from context.trajectories: this module reads
// none itself, so the browser build can use it.
import type { AgentInfo, CanonicalCall, Diagnostic, Rollout } from "../types.js";
import type { FormatContext } from "./types.js";
import { FormatError, field, isArrayLike, isNonEmptyString, isObject, q, show, type JsonObject } from "./values.js";

/** Whether a value is shaped like an ATIF trajectory: an `ATIF-v…` schema_version, or steps[] with an agent object. */
export function isAtif(value: JsonObject): boolean {
  const version = field(value, "schema_version");
  if (typeof version === "string" && version.startsWith("ATIF-")) return true;
  return Array.isArray(field(value, "steps")) && isObject(field(value, "agent"));
}

/** One trajectory to read: its value, the agent its calls belong to, and how messages name it. */
interface Pending {
  value: JsonObject;
  agent: string;
  /** `""` for the input's own trajectory, else `subagent "<id>" (<where it was found>) `. */
  label: string;
  /** What its calls' ids start with: the agent, and `:cont-<n>` in its n-th continuation. */
  prefix: string;
  /** Continuations of this agent so far (its first trajectory: 0). */
  continuation: number;
  /** The `subagent_trajectories` of the trajectories it was found under, nearest first. */
  scopes: Embedded[];
}

type Embedded = Map<string, { value: JsonObject; where: string }>;

interface Walk {
  context: FormatContext;
  calls: CanonicalCall[];
  agents: AgentInfo[];
  queue: Pending[];
  /** Trajectories already taken (embedded objects, or files by name): each is read once. */
  seen: Set<unknown>;
  untokenized: Map<string, number>;
  copied: number;
}

export function fromAtif(
  value: JsonObject,
  context: FormatContext = {},
): { rollout: Rollout; diagnostics: Diagnostic[] } {
  const rolloutId = trajectoryId(value);
  if (rolloutId === null) {
    throw new FormatError(
      "missing_field",
      `no rollout id: trajectory_id is ${show(field(value, "trajectory_id"))} and session_id is ${show(field(value, "session_id"))}`,
    );
  }
  const walk: Walk = {
    context,
    calls: [],
    agents: [{ id: rolloutId, parent: null, mode: "leader" }],
    queue: [{ value, agent: rolloutId, label: "", prefix: rolloutId, continuation: 0, scopes: [] }],
    seen: new Set([value]),
    untokenized: new Map(),
    copied: 0,
  };
  for (let next = walk.queue.shift(); next !== undefined; next = walk.queue.shift()) readTrajectory(walk, next);
  const diagnostics: Diagnostic[] = [];
  const reward = rewardOf(context, diagnostics);
  if (walk.untokenized.size > 0 || walk.copied > 0) diagnostics.push(untokenizedNote(walk));
  return { rollout: { rollout_id: rolloutId, reward, agents: walk.agents, calls: walk.calls }, diagnostics };
}

/** A trajectory's own id: `trajectory_id` (v1.7), else `session_id`; null when it has neither. */
function trajectoryId(value: JsonObject): string | null {
  const id = field(value, "trajectory_id");
  if (isNonEmptyString(id)) return id;
  const session = field(value, "session_id");
  return isNonEmptyString(session) ? session : null;
}

function readTrajectory(walk: Walk, pending: Pending): void {
  const { value, agent, label, prefix } = pending;
  const steps = field(value, "steps");
  if (!Array.isArray(steps))
    throw new FormatError("missing_field", `${label}steps is ${show(steps)}, expected an array`);
  // A ref names an entry of its own trajectory's subagent_trajectories, or (read leniently) of a
  // trajectory above it.
  const scopes = [embeddedTrajectories(value, label), ...pending.scopes];
  steps.forEach((step, i) => {
    const where = `${label}steps[${i}]`;
    if (!isObject(step)) throw new FormatError("invalid_field", `${where} is ${show(step)}, expected a step object`);
    const stepWhere = `${where} (step_id ${show(field(step, "step_id"))})`;
    readStep(walk, step, agent, `${prefix}:${callName(field(step, "step_id"), i)}`, stepWhere);
    for (const ref of subagentRefs(step, stepWhere)) {
      const child = resolveRef(walk, ref.value, scopes, ref.where);
      const id = freshAgentId(walk.agents, child.id);
      walk.agents.push({ id, parent: agent, mode: "subagent" });
      walk.queue.push({
        value: child.value,
        agent: id,
        label: `subagent ${q(id)} (${child.found}) `,
        prefix: id,
        continuation: 0,
        scopes,
      });
    }
  });
  // A trajectory continued in another file (terminus-2's linear history): the same agent goes on there.
  const continued = field(value, "continued_trajectory_ref");
  if (continued !== undefined && continued !== null) {
    if (!isNonEmptyString(continued))
      throw new FormatError("invalid_field", `${label}continued_trajectory_ref is ${show(continued)}, expected a path`);
    const next = loadFile(walk, continued, `${label}continued_trajectory_ref`);
    // It numbers its steps anew (after the history it copies), so its calls' ids say which it is.
    const n = pending.continuation + 1;
    walk.queue.push({
      value: next,
      agent,
      label: `${label}continuation (${describe(walk, continued)}) `,
      prefix: `${agent}:cont-${n}`,
      continuation: n,
      scopes: pending.scopes,
    });
  }
}

/** A step's name in its call's id: its step_id, else its place (`#3`: the third step). */
function callName(stepId: unknown, index: number): string {
  return typeof stepId === "number" || isNonEmptyString(stepId) ? String(stepId) : `#${index + 1}`;
}

/**
 * Reads one step: a call when its metrics hold token ids, else counted as a step without them. A
 * step copied from another trajectory for context (`is_copied_context`, which v1.7 says must not
 * be trained on) is never a call, token ids or not: its call is the original's.
 */
function readStep(walk: Walk, step: JsonObject, agent: string, id: string, where: string): void {
  const metrics = field(step, "metrics");
  const completion = isObject(metrics) ? field(metrics, "completion_token_ids") : undefined;
  const prompt = isObject(metrics) ? field(metrics, "prompt_token_ids") : undefined;
  const hasTokens = (completion !== undefined && completion !== null) || (prompt !== undefined && prompt !== null);
  const source = field(step, "source");
  if (field(step, "is_copied_context") === true) {
    walk.copied++;
    return;
  }
  if (!hasTokens) {
    if (source === "agent") walk.untokenized.set(agent, (walk.untokenized.get(agent) ?? 0) + 1);
    return;
  }
  if (source !== "agent")
    throw new FormatError("invalid_field", `${where}: source is ${show(source)}, but only agent steps carry token ids`);
  const m = metrics as JsonObject;
  const tokens = (key: string) => {
    const array = field(m, key);
    if (!isArrayLike(array))
      throw new FormatError("missing_field", `${where}: metrics.${key} is ${show(array)}, expected an array`);
    return array;
  };
  walk.calls.push({
    id,
    agent,
    prompt_token_ids: tokens("prompt_token_ids") as CanonicalCall["prompt_token_ids"],
    generation_token_ids: tokens("completion_token_ids") as CanonicalCall["generation_token_ids"],
    generation_log_probs: tokens("logprobs") as CanonicalCall["generation_log_probs"],
  });
}

/** The `subagent_trajectory_ref` entries of a step's observation, each with where it is. */
function subagentRefs(step: JsonObject, where: string): { value: unknown; where: string }[] {
  const observation = field(step, "observation");
  if (observation === undefined || observation === null) return [];
  if (!isObject(observation))
    throw new FormatError("invalid_field", `${where}: observation is ${show(observation)}, expected an object`);
  const results = field(observation, "results");
  if (results === undefined || results === null) return [];
  if (!Array.isArray(results))
    throw new FormatError("invalid_field", `${where}: observation.results is ${show(results)}, expected an array`);
  const out: { value: unknown; where: string }[] = [];
  results.forEach((result, r) => {
    const refs = isObject(result) ? field(result, "subagent_trajectory_ref") : undefined;
    if (refs === undefined || refs === null) return;
    const refsWhere = `${where}: observation.results[${r}].subagent_trajectory_ref`;
    // The RFC says an array (a singleton for one subagent); a lone object is read as one ref.
    if (isObject(refs)) out.push({ value: refs, where: refsWhere });
    else if (Array.isArray(refs)) refs.forEach((ref, k) => out.push({ value: ref, where: `${refsWhere}[${k}]` }));
    else throw new FormatError("invalid_field", `${refsWhere} is ${show(refs)}, expected an array`);
  });
  return out;
}

/** A trajectory's `subagent_trajectories` (v1.7), by trajectory_id; each id once. */
function embeddedTrajectories(value: JsonObject, label: string): Embedded {
  const list = field(value, "subagent_trajectories");
  const out: Embedded = new Map();
  if (list === undefined || list === null) return out;
  if (!Array.isArray(list))
    throw new FormatError("invalid_field", `${label}subagent_trajectories is ${show(list)}, expected an array`);
  list.forEach((item, i) => {
    const where = `${label}subagent_trajectories[${i}]`;
    if (!isObject(item)) throw new FormatError("invalid_field", `${where} is ${show(item)}, expected a trajectory`);
    const id = field(item, "trajectory_id") ?? field(item, "session_id");
    if (!isNonEmptyString(id))
      throw new FormatError(
        "missing_field",
        `${where}.trajectory_id is ${show(field(item, "trajectory_id"))}, expected a string`,
      );
    if (out.has(id))
      throw new FormatError("duplicate_trajectory", `${where}: trajectory_id ${q(id)} is also ${out.get(id)!.where}`);
    out.set(id, { value: item, where });
  });
  return out;
}

/**
 * The trajectory a ref names: embedded by `trajectory_id` (or, before v1.7, `session_id`), else
 * the file `trajectory_path` names. Each trajectory is taken once (a cycle or a second ref to it
 * is an error).
 */
function resolveRef(
  walk: Walk,
  ref: unknown,
  scopes: readonly Embedded[],
  where: string,
): { value: JsonObject; id: string; found: string } {
  if (!isObject(ref)) throw new FormatError("invalid_field", `${where} is ${show(ref)}, expected an object`);
  const trajectoryIdOf = field(ref, "trajectory_id");
  const path = field(ref, "trajectory_path");
  const session = field(ref, "session_id");
  for (const key of [trajectoryIdOf, session]) {
    if (!isNonEmptyString(key)) continue;
    const hit = scopes.map((scope) => scope.get(key)).find((entry) => entry !== undefined);
    if (hit === undefined) continue;
    once(walk, hit.value, where, hit.where);
    return { value: hit.value, id: key, found: hit.where };
  }
  if (isNonEmptyString(path)) {
    const value = loadFile(walk, path, where);
    const id = isNonEmptyString(trajectoryIdOf) ? trajectoryIdOf : (trajectoryId(value) ?? stem(path));
    return { value, id, found: describe(walk, path) };
  }
  const named = [trajectoryIdOf, session].find(isNonEmptyString);
  throw new FormatError(
    "unresolved_subagent",
    named === undefined
      ? `${where} has neither trajectory_id nor trajectory_path`
      : `${where}: ${q(named)} is in no subagent_trajectories of this trajectory, and the ref has no trajectory_path`,
  );
}

function loadFile(walk: Walk, path: string, where: string): JsonObject {
  const files = walk.context.trajectories;
  if (files === undefined) {
    throw new FormatError(
      "unresolved_subagent",
      `${where}: trajectory file ${q(path)} cannot be read here (no files beside this input: ` +
        "read the trajectory from its file, or `callforest convert` it there first)",
    );
  }
  const key = `file:${files.describe(path)}`;
  once(walk, key, where, files.describe(path));
  const value = files.load(path);
  if (value === null) throw new FormatError("unresolved_subagent", `${where}: ${files.describe(path)} not found`);
  if (!isObject(value))
    throw new FormatError(
      "invalid_field",
      `${where}: ${files.describe(path)} holds ${show(value)}, expected a trajectory`,
    );
  return value;
}

function once(walk: Walk, key: unknown, where: string, what: string): void {
  if (walk.seen.has(key))
    throw new FormatError(
      "duplicate_trajectory",
      `${where}: ${what} is referenced twice (each trajectory is one agent)`,
    );
  walk.seen.add(key);
}

function describe(walk: Walk, path: string): string {
  return walk.context.trajectories?.describe(path) ?? path;
}

/** A file name without its folders and `.json`: terminus-2's `trajectory.summarization-1-summary`. */
function stem(path: string): string {
  const name = path.slice(Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\")) + 1);
  return name.replace(/\.json$/i, "") || path;
}

function freshAgentId(agents: readonly AgentInfo[], base: string): string {
  const taken = new Set(agents.map((a) => a.id));
  let id = base;
  for (let n = 2; taken.has(id); n++) id = `${base}#${n}`;
  return id;
}

/** `--reward`, else Harbor's verifier reward for the trial (context.trajectories.reward), else 0 with a note. */
function rewardOf(context: FormatContext, diagnostics: Diagnostic[]): number {
  if (context.reward !== undefined) return context.reward;
  const trial = context.trajectories?.reward?.();
  if (trial !== undefined && trial !== null) return trial.reward;
  diagnostics.push({
    code: "reward_missing",
    call: null,
    detail:
      "no reward: ATIF records none, and no Harbor verifier result (../result.json, ../verifier/reward.txt) " +
      "was found beside the trajectory; reward 0 (give one with --reward)",
  });
  return 0;
}

function untokenizedNote(walk: Walk): Diagnostic {
  const total = [...walk.untokenized.values()].reduce((a, b) => a + b, 0);
  const per = [...walk.untokenized].map(([agent, n]) => `${agent}: ${n}`).join(", ");
  const parts: string[] = [];
  if (total > 0) parts.push(`${total} agent steps without metrics.prompt_token_ids/completion_token_ids (${per})`);
  if (walk.copied > 0) parts.push(`${walk.copied} copied-context steps (is_copied_context)`);
  return { code: "steps_without_token_ids", call: null, detail: `${parts.join(" and ")} are not calls` };
}
