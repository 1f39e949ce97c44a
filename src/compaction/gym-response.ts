// Gym's envelope out (§4.4 of the Gym formats reference): a run as the ContextCompactedResponse
// Gym's compaction agent returns — the whole logical output with token fields on each call's last
// item, one ObservedCompletion per call, media assets, boundary, chunk and guard records and the
// contract — and its post-verification transport projection. Ids follow Gym's formulas over this
// runtime's own views and parts (view digests, part ids `part-{event:06d}-{index:03d}`), and so
// do the lineage records (`final_policy_decision`, `lineage_deltas`, see gym-decision.ts).
import type { CompactionOptions } from "./options.js";
import type { CallEvidence, EvidenceRecord } from "./evidence-types.js";
import type { FunctionTool, InputItem } from "./responses.js";
import { entryItem } from "./materialize.js";
import { imagesOf, isImageGroup, type HistoryEntry } from "./history.js";
import type { MediaStore } from "./media.js";
import { mediaSpans } from "./media-spans.js";
import type { ViewPlan } from "./policies.js";
import { canonicalDigest, canonicalDigestSync, pythonJsonWithFloats, stableId } from "./gym-ids.js";
import { chunkedDecision, GymPartIndex, policyDecision, type PolicyDecisionRecord } from "./gym-decision.js";
import { lineageDelta, type TransformationLineageDeltaRecord, type UnitLineageRecord } from "./gym-lineage.js";
import { compactionPolicyId, contextHistoryOf } from "./gym-config.js";
import { sha256Hex } from "./digest.js";

/** What one call adds beyond its evidence: its view plan, its output entries (history seqs), why it stopped. */
export interface TurnRecord {
  callId: string;
  turn: number;
  plan: ViewPlan;
  output: number[];
  finishReason: string | null;
  usage?: { input_tokens: number; output_tokens: number; total_tokens: number };
}

export interface GymResponseInputs {
  evidence: EvidenceRecord;
  entries: readonly HistoryEntry[];
  media: MediaStore;
  turns: readonly TurnRecord[];
  model: string;
  compaction: CompactionOptions | null;
  instructions?: string;
  tools: readonly FunctionTool[];
  params: Readonly<Record<string, unknown>>;
  maxOutputTokens?: number;
  temperature?: number;
  /** The task's input as given (a run body's); absent: the initial context as this runtime renders it. */
  agentInput?: readonly unknown[];
  /** The episode was cut short by a guard and kept: the response says `incomplete`. */
  partial?: boolean;
}

/** A ContextCompactedResponse (compaction on) or a plain NeMoGymResponse (off), as JSON. */
export type GymResponse = Record<string, unknown> & { output: Record<string, unknown>[] };

const hex = (digest: string) => digest.replace(/^sha256:/, "");

/** Dimensions and colour mode as Gym reads them: PNG only (its IHDR), null for other formats. */
function pngFacts(
  bytes: Uint8Array,
  mime: string,
  width: number,
  height: number,
): { dims: [number, number] | null; color: string | null } {
  if (mime !== "image/png") return { dims: null, color: null };
  const modes: Record<number, string> = { 0: "L", 2: "RGB", 3: "P", 4: "LA", 6: "RGBA" };
  const depth = bytes[24];
  let color = modes[bytes[25]] ?? null;
  if (depth !== 8) color = `${color ?? "unknown"}-${depth}bit`;
  return { dims: [width, height], color };
}

async function mediaAssets(
  inputs: GymResponseInputs,
): Promise<{ assets: Record<string, unknown>; ids: Map<string, string> }> {
  const assets: Record<string, unknown> = {};
  const ids = new Map<string, string>();
  for (const record of inputs.evidence.media) {
    const sourcePart = { type: "input_image", image_url: inputs.media.dataUrl(record.id), detail: "auto" };
    const digest = await canonicalDigest(sourcePart);
    const mediaId = `media-${digest.slice(0, 24)}`;
    const facts = pngFacts(inputs.media.bytes(record.id), record.mime, record.width, record.height);
    ids.set(record.id, mediaId);
    assets[mediaId] = {
      media_id: mediaId,
      content_digest: digest,
      source_part: sourcePart,
      original_dimensions: facts.dims,
      color_mode: facts.color,
      source_format: record.mime.replace("image/", ""),
    };
  }
  return { assets, ids };
}

