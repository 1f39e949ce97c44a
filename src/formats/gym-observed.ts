// `gym-observed`: a NeMo Gym rollout row with a multi-agent capture. Ownership comes only from
// `ng_agent_observations.records[]` of kind `agent_invocation` (each lists its model calls); token
// arrays come from the rollout's token entries (`<rollout_id>.tokens.jsonl`, TokenEntry schema 1
// to 5, read in ./gym-capture/). Ledger order is the entries' `created_at`, then file order.
// Entries no invocation lists are tries nobody kept (`kept: false`, diagnostic `unowned_call`,
// agent `unowned` of mode `unowned`). Calls link by exact tokens in the planner; Gym's recorded
// lineage, other record kinds and `gaps[]` only add diagnostics. docs/formats-gym-observed.md
// says all of it.
import type { AgentInfo, CanonicalCall, Diagnostic, Rollout } from "../types.js";
import type { FormatContext } from "./types.js";
import {
  FormatError,
  field,
  gymRolloutId,
  isNonEmptyString,
  isObject,
  requireArray,
  requireObject,
  requireReward,
  show,
  type JsonObject,
} from "./values.js";
import { refResolver, type RefResolver } from "./gym-capture/model-call-refs.js";
import { compactionNote, gapNotes, recordCountsNote } from "./gym-capture/observation-notes.js";
import type { RecordedParent } from "./gym-capture/recorded-lineage.js";
import { readCapturedCalls, type CapturedCalls } from "./gym-capture/token-file.js";
import { q } from "./values.js";

export function isGymObserved(value: JsonObject): boolean {
  const observations = field(value, "ng_agent_observations");
  return isObject(observations) && Array.isArray(field(observations, "records"));
}

interface Invocation {
  id: string;
  parent: string | null;
  mode: string | null;
  where: string;
}

export function fromGymObserved(
  row: JsonObject,
  context: FormatContext,
): {
  rollout: Rollout;
  diagnostics: Diagnostic[];
  sources: Map<string, string>;
  recordedParents: Map<string, RecordedParent>;
} {
  const observations = requireObject(row, "ng_agent_observations", "");
  const records = requireArray(observations, "records", "ng_agent_observations.");
  const capture = field(row, "ng_model_call_capture");
  const listed = isObject(capture) ? field(capture, "calls") : undefined;
  const captureCalls = Array.isArray(listed) ? listed : [];
  const rolloutId = observedRolloutId(row, capture);
  const reward = requireReward(row, "");

  if (!context.tokens) {
    throw new FormatError("no_token_source", `rollout ${q(rolloutId)} needs token entries: give --tokens DIR`);
  }
  const file = context.tokens.load(rolloutId);
  if (file === null) {
    const why = context.tokens.notFound?.(rolloutId) ?? `${context.tokens.describe(rolloutId)} not found`;
    throw new FormatError("missing_token_file", `no token entries for rollout ${q(rolloutId)}: ${why}`);
  }
  const captured = readCapturedCalls(file, rolloutId);
  const tokenIds = new Set(captured.entries.map((e) => e.id));
  const resolve = refResolver(captureCalls, tokenIds, file.file);
  const { invocations, owner, recordNotes } = readRecords(records, resolve, tokenIds, file.file);
  const diagnostics: Diagnostic[] = [];
  const unownedAgent = freshAgentId("unowned", invocations);
  const { calls, sources, anyUnowned } = buildCalls(captured, owner, unownedAgent, diagnostics);
  const agents = buildAgents(invocations, diagnostics);
  if (anyUnowned) agents.push({ id: unownedAgent, parent: null, mode: "unowned" });

  // One push per note: a capture may list more gaps than a call takes arguments.
  const notes = [
    captured.notes,
    recordNotes,
    gapNotes(observations, "ng_agent_observations"),
    isObject(capture) ? gapNotes(capture, "ng_model_call_capture") : [],
  ];
  for (const list of notes) for (const note of list) diagnostics.push(note);
  return {
    rollout: { rollout_id: rolloutId, reward, agents, calls },
    diagnostics,
    sources,
    recordedParents: captured.recordedParents,
  };
}

/**
 * The records: agent invocations (each with the model calls it lists, which must have token
 * entries and be listed once), compaction notes, and a count of records of other kinds.
 */
function readRecords(
  records: unknown[],
  resolve: RefResolver,
  tokenIds: ReadonlySet<string>,
  file: string,
): { invocations: Invocation[]; owner: Map<string, string>; recordNotes: Diagnostic[] } {
  const invocations: Invocation[] = [];
  const owner = new Map<string, string>(); // model_call_id -> invocation id
  const ownerWhere = new Map<string, string>();
  const recordNotes: Diagnostic[] = [];
  const otherKinds = new Map<string, number>();
  records.forEach((record, i) => {
    const where = `ng_agent_observations.records[${i}]`;
    if (!isObject(record)) throw new FormatError("missing_field", `${where} is ${show(record)}, expected an object`);
    const kind = field(record, "kind");
    if (kind === "agent_invocation") {
      const invocation = readInvocation(record, where, invocations);
      invocations.push(invocation);
      const refs = field(record, "model_calls") ?? [];
      if (!Array.isArray(refs))
        throw new FormatError("missing_field", `${where}.model_calls is ${show(refs)}, expected an array`);
      refs.forEach((ref, j) => {
        const refWhere = `${where}.model_calls[${j}] (invocation ${q(invocation.id)})`;
        const callId = resolve(ref, refWhere);
        const previous = ownerWhere.get(callId);
        if (previous !== undefined) {
          throw new FormatError(
            "duplicate_model_call",
            `${refWhere}: model call ${q(callId)} is already listed at ${previous}`,
          );
        }
        if (!tokenIds.has(callId)) {
          throw new FormatError("missing_token_entry", `${refWhere}: model call ${q(callId)} has no entry in ${file}`);
        }
        owner.set(callId, invocation.id);
        ownerWhere.set(callId, refWhere);
      });
    } else if (kind === "context_compaction") {
      recordNotes.push(compactionNote(record, where, resolve));
    } else {
      const name = typeof kind === "string" && kind.length > 0 ? kind : "unknown";
      otherKinds.set(name, (otherKinds.get(name) ?? 0) + 1);
    }
  });
  recordNotes.push(...recordCountsNote(otherKinds));
  return { invocations, owner, recordNotes };
}

