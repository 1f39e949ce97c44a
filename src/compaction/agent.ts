// The agent loop: call the model, run its function calls, append observations, repeat. With
// compaction on, each request goes policy → schedule → materialization → controller → guards,
// and the exact token evidence of each generation is recorded.
import type { Rollout } from "../types.js";
import {
  compactionBody,
  plainBody,
  tokenizeBody,
  type ModelCall,
  type ModelClient,
  type RequestParts,
} from "./client.js";
import { ContextController, type PreparedCall } from "./controller.js";
import { canonicalJson, sha256Hex } from "./digest.js";
import type { Environment, Observation } from "./environment.js";
import { CompactionError, GuardRejectedError, HttpError } from "./errors.js";
import {
  EVIDENCE_SCHEMA_VERSION,
  extractGeneration,
  rolloutFromEvidence,
  type AttemptRecord,
  type CallEvidence,
  type EvidenceRecord,
  type StopReason,
} from "./evidence.js";
import {
  hasGuards,
  measureGuards,
  validateGuards,
  type GuardConfig,
  type GuardEvaluation,
  type GuardOutcome,
  type GuardRound,
} from "./guards.js";
import { SemanticHistory, type HistoryEntry, type UserPart } from "./history.js";
import { entryKeys, materialize, type MaterializedView } from "./materialize.js";
import { MediaStore, type MediaRecord } from "./media.js";
import { mediaSpans } from "./media-spans.js";
import { identityPolicy } from "./policies.js";
import type { ResponsesResponse, TokenizeBody } from "./responses.js";
import { createScheduler, type ScheduledView, type Scheduler } from "./schedules.js";
import { isTokenId } from "./token-rules.js";
import { ProvenanceRecorder } from "./provenance.js";
import { withPartialRun } from "./partial.js";
import { toolImagesCaption, type TaskItem } from "./task-input.js";
import { resourcesEnvironment, type GymRunBody, type ResourcesServer, type ResourcesSession } from "./resources.js";
import { NO_IDENTITY, runIdentity, type RunIdentity } from "./run-identity.js";
import {
  gymResponse,
  transportResponse,
  type GymResponse,
  type GymResponseInputs,
  type TurnRecord,
} from "./gym-response.js";

import type { CompactionOptions } from "./options.js";
export type { CompactionOptions };

/** Scoring through a Gym resources server (Gym's `/run`): seed, tools, `/verify`. */
export interface ResourcesOptions {
  server: ResourcesServer;
  /** The Gym run body: `responses_create_params` (input, tools, instructions, other params) and the task's fields. */
  runBody: GymRunBody;
  /** Gym's `skip_verification`: no `/verify`; the reward is `skipVerificationReward` (default 0). */
  skipVerification?: boolean;
  skipVerificationReward?: number;
  /**
   * A tool answer's text as an observation (default: the text itself, as Gym's agent shows it; see
   * jsonObservation).
   */
  observe?: (text: string, tool: string) => Observation | Promise<Observation>;
}

