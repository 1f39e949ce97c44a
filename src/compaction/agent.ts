// The agent loop: call the model, run its function calls, append observations, repeat. With
// compaction on, each request goes through policy → schedule → materialization → controller →
// guards, and the exact token evidence of each generation is recorded.
import type { Rollout } from "../types.js";
import { compactionBody, plainBody, type ModelCall, type ModelClient, type RequestParts } from "./client.js";
import { ContextController, type PreparedCall } from "./controller.js";
import { canonicalJson, sha256Hex } from "./digest.js";
import type { Environment, Observation } from "./environment.js";
import { CompactionError, ModelHttpError } from "./errors.js";
import {
  EVIDENCE_SCHEMA_VERSION,
  extractGeneration,
  rolloutFromEvidence,
  type AttemptRecord,
  type CallEvidence,
  type EvidenceRecord,
  type StopReason,
} from "./evidence.js";
import { hasGuards, measureGuards, validateGuards, type GuardConfig, type GuardEvaluation, type GuardOutcome } from "./guards.js";
import { SemanticHistory, type HistoryEntry, type UserPart } from "./history.js";
import { entryKeys, materialize, type MaterializedView } from "./materialize.js";
import { MediaStore, type MediaRecord } from "./media.js";
import { identityPolicy, policyIdentity, type Policy, type PolicyIdentity } from "./policies.js";
import type { ResponsesResponse } from "./responses.js";
import { createScheduler, type ScheduleConfig, type ScheduledView, type Scheduler } from "./schedules.js";

export interface CompactionOptions {
  policy: Policy;
  schedule: ScheduleConfig;
  guards?: GuardConfig;
}

export interface RunAgentOptions {
  model: ModelClient;
  environment: Environment;
  /** Off when absent or false: plain `POST /v1/responses`, no compaction machinery on the wire. */
  compaction?: CompactionOptions | false;
  maxTurns: number;
  rolloutId?: string;
  /** Agent id in the evidence and the rollout (default "agent"). */
  agent?: string;
  maxOutputTokens?: number;
  temperature?: number;
  /** Extra attempts for a call after a transient failure (transport error, HTTP 5xx). Default 2. */
  retries?: number;
}

export interface RunAgentResult {
  /** The last model response (null if no call was made). */
  response: ResponsesResponse | null;
  evidence: EvidenceRecord;
  /** SPEC's canonical rollout, built from `evidence` alone. */
  rollout: Rollout;
  stopReason: StopReason;
  history: SemanticHistory;
  media: MediaStore;
}

interface Run {
  opts: RunAgentOptions;
  agent: string;
  history: SemanticHistory;
  media: MediaStore;
  mediaOrder: MediaRecord[];
}

async function appendObservation(run: Run, obs: Observation, turn: number, origin: "initial" | "environment", callId?: string, name?: string) {
  if (typeof obs?.text !== "string") throw new CompactionError(`environment: observation after turn ${turn} has no text`);
  const imageParts: UserPart[] = [];
  for (const image of obs.images ?? []) {
    const known = run.media.size;
    const record = await run.media.put(image.bytes, image.mime);
    if (run.media.size > known) run.mediaOrder.push(record);
    imageParts.push({ type: "image", mediaId: record.id });
  }
  if (origin === "initial") {
    run.history.append({ kind: "user", origin, turn, parts: [{ type: "text", text: obs.text }, ...imageParts] });
    return;
  }
  run.history.append({ kind: "function_output", origin, turn, callId: callId!, output: obs.text });
  if (imageParts.length) {
    run.history.append({ kind: "user", origin, turn, parts: [{ type: "text", text: `Observation after ${name}:` }, ...imageParts] });
  }
}

