// The agent loop: call the model, run its function calls, append observations, repeat. With
// compaction on, each request goes policy → schedule → materialization → controller → guards,
// and the exact token evidence of each generation is recorded.
import type { Rollout } from "../types.js";
import { compactionBody, plainBody, tokenizeBody, type ModelCall, type ModelClient, type RequestParts } from "./client.js";
import { ContextController, type PreparedCall } from "./controller.js";
import { canonicalJson, sha256Hex } from "./digest.js";
import type { Environment, Observation } from "./environment.js";
import { CompactionError, ModelHttpError } from "./errors.js";
import {
  EVIDENCE_SCHEMA_VERSION,
  extractGeneration,
  isTokenId,
  rolloutFromEvidence,
  type AttemptRecord,
  type CallEvidence,
  type EvidenceRecord,
  type StopReason,
} from "./evidence.js";
import { hasGuards, measureGuards, validateGuards, type GuardConfig, type GuardEvaluation, type GuardOutcome, type GuardRound } from "./guards.js";
import { SemanticHistory, type HistoryEntry, type UserPart } from "./history.js";
import { entryKeys, materialize, type MaterializedView } from "./materialize.js";
import { MediaStore, type MediaRecord } from "./media.js";
import { mediaSpans } from "./media-spans.js";
import { identityPolicy, type Policy } from "./policies.js";
import type { ResponsesResponse, TokenizeBody } from "./responses.js";
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
  /**
   * Extra attempts for a request after a transient failure (transport error, timeout, HTTP 5xx),
   * model calls and `/tokenize` preflights alike. A non-negative integer; default 2.
   */
  retries?: number;
  /** Wait before the first retry, doubled for each next one (capped at 5 s). Default 200 ms. */
  retryDelayMs?: number;
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

/** The state of one run. */
interface Run {
  opts: RunAgentOptions;
  agent: string;
  /** The model client's image placeholder token (null: not known). */
  imagePlaceholderToken: number | null;
  compaction: CompactionOptions | null;
  guards: GuardConfig | undefined;
  history: SemanticHistory;
  media: MediaStore;
  /** Stored media in order of first occurrence. */
  mediaOrder: MediaRecord[];
  scheduler: Scheduler;
  controller: ContextController;
  calls: CallEvidence[];
  attempts: AttemptRecord[];
  guardLog: GuardEvaluation[];
  lastResponse: ResponsesResponse | null;
}

/** What one call will send: the scheduled view, its materialization, the controller's verdict. */
interface CallView {
  scheduled: ScheduledView;
  view: MaterializedView;
  prepared: PreparedCall | null;
}

async function appendObservation(run: Run, obs: Observation, turn: number, call?: { callId: string; name: string }): Promise<void> {
  if (typeof obs?.text !== "string") throw new CompactionError(`environment: observation after turn ${turn} has no text`);
  const images: UserPart[] = [];
  for (const image of obs.images ?? []) {
    const before = run.media.size;
    const record = await run.media.put(image.bytes, image.mime);
    if (run.media.size > before) run.mediaOrder.push(record);
    images.push({ type: "image", mediaId: record.id });
  }
  if (!call) {
    run.history.append({ kind: "user", origin: "initial", turn, parts: [{ type: "text", text: obs.text }, ...images] });
    return;
  }
  run.history.append({ kind: "function_output", origin: "environment", turn, callId: call.callId, output: obs.text });
  if (images.length) {
    // Responses function outputs are text: the images follow as a user message (one image group)
    run.history.append({ kind: "user", origin: "environment", turn, parts: [{ type: "text", text: `Observation after ${call.name}:` }, ...images] });
  }
}