export interface RunAgentOptions {
  model: ModelClient;
  /** Tools, task and reward (give this or `resources`). */
  environment?: Environment;
  /** Run the episode against a Gym resources server instead of `environment` (see ResourcesOptions). */
  resources?: ResourcesOptions;
  /** Also return Gym's ContextCompactedResponse (`gymResponse`); always built with `resources`. */
  gymResponse?: boolean;
  /** Off when absent or false: plain `POST /v1/responses`, no compaction machinery on the wire. */
  compaction?: CompactionOptions | false;
  maxTurns: number;
  rolloutId?: string;
  /** Agent id in the evidence and the rollout (default "agent"). */
  agent?: string;
  maxOutputTokens?: number;
  temperature?: number;
  /**
   * What a guard rejection does: `"fail"` (default, as Gym's agent) throws a GuardRejectedError,
   * so no truncated episode is verified or rewarded; `"end_episode"` ends the episode there and
   * keeps it, marked partial (`result.partial`, stop reason `guard_rejected`, the Gym response's
   * `status: "incomplete"`, the row's `partial_episode`).
   */
  onGuardReject?: "fail" | "end_episode";
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
  /**
   * What Gym's agent returns from `/v1/responses` (a ContextCompactedResponse with compaction on),
   * when asked for or scored.
   */
  gymResponse?: GymResponse;
  /**
   * With `resources`: what Gym's `/run` returns. The verify response with `response` replaced by
   * the transport projection (compaction on), or, when verification is skipped, the run body with
   * the full response, the skip reward and `verification_skipped: true`.
   */
  row?: Record<string, unknown>;
  evidence: EvidenceRecord;
  /**
   * True when the episode was cut short and kept (`onGuardReject: "end_episode"`): not a finished
   * episode, whatever its reward.
   */
  partial: boolean;
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
  provenance: ProvenanceRecorder;
  /** Per call, what Gym's response needs beyond the evidence. */
  turns: TurnRecord[];
  /** The call being made (for a failure's partial run). */
  current: string | null;
  environment: Environment;
  /** The resources server's session (with `resources`). */
  session: ResourcesSession | null;
  params: Readonly<Record<string, unknown>> | undefined;
  /** The model server's cookies of this episode (each run has its own jar). */
  modelCookies: Map<string, string>;
  /** Rollout and contract identity read from the run body (with `resources`). */
  identity: RunIdentity;
}

/** What one call will send: the scheduled view, its materialization, the controller's verdict. */
interface CallView {
  scheduled: ScheduledView;
  view: MaterializedView;
  prepared: PreparedCall | null;
}

async function appendObservation(
  run: Run,
  obs: Observation,
  turn: number,
  call?: { callId: string; name: string },
): Promise<void> {
  if (typeof obs?.text !== "string")
    throw new CompactionError(`environment: observation after turn ${turn} has no text`);
  const images: UserPart[] = [];
  for (const image of obs.images ?? []) images.push(await storeImage(run, image.bytes, image.mime));
  if (!call) {
    run.history.append({ kind: "user", origin: "initial", turn, parts: [{ type: "text", text: obs.text }, ...images] });
    return;
  }
  run.history.append({ kind: "function_output", origin: "environment", turn, callId: call.callId, output: obs.text });
  if (images.length) {
    // Responses function outputs are text: the images follow as a user message (one image group)
    run.history.append({
      kind: "user",
      origin: "environment",
      turn,
      parts: [{ type: "text", text: toolImagesCaption(call.name) }, ...images],
    });
  }
}

/** Stores an image once (a new one joins mediaOrder) and gives the part that refers to it. */
async function storeImage(run: Run, bytes: Uint8Array, mime: string): Promise<UserPart> {
  const before = run.media.size;
  const record = await run.media.put(bytes, mime);
  if (run.media.size > before) run.mediaOrder.push(record);
  return { type: "image", mediaId: record.id };
}

/** Appends a task's whole initial context (any role, earlier turns), its images stored. */
async function appendContext(run: Run, items: readonly TaskItem[]): Promise<void> {
  for (const item of items) {
    if (item.kind !== "user") {
      run.history.append({ ...item, origin: "initial", turn: -1 });
      continue;
    }
    const parts: UserPart[] = [];
    for (const part of item.parts) {
      if (part.type === "text") {
        parts.push(part);
        continue;
      }
      parts.push(await storeImage(run, part.image.bytes, part.image.mime));
    }
    run.history.append({ kind: "user", ...(item.role ? { role: item.role } : {}), origin: "initial", turn: -1, parts });
  }
}

