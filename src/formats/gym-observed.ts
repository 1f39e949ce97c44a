// `gym-observed`: a NeMo Gym rollout row with a multi-agent capture. Ownership comes only from
// `ng_agent_observations.records[]` of kind `agent_invocation` (each lists its model calls); token
// arrays come from the rollout's token entries (`<rollout_id>.tokens.jsonl`). Ledger order is the
// entries' `created_at`, then file order. Entries no invocation lists are tries nobody kept
// (`kept: false`, diagnostic `unowned_call`, agent `unowned` of mode `unowned`). Other record
// kinds and `gaps[]` only add diagnostics.
import type { AgentInfo, CanonicalCall, Diagnostic, Rollout } from "../types.js";
import type { FormatContext, TokenEntries } from "./types.js";
import {
  FormatError,
  field,
  gymIndexId,
  isNonEmptyString,
  isObject,
  requireArray,
  requireObject,
  requireReward,
  requireTokenArray,
  show,
  type JsonObject,
} from "./values.js";

/**
 * Ids and names from the data, quoted in rejection details (they become one-line notes on
 * stderr, which a newline in an id would split). Diagnostics only ever travel inside JSON.
 */
const q = (value: unknown): string => JSON.stringify(value) ?? String(value);

export function isGymObserved(value: JsonObject): boolean {
  const observations = field(value, "ng_agent_observations");
  return isObject(observations) && Array.isArray(field(observations, "records"));
}

interface TokenEntry {
  id: string;
  line: number;
  createdAt: Time;
  order: number;
  value: JsonObject;
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
): { rollout: Rollout; diagnostics: Diagnostic[]; sources: Map<string, string> } {
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
  const entries = readEntries(file);
  const byId = new Map(entries.map((e) => [e.id, e]));
  const resolve = refResolver(captureCalls, byId, file.file);
  const { invocations, owner, recordNotes } = readRecords(records, resolve, byId, file.file);
  const diagnostics: Diagnostic[] = [];
  const unownedAgent = freshAgentId("unowned", invocations);
  const { calls, sources, anyUnowned } = buildCalls(entries, owner, unownedAgent, file.file, diagnostics);
  const agents = buildAgents(invocations, diagnostics);
  if (anyUnowned) agents.push({ id: unownedAgent, parent: null, mode: "unowned" });

  // One push per note: a capture may list more gaps than a call takes arguments.
  const notes = [recordNotes, gapNotes(observations, "ng_agent_observations"), isObject(capture) ? gapNotes(capture, "ng_model_call_capture") : []];
  for (const list of notes) for (const note of list) diagnostics.push(note);
  return { rollout: { rollout_id: rolloutId, reward, agents, calls }, diagnostics, sources };
}

/**
 * The records: agent invocations (each with the model calls it lists, which must have token
 * entries and be listed once), compaction notes, and a count of records of other kinds.
 */
function readRecords(
  records: unknown[],
  resolve: (ref: unknown, where: string) => string,
  byId: ReadonlyMap<string, unknown>,
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
      if (!Array.isArray(refs)) throw new FormatError("missing_field", `${where}.model_calls is ${show(refs)}, expected an array`);
      refs.forEach((ref, j) => {
        const refWhere = `${where}.model_calls[${j}] (invocation ${q(invocation.id)})`;
        const callId = resolve(ref, refWhere);
        const previous = ownerWhere.get(callId);
        if (previous !== undefined) {
          throw new FormatError("duplicate_model_call", `${refWhere}: model call ${q(callId)} is already listed at ${previous}`);
        }
        if (!byId.has(callId)) {
          throw new FormatError("missing_token_entry", `${refWhere}: model call ${q(callId)} has no entry in ${file}`);
        }
        owner.set(callId, invocation.id);
        ownerWhere.set(callId, refWhere);
      });
    } else if (kind === "context_compaction") {
      recordNotes.push(compactionNote(record, resolve));
    } else {
      const name = typeof kind === "string" && kind.length > 0 ? kind : "unknown";
      otherKinds.set(name, (otherKinds.get(name) ?? 0) + 1);
    }
  });
  if (otherKinds.size > 0) {
    const detail = [...otherKinds].map(([kind, n]) => `${kind}: ${n}`).join(", ");
    recordNotes.push({ code: "observation_records", call: null, detail });
  }
  return { invocations, owner, recordNotes };
}

