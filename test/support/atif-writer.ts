// Writes a canonical rollout as ATIF, for the round-trip property of test/formats/atif.test.ts:
// one trajectory per agent, each agent's calls as agent steps (metrics with the token ids), each
// subagent referenced from a step of its parent's trajectory, after the parent's last call before
// the subagent's first; subagents embedded (v1.7, by trajectory_id) or in files (v1.6 refs, by
// trajectory_path). What ATIF cannot say is left out: unkept tries, media, routed experts.
import type { AgentInput, CanonicalCall, Rollout } from "../../src/types.js";
import type { TrajectoryFiles } from "../../src/formats/types.js";

export interface Written {
  trajectory: Record<string, unknown>;
  files: Map<string, unknown>;
  /** What reading it back must give: call and agent ids as the reader names them. */
  expected: Rollout;
  /** Agent steps without token ids, and copied-context steps, the writer put in. */
  untokenized: number;
  copied: number;
}

export interface WriteOptions {
  /** Per agent (in order of first appearance), whether it goes in a file rather than embedded. */
  inFile: (index: number) => boolean;
  /** Per step, whether a user step and an agent step without token ids go before it. */
  chatter: (index: number) => boolean;
}

const plain = (a: ArrayLike<number>) => Array.from(a);

export function writeAtif(rollout: Rollout, options: WriteOptions): Written {
  const calls = rollout.calls.filter((c) => c.kept !== false);
  const listed = rollout.agents ?? [];
  const order: string[] = [];
  for (const a of listed) if (!order.includes(a.id)) order.push(a.id);
  for (const c of calls) if (!order.includes(c.agent ?? "")) order.push(c.agent ?? "");
  const parentOf = new Map<string, string | null>(listed.map((a: AgentInput) => [a.id, a.parent ?? null]));
  const root = order.find((id) => (parentOf.get(id) ?? null) === null) ?? order[0] ?? "";
  // Every agent but the root hangs under its parent, or under the root when it has none.
  const parent = (id: string) => (id === root ? null : (parentOf.get(id) ?? root) || root);
  const idOf = (agent: string) => (agent === root ? rollout.rollout_id : `agent-${order.indexOf(agent)}`);
  const files = new Map<string, unknown>();
  let untokenized = 0;
  let copied = 0;
  let stepCount = 0;

  const build = (agent: string): Record<string, unknown> => {
    const own = calls.filter((c) => (c.agent ?? "") === agent);
    const children = order.filter((id) => id !== root && id !== agent && parent(id) === agent);
    const steps: Record<string, unknown>[] = [{ step_id: 1, source: "user", message: "task" }];
    const embedded: Record<string, unknown>[] = [];
    const refer = (child: string) => {
      const value = build(child);
      const index = order.indexOf(child);
      if (options.inFile(index)) {
        const path = `sub-${index}.json`;
        files.set(path, value);
        return { session_id: `session-${index}`, trajectory_path: path };
      }
      embedded.push(value);
      return { trajectory_id: idOf(child) };
    };
    const firstCall = (id: string) => calls.findIndex((c) => (c.agent ?? "") === id);
    const pending = [...children].sort((a, b) => firstCall(a) - firstCall(b));
    const spawnDue = (before: number) => {
      const due: Record<string, unknown>[] = [];
      while (pending.length > 0 && (before === Infinity || firstCall(pending[0]) < before))
        due.push({ subagent_trajectory_ref: [refer(pending.shift()!)] });
      if (due.length > 0)
        steps.push({
          step_id: steps.length + 1,
          source: "agent",
          message: "delegating",
          observation: { results: due },
        });
      if (due.length > 0) untokenized++;
    };
    for (const call of own) {
      spawnDue(calls.indexOf(call));
      if (options.chatter(stepCount++)) {
        steps.push({ step_id: steps.length + 1, source: "user", message: "go on" });
        steps.push({ step_id: steps.length + 1, source: "agent", message: "thinking", metrics: { prompt_tokens: 3 } });
        steps.push({ step_id: steps.length + 1, source: "agent", message: "old", is_copied_context: true });
        untokenized++;
        copied++;
      }
      steps.push({
        step_id: steps.length + 1,
        source: "agent",
        message: "",
        metrics: {
          prompt_token_ids: plain(call.prompt_token_ids),
          completion_token_ids: plain(call.generation_token_ids),
          logprobs: plain(call.generation_log_probs),
        },
        [STEP_OF]: call.id,
      });
    }
    spawnDue(Infinity);
    const trajectory: Record<string, unknown> = {
      schema_version: "ATIF-v1.7",
      trajectory_id: idOf(agent),
      session_id: agent === root ? rollout.rollout_id : `session-${order.indexOf(agent)}`,
      agent: { name: "writer", version: "1" },
      steps,
    };
    if (embedded.length > 0) trajectory.subagent_trajectories = embedded;
    return trajectory;
  };

  const trajectory = build(root);
  // The calls as the reader names them: `<agent id>:<step_id>`.
  const renamed = new Map<string, string>();
  const collect = (t: Record<string, unknown>) => {
    for (const step of t.steps as Record<string | symbol, unknown>[]) {
      const id = step[STEP_OF] as string | undefined;
      if (id !== undefined) renamed.set(id, `${t.trajectory_id}:${step.step_id}`);
      delete step[STEP_OF];
    }
    for (const sub of (t.subagent_trajectories as Record<string, unknown>[] | undefined) ?? []) collect(sub);
  };
  collect(trajectory);
  for (const value of files.values()) collect(value as Record<string, unknown>);
  const expected: Rollout = {
    rollout_id: rollout.rollout_id,
    reward: rollout.reward,
    agents: order.map((id) => ({
      id: idOf(id),
      parent: parent(id) === null ? null : idOf(parent(id)!),
      mode: id === root ? "leader" : "subagent",
    })),
    calls: calls.map(
      (c): CanonicalCall => ({
        id: renamed.get(c.id)!,
        agent: idOf(c.agent ?? ""),
        prompt_token_ids: plain(c.prompt_token_ids),
        generation_token_ids: plain(c.generation_token_ids),
        generation_log_probs: plain(c.generation_log_probs),
      }),
    ),
  };
  return { trajectory, files, expected, untokenized, copied };
}

const STEP_OF = Symbol("call id");

/** A TrajectoryFiles over a map of path to value (what a directory beside the input would hold). */
export function filesOf(files: ReadonlyMap<string, unknown>, reward?: number): TrajectoryFiles {
  return {
    describe: (path) => `dir/${path}`,
    load: (path) => (files.has(path) ? files.get(path) : null),
    reward: reward === undefined ? undefined : () => ({ reward, where: "dir/../result.json" }),
  };
}