/** Appends the model's output items (checked by extractGeneration first) to the history; returns the new entries. */
function appendOutput(run: Run, response: ResponsesResponse, turn: number): HistoryEntry[] {
  return response.output.map((item) => {
    switch (item.type) {
      case "reasoning":
        return run.history.append({ kind: "reasoning", origin: "model", turn, id: item.id, text: (item.content ?? []).map((c) => c.text).join("") });
      case "function_call":
        return run.history.append({ kind: "function_call", origin: "model", turn, id: item.id, callId: item.call_id, name: item.name, arguments: item.arguments });
      case "message":
        return run.history.append({ kind: "message", origin: "model", turn, id: item.id, text: (item.content ?? []).map((c) => c.text).join("") });
      default:
        throw new CompactionError(`call ${turn}: unsupported output item type ${(item as { type: string }).type}`);
    }
  });
}

function requestParts(run: Run, view: MaterializedView): RequestParts {
  const { opts } = run;
  return {
    model: opts.model.model,
    input: view.input,
    instructions: opts.environment.instructions,
    tools: opts.environment.tools,
    maxOutputTokens: opts.maxOutputTokens,
    temperature: opts.temperature,
  };
}

function buildCall(run: Run, cv: CallView): ModelCall {
  const parts = requestParts(run, cv.view);
  return cv.prepared ? { endpoint: "context_compaction", body: compactionBody(parts, cv.prepared.requiredPrefix) } : { endpoint: "responses", body: plainBody(parts) };
}

async function viewForCall(run: Run, callId: string, entries: readonly HistoryEntry[]): Promise<CallView> {
  const scheduled = run.scheduler.view(entries);
  const view = await materialize(scheduled.plan, entries, run.media);
  const prepared = run.compaction ? prepare(run, callId, scheduled, view) : null;
  return { scheduled, view, prepared };
}

function prepare(run: Run, callId: string, scheduled: ScheduledView, view: MaterializedView): PreparedCall {
  const { plan, trigger } = scheduled;
  // Instructions and tools are rendered before the items: a change is a boundary too.
  const { instructions, tools } = requestParts(run, view);
  const header = canonicalJson({ instructions: instructions ?? null, tools: tools ?? null });
  return run.controller.prepare(callId, view, { policy: plan.policy, trigger, retained: plan.retained, omitted: plan.omitted }, header);
}

/**
 * Checks the call against the guards. A trip under turnChunked closes the chunk early and
 * recompacts once; the call is admitted after compaction or rejected. Returns the view to send,
 * or null when rejected.
 */
async function admit(run: Run, callId: string, entries: readonly HistoryEntry[], cv: CallView): Promise<CallView | null> {
  const guards = run.guards;
  if (!hasGuards(guards)) return cv;
  const measure = async (c: CallView): Promise<GuardRound> => ({
    view_digest: c.view.digest,
    checks: await measureGuards(guards, c.view, run.media, () =>
      countTokens(run, tokenizeBody(requestParts(run, c.view), c.prepared?.requiredPrefix ?? null)),
    ),
  });
  const passes = (round: GuardRound) => round.checks.every((c) => c.ok);
  const rounds = [await measure(cv)];
  let outcome: GuardOutcome = "admit";
  if (!passes(rounds[0])) {
    outcome = "reject";
    if (run.scheduler.closeChunkEarly()) {
      cv = await viewForCall(run, callId, entries);
      rounds.push(await measure(cv));
      if (passes(rounds[1])) outcome = "admit_after_compaction";
    }
  }
  run.guardLog.push({ call_id: callId, outcome, rounds });
  return outcome === "reject" ? null : cv;
}

/** Whether a failed request may be tried again (attempt counts from 1); waits before it if so. */
async function retryAfter(run: Run, error: unknown, attempt: number): Promise<boolean> {
  if (!(error instanceof ModelHttpError && error.retryable) || attempt > (run.opts.retries ?? 2)) return false;
  const delay = Math.min((run.opts.retryDelayMs ?? 200) * 2 ** (attempt - 1), 5_000);
  if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
  return true;
}