/** Gym's GenerationContract for this run (provenance decides what is known). */
async function generationContract(inputs: GymResponseInputs): Promise<Record<string, unknown>> {
  const p = inputs.evidence.provenance;
  const identity = (value: string | null | undefined) => value ?? "server-authoritative-unavailable";
  const sampling: Record<string, unknown> = {
    model: inputs.model,
    parallel_tool_calls: true,
    tool_choice: "auto",
    tools: inputs.tools,
    ...inputs.params,
  };
  if (inputs.instructions !== undefined) sampling.instructions = inputs.instructions;
  if (inputs.maxOutputTokens !== undefined) sampling.max_output_tokens = inputs.maxOutputTokens;
  if (inputs.temperature !== undefined) sampling.temperature = inputs.temperature;
  const components = {
    model_contract_id: await stableId("model-contract", { type: "responses_api_models", name: inputs.model }),
    tokenizer_contract_id: await stableId("tokenizer-contract", identity(p?.tokenizer)),
    template_contract_id: await stableId("template-contract", identity(p?.chat_template)),
    sampling_contract_id: await stableId("sampling-contract", sampling),
    processor_contract_id: await stableId("processor-contract", identity(p?.processor)),
    compaction_policy_id: compactionPolicyId(contextHistoryOf(inputs.compaction)),
  };
  const reasons = p?.incomplete_reasons ?? [
    "exact_tokenizer_identity_not_reported_by_generation_server",
    "exact_chat_template_identity_not_reported_by_generation_server",
    "exact_multimodal_processor_fingerprint_not_reported_by_generation_server",
  ];
  return {
    schema_version: 1,
    ...components,
    generation_contract_id: await stableId("generation-contract", await canonicalDigest(components)),
    loss_normalization: "global_action_token_mean",
    training_eligible: reasons.length === 0,
    incomplete_reasons: reasons,
  };
}

/** The logical output: every entry after the initial context, token fields on each call's last output item. */
function logicalOutput(inputs: GymResponseInputs): Record<string, unknown>[] {
  const tokensAt = new Map<number, CallEvidence>();
  inputs.turns.forEach((t, i) => {
    if (t.output.length) tokensAt.set(t.output[t.output.length - 1], inputs.evidence.calls[i]);
  });
  const out: Record<string, unknown>[] = [];
  for (const entry of inputs.entries) {
    if (entry.origin === "initial") continue;
    const item = entryItem(entry, inputs.media) as Record<string, unknown> | null;
    if (!item) continue;
    const call = tokensAt.get(entry.seq);
    out.push(
      call
        ? {
            ...item,
            prompt_token_ids: call.prompt_token_ids,
            generation_token_ids: call.generation_token_ids,
            generation_log_probs: call.generation_log_probs,
          }
        : item,
    );
  }
  return out;
}

function usageOf(turns: readonly TurnRecord[]): Record<string, unknown> | null {
  const with_ = turns.filter((t) => t.usage);
  if (!with_.length) return null;
  const sum = (k: "input_tokens" | "output_tokens" | "total_tokens") => with_.reduce((n, t) => n + t.usage![k], 0);
  return {
    input_tokens: sum("input_tokens"),
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: sum("output_tokens"),
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: sum("total_tokens"),
  };
}

/** The NeMoGymResponse fields around the output (openai Response defaults where this runtime has no value). */
function responseFields(inputs: GymResponseInputs, output: Record<string, unknown>[]): GymResponse {
  const last = inputs.evidence.calls[inputs.evidence.calls.length - 1];
  const lastTurn = inputs.turns[inputs.turns.length - 1];
  return {
    id: last?.response_id ?? `resp_${inputs.evidence.rollout_id}`,
    created_at: 0,
    error: null,
    incomplete_details: inputs.partial
      ? { reason: "context_guard_rejected" }
      : lastTurn?.finishReason
        ? { reason: lastTurn.finishReason }
        : null,
    instructions: inputs.instructions ?? null,
    metadata: null,
    model: inputs.model,
    object: "response",
    output,
    parallel_tool_calls: true,
    temperature: inputs.temperature ?? null,
    tool_choice: "auto",
    tools: [...inputs.tools],
    top_p: null,
    background: null,
    conversation: null,
    max_output_tokens: inputs.maxOutputTokens ?? null,
    max_tool_calls: null,
    previous_response_id: null,
    prompt: null,
    prompt_cache_key: null,
    reasoning: null,
    safety_identifier: null,
    service_tier: null,
    status: inputs.partial || lastTurn?.finishReason ? "incomplete" : "completed",
    text: null,
    top_logprobs: null,
    truncation: null,
    usage: usageOf(inputs.turns),
    user: null,
  };
}