/** Appends the model's output items (checked by extractGeneration first) to the history; returns the new entries. */
function appendOutput(run: Run, response: ResponsesResponse, turn: number): HistoryEntry[] {
  return response.output.map((item) => {
    switch (item.type) {
      case "reasoning":
        return run.history.append({
          kind: "reasoning",
          origin: "model",
          turn,
          id: item.id,
          text: (item.content ?? []).map((c) => c.text).join(""),
        });
      case "function_call":
        return run.history.append({
          kind: "function_call",
          origin: "model",
          turn,
          id: item.id,
          callId: item.call_id,
          name: item.name,
          arguments: item.arguments,
        });
      case "message":
        return run.history.append({
          kind: "message",
          origin: "model",
          turn,
          id: item.id,
          text: (item.content ?? []).map((c) => c.text).join(""),
        });
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
    instructions: run.environment.instructions,
    tools: run.environment.tools,
    maxOutputTokens: opts.maxOutputTokens,
    temperature: opts.temperature,
    params: run.params,
  };
}

function buildCall(run: Run, cv: CallView): ModelCall {
  const parts = requestParts(run, cv.view);
  return cv.prepared
    ? { endpoint: "context_compaction", body: compactionBody(parts, cv.prepared.requiredPrefix) }
    : { endpoint: "responses", body: plainBody(parts) };
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
  return run.controller.prepare(
    callId,
    view,
    { policy: plan.policy, trigger, retained: plan.retained, omitted: plan.omitted },
    header,
  );
}

/**
 * Checks the call against the guards. A trip under turnChunked closes the chunk early and
 * recompacts once; the call is admitted after compaction or rejected. Returns the view to send,
 * or null when rejected.
 */
async function admit(
  run: Run,
  callId: string,
  entries: readonly HistoryEntry[],
  cv: CallView,
): Promise<CallView | null> {
  const guards = run.guards;
  if (!hasGuards(guards)) return cv;
  const measure = async (c: CallView): Promise<GuardRound> => ({
    view_digest: c.view.digest,
    checks: await measureGuards(guards, c.view, run.media, () =>
      countTokens(run, tokenizeBody(requestParts(run, c.view), c.prepared?.requiredPrefix ?? null)),
    ),
  });
  const passes = (round: GuardRound) => round.checks.every((c) => c.ok);
  const chunk = cv.scheduled.chunk;
  const completed = chunk === null ? 0 : run.calls.filter((c) => c.decision?.chunk === chunk).length;
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
  run.guardLog.push({ call_id: callId, outcome, rounds, chunk, completed_actions: completed });
  if (outcome !== "reject") return cv;
  if (run.opts.onGuardReject === "end_episode") return null;
  const last = rounds[rounds.length - 1];
  throw new GuardRejectedError(
    callId,
    run.calls.length + 1,
    last.checks.filter((c) => !c.ok).map((c) => c.guard),
  );
}

/** Whether a failed request may be tried again (attempt counts from 1); waits before it if so. */
async function retryAfter(run: Run, error: unknown, attempt: number): Promise<boolean> {
  if (!(error instanceof HttpError && error.retryable) || attempt > (run.opts.retries ?? 2)) return false;
  const delay = Math.min((run.opts.retryDelayMs ?? 200) * 2 ** (attempt - 1), 5_000);
  if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
  return true;
}

/** Sends the call, retrying transient failures; every attempt is recorded. */
async function send(
  run: Run,
  callId: string,
  cv: CallView,
): Promise<{ response: ResponsesResponse; attempts: number; call: ModelCall }> {
  for (let attempt = 1; ; attempt++) {
    // A retry rebuilds the request; the controller hands back the same pending decision.
    if (cv.prepared) cv.prepared = prepare(run, callId, cv.scheduled, cv.view);
    const call = buildCall(run, cv);
    try {
      const response = await run.opts.model.respond(call, run.modelCookies);
      run.attempts.push({ call_id: callId, attempt, status: "ok" });
      return { response, attempts: attempt, call };
    } catch (error) {
      run.attempts.push({
        call_id: callId,
        attempt,
        status: "failed",
        error: error instanceof Error ? error.message : String(error),
      });
      if (!(await retryAfter(run, error, attempt))) throw error;
    }
  }
}

/** `work` under the retry policy of the model calls (the `/tokenize` preflight, resources-server requests). */
async function retrying<T>(run: Run, work: () => Promise<T> | T): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (!(await retryAfter(run, error, attempt))) throw error;
    }
  }
}