/** Appends the model's output items to the history; returns the new entries. */
function appendOutput(run: Run, response: ResponsesResponse, turn: number): HistoryEntry[] {
  const added: HistoryEntry[] = [];
  for (const item of response.output) {
    if (item.type === "reasoning") {
      added.push(run.history.append({ kind: "reasoning", origin: "model", turn, id: item.id, text: item.content.map((c) => c.text).join("") }));
    } else if (item.type === "function_call") {
      added.push(
        run.history.append({ kind: "function_call", origin: "model", turn, id: item.id, callId: item.call_id, name: item.name, arguments: item.arguments }),
      );
    } else if (item.type === "message") {
      added.push(run.history.append({ kind: "message", origin: "model", turn, id: item.id, text: item.content.map((c) => c.text).join("") }));
    } else {
      throw new CompactionError(`call ${turn}: unsupported output item type ${(item as { type: string }).type}`);
    }
  }
  return added;
}

function parseArgs(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Sends a call, retrying transient failures; every attempt is recorded. */
async function send(
  run: Run,
  callId: string,
  build: () => ModelCall,
  attempts: AttemptRecord[],
  beforeAttempt: () => void,
): Promise<{ response: ResponsesResponse; attempts: number }> {
  const retries = run.opts.retries ?? 2;
  for (let attempt = 1; ; attempt++) {
    beforeAttempt();
    try {
      const response = await run.opts.model.respond(build());
      attempts.push({ call_id: callId, attempt, status: "ok" });
      return { response, attempts: attempt };
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      attempts.push({ call_id: callId, attempt, status: "failed", error: message });
      if (!(error instanceof ModelHttpError && error.retryable) || attempt > retries) throw error;
    }
  }
}

export async function runAgent(opts: RunAgentOptions): Promise<RunAgentResult> {
  if (!Number.isInteger(opts.maxTurns) || opts.maxTurns < 1) throw new CompactionError(`runAgent: maxTurns must be a positive integer (got ${opts.maxTurns})`);
  const compaction = opts.compaction || null;
  const policy = compaction ? compaction.policy : identityPolicy();
  const identity: PolicyIdentity = await policyIdentity(policy);
  const guards = compaction?.guards ? validateGuards(compaction.guards) : undefined;
  const run: Run = { opts, agent: opts.agent ?? "agent", history: new SemanticHistory(), media: new MediaStore(), mediaOrder: [] };
  const scheduler: Scheduler = createScheduler(compaction ? compaction.schedule : { type: "rolling" }, policy);
  const controller = new ContextController();
  const env = opts.environment;
  const calls: CallEvidence[] = [];
  const attempts: AttemptRecord[] = [];
  const guardLog: GuardEvaluation[] = [];
  let lastResponse: ResponsesResponse | null = null;
  let stopReason: StopReason = "max_turns";

  await appendObservation(run, await env.start(), -1, "initial");
  const parts = (view: MaterializedView): RequestParts => ({
    model: opts.model.model,
    input: view.input,
    instructions: env.instructions,
    tools: env.tools,
    maxOutputTokens: opts.maxOutputTokens,
    temperature: opts.temperature,
  });

  turns: for (let turn = 0; turn < opts.maxTurns; turn++) {
    const callId = `${run.agent}-c${turn}`;
    let entries = run.history.entries();
    let scheduled: ScheduledView = scheduler.view(entries);
    let view = await materialize(scheduled.plan, entries, run.media);
    const decide = (s: ScheduledView) => ({ policy: identity, trigger: s.trigger, retained: s.plan.retained, omitted: s.plan.omitted });
    let prepared: PreparedCall | null = compaction ? controller.prepare(callId, view, decide(scheduled)) : null;

    if (compaction && hasGuards(guards)) {
      const measure = async () => {
        const body = compactionBody(parts(view), prepared!.requiredPrefix);
        const checks = await measureGuards(guards, view, run.media, () =>
          opts.model.countTokens({
            model: body.model,
            input: body.input,
            ...(body.instructions !== undefined ? { instructions: body.instructions } : {}),
            ...(body.tools !== undefined ? { tools: body.tools } : {}),
            ...(body.required_prefix_token_ids !== undefined ? { required_prefix_token_ids: body.required_prefix_token_ids } : {}),
          }),
        );
        return { view_digest: view.digest, checks };
      };
      const passes = (round: { checks: { ok: boolean }[] }) => round.checks.every((c) => c.ok);
      const rounds = [await measure()];
      let outcome: GuardOutcome = "admit";
      if (!passes(rounds[0])) {
        outcome = "reject";
        // Under turnChunked a tripped guard first closes the chunk early and recompacts.
        if (scheduler.closeChunkEarly()) {
          scheduled = scheduler.view(entries);
          view = await materialize(scheduled.plan, entries, run.media);
          prepared = controller.prepare(callId, view, decide(scheduled));
          rounds.push(await measure());
          if (passes(rounds[1])) outcome = "admit_after_compaction";
        }
      }
      guardLog.push({ call_id: callId, outcome, rounds });
      if (outcome === "reject") {
        stopReason = "guard_rejected";
        break turns;
      }
    }

    const endpoint = compaction ? "context_compaction" : "responses";
    const build = (): ModelCall =>
      compaction
        ? { endpoint: "context_compaction", body: compactionBody(parts(view), prepared!.requiredPrefix) }
        : { endpoint: "responses", body: plainBody(parts(view)) };
    const sent = await send(run, callId, build, attempts, () => {
      // A retry rebuilds the request; the controller hands back the same pending decision.
      if (compaction) prepared = controller.prepare(callId, view, decide(scheduled));
    });
    const response = sent.response;
    const generation = extractGeneration(callId, response);
    const output = appendOutput(run, response, turn);
    if (prepared) {
      controller.acknowledge(prepared, view, entryKeys(output, run.media), generation.prompt_token_ids, generation.generation_token_ids);
    }
    lastResponse = response;
    const parent = prepared?.parentCall ?? null;
    const parentCall = parent ? calls.find((c) => c.call_id === parent) : undefined;
    calls.push({
      call_id: callId,
      turn,
      agent: run.agent,
      endpoint,
      response_id: response.id,
      attempts: sent.attempts,
      segment: prepared ? prepared.segment : 0,
      parent_call: parent,
      required_prefix_length: prepared?.requiredPrefix?.length ?? 0,
      view_digest: view.digest,
      decision: compaction ? { ...identity, trigger: scheduled.trigger, chunk: scheduled.chunk } : null,
      view: { input_items: view.input.length, retained: scheduled.plan.retained, omitted: scheduled.plan.omitted },
      media: [...view.mediaIds],
      appended_items: parentCall ? view.input.length - parentCall.view.input_items : 0,
      ...generation,
    });

    const functionCalls = output.filter((e) => e.kind === "function_call");
    if (functionCalls.length === 0) {
      stopReason = "final_message";
      scheduler.recordCall(callId, 0);
      break;
    }
    let done = false;
    for (const fc of functionCalls) {
      if (fc.kind !== "function_call") continue;
      const obs = await env.call(fc.name, parseArgs(fc.arguments));
      await appendObservation(run, obs, turn, "environment", fc.callId, fc.name);
      done ||= obs.done === true;
    }
    scheduler.recordCall(callId, functionCalls.length);
    if (done) {
      stopReason = "environment_done";
      break;
    }
  }
  scheduler.finish();

  const evidence: EvidenceRecord = {
    schema_version: EVIDENCE_SCHEMA_VERSION,
    rollout_id: opts.rolloutId ?? `rollout-${(await sha256Hex(canonicalJson(calls.map((c) => c.response_id)))).slice(0, 16)}`,
    reward: env.reward(),
    agent: run.agent,
    stop_reason: stopReason,
    compaction: {
      enabled: !!compaction,
      policy: compaction ? identity : null,
      schedule: compaction ? compaction.schedule : null,
      guards: compaction && guards ? guards : null,
    },
    calls,
    attempts,
    boundaries: [...controller.boundaries],
    chunks: compaction ? scheduler.chunks() : [],
    guards: guardLog,
    media: run.mediaOrder,
  };
  return { response: lastResponse, evidence, rollout: rolloutFromEvidence(evidence), stopReason, history: run.history, media: run.media };
}