const turnId = (call: CallEvidence) => call.turn + 1;
const pad6 = (n: number) => String(n).padStart(6, "0");

/** Gym's response for a run (see the module comment). */
export async function gymResponse(inputs: GymResponseInputs): Promise<GymResponse> {
  const output = logicalOutput(inputs);
  const response = responseFields(inputs, output);
  if (!inputs.compaction) return response;
  const e = inputs.evidence;
  const rolloutId = e.rollout_id;
  const { assets, ids: gymMediaId } = await mediaAssets(inputs);
  const contract = await generationContract(inputs);
  const contractId = contract.generation_contract_id as string;
  const policy = inputs.compaction.policy.identity;
  const chunked = inputs.compaction.schedule.type === "turn_chunked";
  const scheduleDigest = chunked ? canonicalDigestSync(contextHistoryOf(inputs.compaction).schedule) : null;
  const chunkIdOf = async (block: number) =>
    `chunk-${pad6(block)}-` +
    (
      await canonicalDigest({ rollout_id: rolloutId, block_index: block, schedule_config_digest: scheduleDigest })
    ).slice(0, 12);
  const byCall = new Map(e.calls.map((c) => [c.call_id, c]));
  // Each call's policy decision over Gym's parts; under turnChunked, its chunk's base decision
  // (its first call's) with the tail kept, as Gym's chunked controller decides.
  const parts = new GymPartIndex(inputs.media);
  const own = inputs.turns.map((t, i) =>
    policyDecision(
      policy,
      inputs.compaction!.policy.config,
      t.plan,
      inputs.entries.filter((x) => x.seq < (t.output[0] ?? Infinity)),
      parts,
      turnId(e.calls[i]),
    ),
  );
  const baseOfChunk = new Map<number, PolicyDecisionRecord>();
  const decisions = own.map((d, i) => {
    const chunk = e.calls[i].decision?.chunk;
    if (!chunked || chunk === null || chunk === undefined) return d;
    if (!baseOfChunk.has(chunk)) baseOfChunk.set(chunk, d);
    return chunkedDecision(baseOfChunk.get(chunk)!, d);
  });
  const lineageDeltas: TransformationLineageDeltaRecord[] = [];
  let state = new Map<string, UnitLineageRecord>();
  for (const d of decisions) {
    const next = lineageDelta(d.lineage, state, lineageDeltas[lineageDeltas.length - 1]?.transformation_id ?? null);
    lineageDeltas.push(next.delta);
    state = next.state;
  }

  const events = new Map<string, Record<string, unknown>>();
  for (const b of e.boundaries) {
    const first = byCall.get(b.first_call)!;
    const previous = byCall.get(b.previous_call)!;
    const step = turnId(first);
    const decision = decisions[e.calls.indexOf(first)];
    const [prev, cur] = [hex(previous.view_digest), hex(first.view_digest)];
    const remaining = new Map<string, number>();
    for (const m of previous.media) remaining.set(m, (remaining.get(m) ?? 0) + 1);
    for (const m of first.media) remaining.set(m, (remaining.get(m) ?? 0) - 1);
    events.set(b.first_call, {
      event_id:
        `boundary-${pad6(step)}-` +
        (
          await canonicalDigest({
            rollout_id: rolloutId,
            applies_to_step: step,
            previous_view_digest: prev,
            current_view_digest: cur,
          })
        ).slice(0, 12),
      trigger_after_step: step - 1,
      applies_to_step: step,
      reason: "history_policy_rewrite",
      policy_name: policy.name,
      policy_version: policy.version,
      config_digest: policy.config_digest,
      previous_view_digest: prev,
      current_view_digest: cur,
      changed_part_ranges: decision.changed_part_ranges,
      retained_part_count: decision.retained_part_count,
      omitted_part_count: decision.omitted_part_count,
      retained_media_count: first.media.length,
      removed_media_count: [...remaining.values()].reduce((n, k) => n + Math.max(0, k), 0),
      inserted_artifact_ids: decision.inserted_artifact_ids,
      schedule_name: chunked ? "turn_chunked_recency" : "per_action",
      schedule_version: "1",
      schedule_config_digest: scheduleDigest,
      chunk_id:
        chunked && first.decision?.chunk !== null && first.decision?.chunk !== undefined
          ? await chunkIdOf(first.decision.chunk)
          : null,
      block_index: chunked ? (first.decision?.chunk ?? null) : null,
    });
  }

  const segmentIds = new Map<number, string>();
  const completions: Record<string, unknown>[] = [];
  for (const [i, call] of e.calls.entries()) {
    const step = turnId(call);
    const viewDigest = hex(call.view_digest);
    const decision = decisions[i];
    if (!segmentIds.has(call.segment))
      segmentIds.set(call.segment, await stableId("segment", rolloutId, call.segment, call.segment, viewDigest));
    const prepared = await stableId("prepared-request", rolloutId, step, viewDigest, contractId);
    const completionId =
      `completion-${pad6(step)}-` +
      (
        await sha256Hex(
          `{"prompt_token_ids":${JSON.stringify(call.prompt_token_ids)},"rollout_id":${JSON.stringify(rolloutId)},` +
            `"sampled_token_ids":${JSON.stringify(call.generation_token_ids)},"turn_id":${step}}`,
        )
      ).slice(0, 12);
    const actionId = `action-${pad6(step)}`;
    const mediaIds = call.media.map((m) => gymMediaId.get(m)!);
    const requestId = await stableId("request", prepared, call.prompt_token_ids, mediaIds);
    const modelCallId = await stableId("model-call", requestId, completionId);
    const spans =
      e.image_placeholder_token === null
        ? null
        : mediaSpans(`call ${call.call_id}`, call.prompt_token_ids, call.media, e.image_placeholder_token);
    const seen = new Map<string, number>();
    completions.push({
      rollout_id: rolloutId,
      completion_id: completionId,
      action_id: actionId,
      turn_id: step,
      prepared_request_id: prepared,
      request_id: requestId,
      context_epoch: call.segment,
      segment_index: call.segment,
      segment_id: segmentIds.get(call.segment)!,
      expected_append_compatible: call.parent_call !== null,
      compaction_event_id: (events.get(call.call_id)?.event_id as string | undefined) ?? null,
      prompt_token_ids: call.prompt_token_ids,
      sampled_token_ids: call.generation_token_ids,
      sampled_logprobs: call.generation_log_probs,
      finish_reason: inputs.turns[i]?.finishReason ?? null,
      media_ids: mediaIds,
      policy_decision: {
        policy_name: policy.name,
        policy_version: policy.version,
        config_digest: policy.config_digest,
        decision_turn: step,
        selection_digest: decision.selection_digest,
        transformation_id: decision.lineage.transformation_id,
      },
      generation_contract_id: contractId,
      policy_output_spans: [
        {
          policy_output_span_id: await stableId(
            "policy-output-span",
            modelCallId,
            actionId,
            call.generation_token_ids.length,
          ),
          model_call_id: modelCallId,
          action_ids: [actionId],
          start: 0,
          end: call.generation_token_ids.length,
          eligible: true,
          old_logprobs_alignment: "sampled_tokens",
        },
      ],
      media_occurrences: mediaIds.map((mediaId, k) => {
        const ordinal = seen.get(mediaId) ?? 0;
        seen.set(mediaId, ordinal + 1);
        const span = spans?.[k];
        return {
          media_id: mediaId,
          occurrence_ordinal: ordinal,
          model_call_id: modelCallId,
          placeholder_span_or_position: span ? [span.offset, span.offset + span.length] : null,
          processed_dimensions: null,
          model_specific_sidecars: {},
        };
      }),
      processor_fingerprint: e.provenance?.processor ?? null,
      eligible: true,
      evidence_source: "generation_response",
    });
  }

  const completionOf = new Map(e.calls.map((c, i) => [c.call_id, completions[i]]));
  const chunkRecords: Record<string, unknown>[] = [];
  for (const chunk of e.chunks) {
    if (chunk.first_call === null) continue;
    const inChunk = e.calls.filter((c) => c.decision?.chunk === chunk.chunk);
    const first = inChunk[0];
    const closedByGuard =
      chunk.closed_by === "guard"
        ? e.guards.find((g) => g.outcome !== "admit" && byCall.get(g.call_id)?.decision?.chunk === chunk.chunk + 1)
        : undefined;
    const guardName = closedByGuard?.rounds[0].checks.find((c) => !c.ok)?.guard;
    chunkRecords.push({
      chunk_id: await chunkIdOf(chunk.chunk),
      block_index: chunk.chunk,
      eligible_action_ids: inChunk.map((c) => `action-${pad6(turnId(c))}`),
      completion_evidence_ids: inChunk.map((c) => completionOf.get(c.call_id)!.completion_id),
      first_action_turn: turnId(first),
      last_action_turn: turnId(inChunk[inChunk.length - 1]),
      configured_actions_per_chunk:
        inputs.compaction.schedule.type === "turn_chunked" ? inputs.compaction.schedule.actionsPerChunk : 1,
      policy_config_digest: policy.config_digest,
      actual_action_count: inChunk.length,
      early_close_reason:
        chunk.closed_by === "full"
          ? null
          : chunk.closed_by === "guard"
            ? `guard:${guardName ?? "unknown"}`
            : "terminal",
      active_observation_group_count: first.view.retained.imageGroups,
      active_raw_image_count: first.view.retained.images,
    });
  }

  const guardRecords: Record<string, unknown>[] = [];
  for (const g of e.guards) {
    const call = byCall.get(g.call_id);
    const turn = call ? turnId(call) : e.calls.length + 1;
    // The chunk the first round measured (the one a guard closes early), as Gym reads it.
    const chunk = g.chunk !== undefined ? g.chunk : (call?.decision?.chunk ?? null);
    const before = inputs.entries.filter((x) => x.origin !== "model" && isImageGroup(x) && imagesOf(x).length > 0);
    const latest = Math.max(
      -1,
      ...inputs.entries.filter((x) => x.origin === "model" && x.turn < turn - 1).map((x) => x.turn),
    );
    const pending = before
      .filter((x) => (latest < 0 ? x.origin === "initial" : x.turn === latest))
      .map((x) => `observation-${pad6(x.seq)}`);
    for (const [k, check] of g.rounds[0].checks.entries()) {
      const after = g.rounds[1]?.checks[k];
      guardRecords.push({
        rollout_id: rolloutId,
        chunk_id: chunked && chunk !== null ? await chunkIdOf(chunk) : null,
        applies_to_step: turn,
        completed_action_count: g.completed_actions ?? 0,
        pending_observation_group_ids: pending,
        guard_name: check.guard,
        measured_value: check.measured,
        configured_limit: check.limit,
        early_chunk_close: g.rounds.length > 1,
        post_compaction_value: after ? after.measured : null,
        decision: check.ok ? "admit" : after?.ok ? "admit_after_compaction" : "reject",
      });
    }
  }

  const agentInput =
    inputs.agentInput ??
    inputs.entries
      .filter((x) => x.origin === "initial")
      .flatMap((x) => {
        const item = entryItem(x, inputs.media) as InputItem | null;
        return item ? [item] : [];
      });
  return {
    ...response,
    agent_input: agentInput,
    seed_obs: [],
    media_assets: assets,
    completion_evidence: completions,
    final_policy_decision: decisions[decisions.length - 1] ?? null,
    lineage_deltas: lineageDeltas,
    chunk_records: chunkRecords,
    boundary_events: [...events.values()],
    guard_records: guardRecords,
    context_compaction_contract: {
      schema_version: 2,
      mode: "exact_trace_authority",
      rollout_id: rolloutId,
      group_id: null,
      task_id: null,
      rollout_index: null,
      attempt_index: null,
      generation_contract: contract,
    },
  };
}