function countTokens(run: Run, body: TokenizeBody): Promise<number> {
  return retrying(run, () => run.opts.model.countTokens(body, run.modelCookies));
}

/** Runs the model's function calls; returns how many ran and whether the episode ended. */
async function act(
  run: Run,
  output: readonly HistoryEntry[],
  turn: number,
): Promise<{ actions: number; done: boolean }> {
  let actions = 0;
  for (const entry of output) {
    if (entry.kind !== "function_call") continue;
    let args: unknown = entry.arguments;
    try {
      args = JSON.parse(entry.arguments);
    } catch {
      // the environment gets the raw text and can answer with an error observation
    }
    const obs = await retrying(run, () => run.environment.call(entry.name, args));
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
  run.current = callId;
  const entries = run.history.entries();
  const cv = await admit(run, callId, entries, await viewForCall(run, callId, entries));
  if (!cv) return "guard_rejected";
  const sent = await send(run, callId, cv);
  const generation = extractGeneration(callId, sent.response);
  run.provenance.note(`call ${callId} (response ${sent.response.id})`, sent.response);
  // Checked now, not only when the rollout is built: a prompt whose placeholder runs do not match
  // the images shown stops the run at this call.
  if (run.imagePlaceholderToken !== null)
    mediaSpans(`call ${callId}`, generation.prompt_token_ids, cv.view.mediaIds, run.imagePlaceholderToken);
  const output = appendOutput(run, sent.response, turn);
  run.lastResponse = sent.response;
  run.turns.push({
    callId,
    turn,
    plan: cv.scheduled.plan,
    output: output.map((e) => e.seq),
    finishReason: sent.response.incomplete_details?.reason ?? null,
    usage: sent.response.usage,
  });
  const { prepared, view, scheduled } = cv;
  if (prepared)
    run.controller.acknowledge(
      prepared,
      view,
      entryKeys(output, run.media),
      generation.prompt_token_ids,
      generation.generation_token_ids,
    );
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
  // One model call is one action of the chunk, however many function calls it made (Gym's action-{turn}).
  run.scheduler.recordCall(callId);
  run.current = null;
  // A response cut off (max_output_tokens) ends the episode before its function calls run, as in Gym.
  if (sent.response.status === "incomplete" || sent.response.incomplete_details) return "output_truncated";
  const { actions, done } = await act(run, output, turn);
  if (actions === 0) return "final_message";
  return done ? "environment_done" : null;
}

function checkOptions(opts: RunAgentOptions): void {
  if (!Number.isInteger(opts.maxTurns) || opts.maxTurns < 1)
    throw new CompactionError(`runAgent: maxTurns must be a positive integer (got ${opts.maxTurns})`);
  // NaN would retry forever (attempt > NaN is never true).
  if (opts.retries !== undefined && !(Number.isInteger(opts.retries) && opts.retries >= 0)) {
    throw new CompactionError(`runAgent: retries must be a non-negative integer (got ${opts.retries})`);
  }
  if (opts.retryDelayMs !== undefined && !(opts.retryDelayMs >= 0)) {
    throw new CompactionError(`runAgent: retryDelayMs must be a non-negative number (got ${opts.retryDelayMs})`);
  }
  // Checked before any request: the evidence would fail at the end, after every call was made.
  for (const [name, value] of [
    ["agent", opts.agent],
    ["rolloutId", opts.rolloutId],
  ] as const) {
    if (value !== undefined && (typeof value !== "string" || value === ""))
      throw new CompactionError(`runAgent: ${name} must be a non-empty string (got ${JSON.stringify(value)})`);
  }
  if (!opts.environment === !opts.resources)
    throw new CompactionError("runAgent: give exactly one of environment and resources");
  if (opts.onGuardReject !== undefined && opts.onGuardReject !== "fail" && opts.onGuardReject !== "end_episode")
    throw new CompactionError(
      `runAgent: onGuardReject must be "fail" or "end_episode" (got ${JSON.stringify(opts.onGuardReject)})`,
    );
  const skipReward = opts.resources?.skipVerificationReward;
  if (skipReward !== undefined && !Number.isFinite(skipReward))
    throw new CompactionError(`runAgent: resources.skipVerificationReward must be a finite number (got ${skipReward})`);
  const placeholder = opts.model?.imagePlaceholderToken;
  if (placeholder !== undefined && !isTokenId(placeholder)) {
    throw new CompactionError(
      `runAgent: the model client's imagePlaceholderToken must be a token id ` +
        `(an integer in [0, 2^31-1]), got ${placeholder}`,
    );
  }
}

function newRun(opts: RunAgentOptions): Run {
  const compaction = opts.compaction || null;
  const policy = compaction ? compaction.policy : identityPolicy();
  const resources = opts.resources;
  const session = resources ? resources.server.session() : null;
  const environment = session
    ? resourcesEnvironment(session, resources!.runBody, resources!.observe)
    : opts.environment!;
  let params: Record<string, unknown> | undefined;
  if (resources) {
    // The run body's other request params travel with every model call, as in Gym's agent.
    const {
      input: _input,
      tools: _tools,
      instructions: _instructions,
      model: _model,
      ...rest
    } = resources.runBody.responses_create_params;
    params = rest;
  }
  return {
    opts,
    agent: opts.agent ?? "agent",
    imagePlaceholderToken: opts.model?.imagePlaceholderToken ?? null,
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
    provenance: new ProvenanceRecorder(opts.model?.model ?? ""),
    turns: [],
    current: null,
    environment,
    session,
    params,
    modelCookies: new Map(),
    identity: resources ? runIdentity(resources.runBody) : NO_IDENTITY,
  };
}

function gymInputs(run: Run, evidence: EvidenceRecord): GymResponseInputs {
  return {
    evidence,
    entries: run.history.entries(),
    media: run.media,
    turns: run.turns,
    model: run.opts.model.model,
    compaction: run.compaction,
    instructions: run.environment.instructions,
    tools: run.environment.tools,
    params: run.params ?? {},
    maxOutputTokens: run.opts.maxOutputTokens,
    temperature: run.opts.temperature,
    partial: evidence.stop_reason === "guard_rejected",
    agentInput: run.opts.resources ? agentInputOf(run.opts.resources.runBody) : undefined,
  };
}

/** Gym's `agent_input`: the run body's input as given, a string as Gym's EasyInputMessage dumps it. */
function agentInputOf(body: GymRunBody): unknown[] {
  const input = body.responses_create_params.input;
  return typeof input === "string" ? [{ content: input, role: "user", type: "message" }] : structuredClone(input);
}

async function evidenceOf(run: Run, stopReason: StopReason, reward: number): Promise<EvidenceRecord> {
  const { compaction, opts } = run;
  return {
    schema_version: EVIDENCE_SCHEMA_VERSION,
    rollout_id: opts.rolloutId ?? run.identity.rolloutId ?? (await defaultRolloutId(run.calls)),
    reward,
    agent: run.agent,
    stop_reason: stopReason,
    compaction: {
      enabled: !!compaction,
      policy: compaction ? compaction.policy.identity : null,
      schedule: compaction ? compaction.schedule : null,
      guards: run.guards ?? null,
    },
    calls: [...run.calls],
    attempts: [...run.attempts],
    boundaries: [...run.controller.boundaries],
    chunks: compaction ? run.scheduler.chunks() : [],
    guards: [...run.guardLog],
    media: [...run.mediaOrder],
    image_placeholder_token: run.imagePlaceholderToken,
    provenance: run.provenance.record(),
  };
}

/** The error, carrying what the run recorded before it (`error.partial`). */
async function failed(run: Run, error: unknown): Promise<Error> {
  const evidence = await evidenceOf(run, "failed", 0);
  let rollout: Rollout | null = null;
  let rolloutError: string | null = null;
  try {
    rollout = rolloutFromEvidence(evidence);
  } catch (e) {
    rolloutError = e instanceof Error ? e.message : String(e);
  }
  return withPartialRun(error, {
    complete: false,
    failed_call: run.current,
    evidence,
    rollout,
    rollout_error: rolloutError,
  });
}

/** Gym's `/run` after the episode: `/verify` (or its skip), the reward, and the row it returns. */
async function score(
  run: Run,
  response: GymResponse,
  partial: boolean,
): Promise<{ reward: number; row: Record<string, unknown> }> {
  const resources = run.opts.resources!;
  const runBody = resources.runBody as Record<string, unknown>;
  // A kept partial episode says so in its row, so no trainer takes it for a finished one.
  const mark = partial ? { partial_episode: "guard_rejected" } : {};
  // `/run` returns the contract with the run body's identity (Gym sets it after verification).
  const identified = (r: GymResponse): GymResponse =>
    run.compaction
      ? {
          ...r,
          context_compaction_contract: {
            ...(r.context_compaction_contract as Record<string, unknown>),
            ...run.identity.contract,
          },
        }
      : r;
  if (resources.skipVerification) {
    const reward = resources.skipVerificationReward ?? 0;
    return {
      reward,
      row: { ...runBody, response: identified(response), reward, verification_skipped: true, ...mark },
    };
  }
  // With the model server's cookies too, as Gym's agent sends them (a session the verifier may read).
  const verified = await retrying(run, () => run.session!.verify({ ...runBody, response }, run.modelCookies));
  const row = run.compaction ? { ...verified, response: identified(await transportResponse(response)) } : verified;
  return { reward: verified.reward, row: { ...row, ...mark } };
}

export async function runAgent(opts: RunAgentOptions): Promise<RunAgentResult> {
  checkOptions(opts);
  const run = newRun(opts);
  try {
    const env = run.environment;
    if (env.startContext) await appendContext(run, (await retrying(run, () => env.startContext!())).context);
    else await appendObservation(run, await retrying(run, () => env.start()), -1);
    let stopReason: StopReason = "max_turns";
    for (let turn = 0; turn < opts.maxTurns; turn++) {
      const stop = await step(run, turn);
      if (stop) {
        stopReason = stop;
        break;
      }
    }
    run.scheduler.finish();
    const evidence = await evidenceOf(run, stopReason, opts.resources ? 0 : run.environment.reward());
    const partial = stopReason === "guard_rejected";
    const result: RunAgentResult = {
      response: run.lastResponse,
      evidence,
      partial,
      rollout: null as unknown as Rollout,
      stopReason,
      history: run.history,
      media: run.media,
    };
    if (opts.gymResponse || opts.resources) result.gymResponse = await gymResponse(gymInputs(run, evidence));
    if (opts.resources) {
      const { reward, row } = await score(run, result.gymResponse!, partial);
      evidence.reward = reward;
      result.row = row;
    }
    result.rollout = rolloutFromEvidence(evidence);
    return result;
  } catch (error) {
    throw await failed(run, error);
  }
}

/**
 * A rollout id from its responses' ids (the same run gives the same id); a run that made no call
 * has nothing to derive one from, so it gets a random one (no two such runs share an id).
 */
async function defaultRolloutId(calls: readonly CallEvidence[]): Promise<string> {
  if (calls.length === 0) return `rollout-${globalThis.crypto.randomUUID().replace(/-/g, "").slice(0, 16)}`;
  return `rollout-${(await sha256Hex(canonicalJson(calls.map((c) => c.response_id)))).slice(0, 16)}`;
}