/**
 * One canonical call per token entry, in ledger order, in the agent whose invocation lists it; an
 * entry nobody lists is a try nobody kept (`unowned_call`, in `unownedAgent`).
 */
function buildCalls(
  entries: readonly TokenEntry[],
  owner: ReadonlyMap<string, string>,
  unownedAgent: string,
  file: string,
  diagnostics: Diagnostic[],
): { calls: CanonicalCall[]; sources: Map<string, string>; anyUnowned: boolean } {
  let anyUnowned = false;
  const sources = new Map<string, string>();
  const calls: CanonicalCall[] = entries.map((entry) => {
    sources.set(entry.id, `${file}:${entry.line}`);
    const agent = owner.get(entry.id);
    const call: CanonicalCall = {
      id: entry.id,
      prompt_token_ids: field(entry.value, "prompt_token_ids") as CanonicalCall["prompt_token_ids"],
      generation_token_ids: field(entry.value, "generation_token_ids") as CanonicalCall["generation_token_ids"],
      generation_log_probs: field(entry.value, "generation_log_probs") as CanonicalCall["generation_log_probs"],
    };
    if (agent === undefined) {
      // The core checks every call's agent against `agents`, so a try nobody kept goes to an
      // agent of its own rather than to a guessed owner.
      call.kept = false;
      call.agent = unownedAgent;
      anyUnowned = true;
      diagnostics.push({ code: "unowned_call", call: entry.id, detail: `${file}:${entry.line}: no agent_invocation lists it` });
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
  const fromIndexes = gymIndexId(row);
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
  if (!isNonEmptyString(id)) throw new FormatError("missing_field", `${where}.invocation_id is ${show(id)}, expected a non-empty string`);
  const twin = seen.find((inv) => inv.id === id);
  if (twin) throw new FormatError("duplicate_invocation", `${where}: invocation ${q(id)} is already recorded at ${twin.where}`);
  const parent = field(record, "parent_invocation_id") ?? null;
  if (parent !== null && !isNonEmptyString(parent)) {
    throw new FormatError("missing_field", `${where}.parent_invocation_id is ${show(parent)}, expected a string or null`);
  }
  const mode = field(record, "mode");
  return { id, parent, mode: typeof mode === "string" ? mode : null, where };
}

/** Parses and orders the token entries: by `created_at`, then file order (a stable sort). */
function readEntries(file: TokenEntries): TokenEntry[] {
  const entries: TokenEntry[] = [];
  const lineOf = new Map<string, number>();
  for (const line of file.lines) {
    const where = `${file.file}:${line.line}`;
    if ("error" in line) throw new FormatError("malformed_token_entry", `${where}: ${line.error}`);
    const value = line.value;
    if (!isObject(value)) throw new FormatError("missing_field", `${where}: token entry is ${show(value)}, expected an object`);
    const id = field(value, "model_call_id");
    if (!isNonEmptyString(id)) throw new FormatError("missing_field", `${where}: model_call_id is ${show(id)}, expected a non-empty string`);
    const label = `${where} (call ${q(id)}): `;
    requireTokenArray(value, "prompt_token_ids", label);
    requireTokenArray(value, "generation_token_ids", label);
    requireTokenArray(value, "generation_log_probs", label);
    const previous = lineOf.get(id);
    if (previous !== undefined) {
      throw new FormatError("duplicate_call_id", `${label}model_call_id repeats line ${previous}`, "duplicate_call_id");
    }
    lineOf.set(id, line.line);
    entries.push({ id, line: line.line, createdAt: timeOf(field(value, "created_at"), label), order: entries.length, value });
  }
  return entries.sort((a, b) => compareTimes(a.createdAt, b.createdAt) || a.order - b.order);
}

/** A point in time: whole epoch seconds, and the digits after the decimal point (exact). */
interface Time {
  seconds: number;
  fraction: string;
}

function compareTimes(a: Time, b: Time): number {
  if (a.seconds !== b.seconds) return a.seconds - b.seconds;
  const digits = Math.max(a.fraction.length, b.fraction.length);
  const x = a.fraction.padEnd(digits, "0");
  const y = b.fraction.padEnd(digits, "0");
  return x < y ? -1 : x > y ? 1 : 0;
}

// Date and time with seconds and a zone (Z or ±hh:mm); any number of fractional digits.
const ISO_8601 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(?:([Zz])|([+-])(\d{2}):?(\d{2}))$/;

/**
 * `created_at` as epoch seconds (a number) or an ISO 8601 time with a zone. Read exactly, not
 * through Date.parse: that keeps milliseconds only (calls a microsecond apart would tie), reads
 * a time without a zone in the machine's zone, and takes strings like "5" for a date.
 */
function timeOf(value: unknown, label: string): Time {
  if (typeof value === "number" && Number.isFinite(value)) {
    // The digits as written (JSON numbers read back to their shortest text): 1764478800.1 and
    // "...T05:00:00.1Z" are the same instant, and 1.9999999999 stays before 2.
    const plain = /^(\d+)(?:\.(\d+))?$/.exec(String(value));
    if (plain !== null) return { seconds: Number(plain[1]), fraction: plain[2] ?? "" };
    // Negative, or in exponent form: rare enough for nanoseconds. A fraction that rounds up to a
    // whole second (-1e-10 is 0.9999999999 past -1) is the next second.
    const seconds = Math.floor(value);
    const fraction = (value - seconds).toFixed(9);
    return fraction.startsWith("1") ? { seconds: seconds + 1, fraction: "" } : { seconds, fraction: fraction.slice(2) };
  }
  const match = typeof value === "string" ? ISO_8601.exec(value) : null;
  if (match !== null) {
    const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number);
    const offset = match[8] !== undefined ? 0 : (match[9] === "-" ? -1 : 1) * (Number(match[10]) * 60 + Number(match[11])) * 60;
    const date = new Date(0);
    date.setUTCFullYear(year, month - 1, day); // (Date.UTC would read years 0–99 as 1900–1999)
    date.setUTCHours(hour, minute);
    // Date rolls over out-of-range fields (month 13, day 32): only real dates are times. Seconds
    // are added after that check, so a leap second (23:59:60 on a month's last day) is one too.
    if (date.getUTCMonth() === month - 1 && date.getUTCDate() === day && hour < 24 && minute < 60 && second <= 60) {
      return { seconds: date.getTime() / 1000 + second - offset, fraction: match[7] ?? "" };
    }
  }
  throw new FormatError("missing_field", `${label}created_at is ${show(value)}, expected a number or an ISO 8601 time with a zone`);
}

/**
 * A model_ref as a key: a string as it is, `{ type, name }` as "type/name" (strings, either may
 * be missing); null when it is anything else.
 */
function refKey(ref: unknown): string | null {
  if (isNonEmptyString(ref)) return ref;
  if (!isObject(ref)) return null;
  const type = field(ref, "type") ?? "";
  const name = field(ref, "name") ?? "";
  return typeof type === "string" && typeof name === "string" ? `${type}/${name}` : null;
}

/**
 * Resolves a model-call ref to a model_call_id: `{model_call_id}` directly (it must be known to the
 * capture or the token entries), `{model_ref, response_id}` through `ng_model_call_capture.calls[]`.
 */
function refResolver(captureCalls: unknown[], entries: Map<string, TokenEntry>, tokenFile: string) {
  const capturedIds = new Set<string>();
  const byResponse = new Map<string, { index: number; call: JsonObject }[]>();
  captureCalls.forEach((call, index) => {
    if (!isObject(call)) return;
    const id = field(call, "model_call_id");
    if (isNonEmptyString(id)) capturedIds.add(id);
    const responseId = field(call, "response_id");
    if (isNonEmptyString(responseId)) {
      const list = byResponse.get(responseId) ?? [];
      list.push({ index, call });
      byResponse.set(responseId, list);
    }
  });

  return (ref: unknown, where: string): string => {
    if (!isObject(ref)) throw new FormatError("missing_field", `${where} is ${show(ref)}, expected a model-call ref object`);
    const id = field(ref, "model_call_id");
    if (isNonEmptyString(id)) {
      if (!capturedIds.has(id) && !entries.has(id)) {
        throw new FormatError("unknown_model_call", `${where}: model_call_id ${q(id)} is in neither ng_model_call_capture.calls nor ${tokenFile}`);
      }
      return id;
    }
    const responseId = field(ref, "response_id");
    if (!isNonEmptyString(responseId)) {
      throw new FormatError("missing_field", `${where}: needs model_call_id, or model_ref and response_id`);
    }
    const modelRef = field(ref, "model_ref");
    const model = refKey(modelRef);
    if (modelRef !== undefined && model === null) {
      throw new FormatError("missing_field", `${where}: model_ref is ${show(modelRef)}, expected a name or { type, name } strings`);
    }
    const matches = (byResponse.get(responseId) ?? []).filter((m) => model === null || refKey(field(m.call, "model_ref")) === model);
    const named = model === null ? "" : ` (model_ref ${q(model)})`;
    if (matches.length === 0) {
      throw new FormatError("unknown_model_call", `${where}: response_id ${q(responseId)}${named} matches no ng_model_call_capture.calls entry`);
    }
    if (matches.length > 1) {
      const at = matches.map((m) => m.index).join(", ");
      throw new FormatError("ambiguous_model_call", `${where}: response_id ${q(responseId)}${named} matches ng_model_call_capture.calls[${at}]`);
    }
    const resolved = field(matches[0].call, "model_call_id");
    if (!isNonEmptyString(resolved)) {
      throw new FormatError("missing_field", `${where}: ng_model_call_capture.calls[${matches[0].index}].model_call_id is ${show(resolved)}`);
    }
    return resolved;
  };
}

/** A compaction record names its summary call when it can; it never decides ownership. */
function compactionNote(record: JsonObject, resolve: (ref: unknown, where: string) => string): Diagnostic {
  const invocation = field(record, "invocation_id");
  const trigger = field(record, "trigger");
  const refs = field(record, "model_calls");
  let call: string | null = null;
  if (Array.isArray(refs) && refs.length > 0) {
    try {
      call = resolve(refs[0], "context_compaction.model_calls[0]");
    } catch {
      call = null; // an unresolved summary ref is a gap in the evidence, not a broken rollout
    }
  }
  let detail = `invocation ${isNonEmptyString(invocation) ? invocation : "unknown"}`;
  if (isNonEmptyString(trigger)) detail += `, trigger ${trigger}`;
  return { code: "context_compaction", call, detail };
}

function gapNotes(holder: JsonObject, where: string): Diagnostic[] {
  const gaps = field(holder, "gaps");
  if (!Array.isArray(gaps)) return [];
  return gaps.map((gap, i) => {
    const code = isObject(gap) ? field(gap, "code") : undefined;
    if (!isObject(gap) || !isNonEmptyString(code)) {
      return { code: "observation_gap", call: null, detail: `${where}.gaps[${i}] is ${show(gap)}` };
    }
    const parts: string[] = [];
    const invocation = field(gap, "invocation_id");
    const detail = field(gap, "detail");
    if (isNonEmptyString(invocation)) parts.push(`invocation ${invocation}`);
    if (isNonEmptyString(detail)) parts.push(detail);
    const note: Diagnostic = { code, call: null };
    if (parts.length > 0) note.detail = parts.join(": ");
    return note;
  });
}