/**
 * One canonical call per token entry, in ledger order, in the agent whose invocation lists it; an
 * entry nobody lists is a try nobody kept (`unowned_call`, in `unownedAgent`).
 */
function buildCalls(
  captured: CapturedCalls,
  owner: ReadonlyMap<string, string>,
  unownedAgent: string,
  diagnostics: Diagnostic[],
): { calls: CanonicalCall[]; sources: Map<string, string>; anyUnowned: boolean } {
  let anyUnowned = false;
  const sources = new Map<string, string>();
  const calls: CanonicalCall[] = captured.entries.map((entry) => {
    sources.set(entry.id, entry.where);
    const agent = owner.get(entry.id);
    const call: CanonicalCall = {
      id: entry.id,
      // The stored arrays themselves (a delta entry's prompt is rebuilt): the planner checks them.
      prompt_token_ids: captured.prompts.get(entry.id) as CanonicalCall["prompt_token_ids"],
      generation_token_ids: entry.generation as CanonicalCall["generation_token_ids"],
      generation_log_probs: entry.logprobs as CanonicalCall["generation_log_probs"],
    };
    // Passed through as given (an `nrlre1:` envelope or nested lists): the planner validates it.
    if (entry.routedExperts !== null) Object.assign(call, { routed_experts: entry.routedExperts });
    if (agent === undefined) {
      // The core checks every call's agent against `agents`, so a try nobody kept goes to an
      // agent of its own rather than to a guessed owner.
      call.kept = false;
      call.agent = unownedAgent;
      anyUnowned = true;
      diagnostics.push({
        code: "unowned_call",
        call: entry.id,
        detail: `${entry.where}: no agent_invocation lists it`,
      });
    } else {
      call.agent = agent;
    }
    return call;
  });
  return { calls, sources, anyUnowned };
}

/** The invocations as agents; a parent without a record of its own is dropped, with a note. */
function buildAgents(invocations: readonly Invocation[], diagnostics: Diagnostic[]): AgentInfo[] {
  const known = new Set(invocations.map((inv) => inv.id));
  return invocations.map((inv) => {
    let parent = inv.parent;
    if (parent !== null && !known.has(parent)) {
      diagnostics.push({
        code: "agent_parent_missing",
        call: null,
        detail: `${inv.where}: invocation ${inv.id} names parent ${parent}, which has no agent_invocation record`,
      });
      parent = null;
    }
    const agent: AgentInfo = { id: inv.id, parent };
    if (inv.mode !== null) agent.mode = inv.mode;
    return agent;
  });
}

function observedRolloutId(row: JsonObject, capture: unknown): string {
  const fromIndexes = gymRolloutId(row);
  if (fromIndexes !== null) return fromIndexes;
  const captured = isObject(capture) ? field(capture, "rollout_id") : undefined;
  if (isNonEmptyString(captured)) return captured;
  const response = field(row, "response");
  const responseId = isObject(response) ? field(response, "id") : undefined;
  if (isNonEmptyString(responseId)) return responseId;
  throw new FormatError(
    "missing_field",
    "no rollout id: _ng_task_index/_ng_rollout_index, ng_model_call_capture.rollout_id and response.id all absent",
  );
}

function freshAgentId(base: string, invocations: Invocation[]): string {
  const taken = new Set(invocations.map((inv) => inv.id));
  let id = base;
  for (let n = 2; taken.has(id); n++) id = `${base}-${n}`;
  return id;
}

function readInvocation(record: JsonObject, where: string, seen: Invocation[]): Invocation {
  const id = field(record, "invocation_id");
  if (!isNonEmptyString(id))
    throw new FormatError("missing_field", `${where}.invocation_id is ${show(id)}, expected a non-empty string`);
  const twin = seen.find((inv) => inv.id === id);
  if (twin)
    throw new FormatError("duplicate_invocation", `${where}: invocation ${q(id)} is already recorded at ${twin.where}`);
  const parent = field(record, "parent_invocation_id") ?? null;
  if (parent !== null && !isNonEmptyString(parent)) {
    throw new FormatError(
      "missing_field",
      `${where}.parent_invocation_id is ${show(parent)}, expected a string or null`,
    );
  }
  const mode = field(record, "mode");
  return { id, parent, mode: typeof mode === "string" ? mode : null, where };
}