/** Sends the call, retrying transient failures; every attempt is recorded. */
async function send(run: Run, callId: string, cv: CallView): Promise<{ response: ResponsesResponse; attempts: number; call: ModelCall }> {
  for (let attempt = 1; ; attempt++) {
    // A retry rebuilds the request; the controller hands back the same pending decision.
    if (cv.prepared) cv.prepared = prepare(run, callId, cv.scheduled, cv.view);
    const call = buildCall(run, cv);
    try {
      const response = await run.opts.model.respond(call);
      run.attempts.push({ call_id: callId, attempt, status: "ok" });
      return { response, attempts: attempt, call };
    } catch (error) {
      run.attempts.push({ call_id: callId, attempt, status: "failed", error: error instanceof Error ? error.message : String(error) });
      if (!(await retryAfter(run, error, attempt))) throw error;
    }
  }
}

/** The `/tokenize` preflight, under the same retry policy as the calls themselves. */
async function countTokens(run: Run, body: TokenizeBody): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run.opts.model.countTokens(body);
    } catch (error) {
      if (!(await retryAfter(run, error, attempt))) throw error;
    }
  }
}

/** Runs the model's function calls; returns how many ran and whether the episode ended. */
async function act(run: Run, output: readonly HistoryEntry[], turn: number): Promise<{ actions: number; done: boolean }> {
  let actions = 0;
  for (const entry of output) {
    if (entry.kind !== "function_call") continue;
    let args: unknown = entry.arguments;
    try {
      args = JSON.parse(entry.arguments);
    } catch {
      // the environment gets the raw text and can answer with an error observation
    }
    const obs = await run.opts.environment.call(entry.name, args);
    await appendObservation(run, obs, turn, { callId: entry.callId, name: entry.name });
    actions++;
    // The episode is over: the response's later calls are not run (they could undo the end).
    if (obs.done === true) return { actions, done: true };
  }
  return { actions, done: false };
}

/** One model call: view, guards, send, evidence, actions. Returns why the run stops, or null to go on. */
async function step(run: Run, turn: number): Promise<StopReason | null> {
  const callId = `${run.agent}-c${turn}`;
  const entries = run.history.entries();
  const cv = await admit(run, callId, entries, await viewForCall(run, callId, entries));
  if (!cv) return "guard_rejected";
  const sent = await send(run, callId, cv);
  const generation = extractGeneration(callId, sent.response);
  // Checked now, not only when the rollout is built: a prompt whose placeholder runs do not match the images shown stops the run at this call.
  if (run.imagePlaceholderToken !== null) mediaSpans(`call ${callId}`, generation.prompt_token_ids, cv.view.mediaIds, run.imagePlaceholderToken);
  const output = appendOutput(run, sent.response, turn);
  run.lastResponse = sent.response;
  const { prepared, view, scheduled } = cv;
  if (prepared) run.controller.acknowledge(prepared, view, entryKeys(output, run.media), generation.prompt_token_ids, generation.generation_token_ids);
  const parent = prepared?.parentCall ? run.calls.find((c) => c.call_id === prepared.parentCall) : undefined;
  run.calls.push({
    call_id: callId,
    turn,
    agent: run.agent,
    endpoint: sent.call.endpoint,
    response_id: sent.response.id,
    attempts: sent.attempts,
    segment: prepared ? prepared.segment : 0,
    parent_call: parent?.call_id ?? null,
    required_prefix_length: prepared?.requiredPrefix?.length ?? 0,
    view_digest: view.digest,
    request_digest: `sha256:${await sha256Hex(canonicalJson(sent.call.body))}`,
    decision: prepared ? { ...scheduled.plan.policy, trigger: scheduled.trigger, chunk: scheduled.chunk } : null,
    view: { input_items: view.input.length, retained: scheduled.plan.retained, omitted: scheduled.plan.omitted },
    media: [...view.mediaIds],
    appended_items: parent ? view.input.length - parent.view.input_items : 0,
    ...generation,
  });
  const { actions, done } = await act(run, output, turn);
  run.scheduler.recordCall(callId, actions);
  // No action: the model is done, unless the server cut its answer off (max_output_tokens).
  if (actions === 0) return sent.response.status === "incomplete" ? "output_truncated" : "final_message";
  return done ? "environment_done" : null;
}