/**
 * Gym's `build_transport_response`: what `/run` returns after `/verify` succeeded. The completion
 * records lose their token arrays (which stay on the output items) and gain the digest of them;
 * images leave the output (they are in `media_assets`); the input copies are dropped.
 */
export async function transportResponse(response: GymResponse): Promise<GymResponse> {
  const {
    agent_input: _a,
    seed_obs: _s,
    completion_evidence,
    context_compaction_contract,
    ...rest
  } = response as GymResponse & {
    completion_evidence: Record<string, unknown>[];
    context_compaction_contract: Record<string, unknown>;
  };
  const output = rest.output.map((item) =>
    Array.isArray(item.content)
      ? {
          ...item,
          content: (item.content as { type?: string }[]).filter(
            (p) => !["input_image", "image", "image_url"].includes(p?.type ?? ""),
          ),
        }
      : item,
  );
  const metadata: Record<string, unknown>[] = [];
  for (const c of completion_evidence) {
    const { prompt_token_ids, sampled_token_ids, sampled_logprobs, ...fields } = c;
    const digest = await sha256Hex(
      pythonJsonWithFloats({ prompt_token_ids, sampled_token_ids, sampled_logprobs }, ["sampled_logprobs"]),
    );
    metadata.push({ ...fields, generation_evidence_digest: digest });
  }
  return {
    ...rest,
    output,
    model_call_metadata: metadata,
    context_compaction_contract: { ...context_compaction_contract, schema_version: 3 },
  };
}