export async function runAgent(opts: RunAgentOptions): Promise<RunAgentResult> {
  if (!Number.isInteger(opts.maxTurns) || opts.maxTurns < 1) throw new CompactionError(`runAgent: maxTurns must be a positive integer (got ${opts.maxTurns})`);
  // NaN would retry forever (attempt > NaN is never true).
  if (opts.retries !== undefined && !(Number.isInteger(opts.retries) && opts.retries >= 0)) {
    throw new CompactionError(`runAgent: retries must be a non-negative integer (got ${opts.retries})`);
  }
  if (opts.retryDelayMs !== undefined && !(opts.retryDelayMs >= 0)) {
    throw new CompactionError(`runAgent: retryDelayMs must be a non-negative number (got ${opts.retryDelayMs})`);
  }
  // Checked before any request: the evidence would fail at the end, after every call was made.
  for (const [name, value] of [["agent", opts.agent], ["rolloutId", opts.rolloutId]] as const) {
    if (value !== undefined && (typeof value !== "string" || value === "")) throw new CompactionError(`runAgent: ${name} must be a non-empty string (got ${JSON.stringify(value)})`);
  }
  const placeholder = opts.model?.imagePlaceholderToken;
  if (placeholder !== undefined && !isTokenId(placeholder)) {
    throw new CompactionError(`runAgent: the model client's imagePlaceholderToken must be a token id (an integer in [0, 2^31-1]), got ${placeholder}`);
  }
  const compaction = opts.compaction || null;
  const policy = compaction ? compaction.policy : identityPolicy();
  const run: Run = {
    opts,
    agent: opts.agent ?? "agent",
    imagePlaceholderToken: placeholder ?? null,
    compaction,
    guards: compaction?.guards ? validateGuards(compaction.guards) : undefined,
    history: new SemanticHistory(),
    media: new MediaStore(),
    mediaOrder: [],
    scheduler: createScheduler(compaction ? compaction.schedule : { type: "rolling" }, policy),
    controller: new ContextController(),
    calls: [],
    attempts: [],
    guardLog: [],
    lastResponse: null,
  };
  await appendObservation(run, await opts.environment.start(), -1);
  let stopReason: StopReason = "max_turns";
  for (let turn = 0; turn < opts.maxTurns; turn++) {
    const stop = await step(run, turn);
    if (stop) {
      stopReason = stop;
      break;
    }
  }
  run.scheduler.finish();

  const evidence: EvidenceRecord = {
    schema_version: EVIDENCE_SCHEMA_VERSION,
    rollout_id: opts.rolloutId ?? (await defaultRolloutId(run.calls)),
    reward: opts.environment.reward(),
    agent: run.agent,
    stop_reason: stopReason,
    compaction: {
      enabled: !!compaction,
      policy: compaction ? policy.identity : null,
      schedule: compaction ? compaction.schedule : null,
      guards: run.guards ?? null,
    },
    calls: run.calls,
    attempts: run.attempts,
    boundaries: [...run.controller.boundaries],
    chunks: compaction ? run.scheduler.chunks() : [],
    guards: run.guardLog,
    media: run.mediaOrder,
    image_placeholder_token: run.imagePlaceholderToken,
  };
  return { response: run.lastResponse, evidence, rollout: rolloutFromEvidence(evidence), stopReason, history: run.history, media: run.media };
}

/**
 * A rollout id from its responses' ids (the same run gives the same id); a run that made no call
 * has nothing to derive one from, so it gets a random one (no two such runs share an id).
 */
async function defaultRolloutId(calls: readonly CallEvidence[]): Promise<string> {
  if (calls.length === 0) return `rollout-${globalThis.crypto.randomUUID().replace(/-/g, "").slice(0, 16)}`;
  return `rollout-${(await sha256Hex(canonicalJson(calls.map((c) => c.response_id)))).slice(0, 16)}`;
}
