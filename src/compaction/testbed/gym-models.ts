// The checks Gym's compaction agent makes when it validates a ContextCompactedResponse (PR #2616,
// `ContextCompactedResponse.model_validate` in `/run`): required fields of every record, the
// models that forbid extra keys, and the literals. The test bed's resources server answers 422 to
// a `/verify` whose response would fail them, naming the field, as pydantic would.

type Obj = Record<string, unknown>;

/** A field Gym's models would refuse, as pydantic's `loc` and `msg`. */
export class GymModelError extends Error {
  constructor(
    readonly loc: (string | number)[],
    readonly msg: string,
  ) {
    super(`${loc.join(".")}: ${msg}`);
  }
}

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const isInt = (v: unknown, min = Number.NEGATIVE_INFINITY) => Number.isSafeInteger(v) && (v as number) >= min;

interface Model {
  required: Record<string, (v: unknown) => boolean>;
  optional?: Record<string, (v: unknown) => boolean>;
  /** `extra="forbid"`. */
  forbid?: boolean;
}

const str = (v: unknown) => typeof v === "string";
const strOrNull = (v: unknown) => v === null || typeof v === "string";
const bool = (v: unknown) => typeof v === "boolean";
const int = (min?: number) => (v: unknown) => isInt(v, min);
const intOrNull = (min?: number) => (v: unknown) => v === null || isInt(v, min);
const strings = (v: unknown) => Array.isArray(v) && v.every(str);
const ints = (v: unknown) => Array.isArray(v) && v.every((x) => isInt(x));
const numbers = (v: unknown) => Array.isArray(v) && v.every((x) => typeof x === "number");
const oneOf =
  (...values: unknown[]) =>
  (v: unknown) =>
    values.includes(v);
const list = (v: unknown) => Array.isArray(v);
const pairs = (v: unknown) => Array.isArray(v) && v.every((p) => Array.isArray(p) && p.length === 2 && p.every(str));

const UNIT: Model = {
  required: {
    source_unit_id: str,
    source_digest: str,
    disposition: oneOf("kept", "dropped", "replaced", "summarized", "transformed"),
    output_unit_ids: strings,
    output_digests: strings,
  },
};
const LINEAGE_COMMON = {
  transformation_id: str,
  transformation_type: str,
  transformation_version: str,
  configuration_digest: str,
  deterministic: bool,
  lossy: bool,
  generator_contract_id: strOrNull,
  validator_result: oneOf("passed"),
};
const LINEAGE: Model = { required: { ...LINEAGE_COMMON, unit_records: list } };
const DELTA: Model = {
  required: {
    ...LINEAGE_COMMON,
    parent_transformation_id: strOrNull,
    unit_upserts: list,
    source_unit_count: int(0),
    state_digest: str,
  },
};
const DECISION: Model = {
  required: {
    policy_name: str,
    policy_version: str,
    config_digest: str,
    protected_part_ids: strings,
    changed_part_ranges: pairs,
    retained_part_count: int(0),
    omitted_part_count: int(0),
    selection_digest: str,
    inserted_artifact_ids: strings,
    decision_turn: int(),
    lineage: isObj,
  },
};
const DECISION_EVIDENCE: Model = {
  forbid: true,
  required: {
    policy_name: str,
    policy_version: str,
    config_digest: str,
    decision_turn: int(1),
    selection_digest: str,
    transformation_id: str,
  },
};
const COMPLETION: Model = {
  forbid: true,
  required: {
    rollout_id: str,
    completion_id: str,
    action_id: str,
    turn_id: int(1),
    prepared_request_id: str,
    request_id: str,
    context_epoch: int(0),
    segment_index: int(0),
    segment_id: str,
    expected_append_compatible: bool,
    prompt_token_ids: ints,
    sampled_token_ids: ints,
    sampled_logprobs: numbers,
    media_ids: strings,
    policy_decision: isObj,
    generation_contract_id: str,
    policy_output_spans: list,
    media_occurrences: list,
  },
  optional: {
    compaction_event_id: strOrNull,
    finish_reason: strOrNull,
    processor_fingerprint: strOrNull,
    eligible: bool,
    evidence_source: oneOf("generation_response"),
  },
};
const CHUNK: Model = {
  required: {
    chunk_id: str,
    block_index: int(0),
    eligible_action_ids: strings,
    completion_evidence_ids: strings,
    first_action_turn: int(),
    last_action_turn: int(),
    configured_actions_per_chunk: int(1),
    policy_config_digest: str,
    actual_action_count: int(0),
    early_close_reason: strOrNull,
    active_observation_group_count: int(0),
    active_raw_image_count: int(0),
  },
};
const GUARD: Model = {
  required: {
    rollout_id: str,
    chunk_id: strOrNull,
    applies_to_step: int(),
    completed_action_count: int(0),
    pending_observation_group_ids: strings,
    guard_name: str,
    measured_value: int(),
    configured_limit: int(),
    early_chunk_close: bool,
    post_compaction_value: intOrNull(),
    decision: oneOf("admit", "admit_after_compaction", "reject"),
  },
};
const BOUNDARY: Model = {
  required: {
    event_id: str,
    trigger_after_step: int(),
    applies_to_step: int(),
    reason: str,
    policy_name: str,
    policy_version: str,
    config_digest: str,
    previous_view_digest: str,
    current_view_digest: str,
    changed_part_ranges: pairs,
    retained_part_count: int(0),
    omitted_part_count: int(0),
    retained_media_count: int(0),
    removed_media_count: int(0),
    inserted_artifact_ids: strings,
  },
  optional: {
    schedule_name: str,
    schedule_version: str,
    schedule_config_digest: strOrNull,
    chunk_id: strOrNull,
    block_index: intOrNull(0),
  },
};
const GENERATION_CONTRACT: Model = {
  forbid: true,
  required: {
    model_contract_id: str,
    tokenizer_contract_id: str,
    template_contract_id: str,
    sampling_contract_id: str,
    processor_contract_id: str,
    compaction_policy_id: str,
    generation_contract_id: str,
  },
  optional: {
    schema_version: oneOf(1),
    loss_normalization: oneOf("global_action_token_mean"),
    training_eligible: bool,
    incomplete_reasons: strings,
  },
};
const CONTRACT: Model = {
  forbid: true,
  required: { rollout_id: str, generation_contract: isObj },
  optional: {
    schema_version: oneOf(2),
    mode: oneOf("exact_trace_authority"),
    group_id: strOrNull,
    task_id: strOrNull,
    rollout_index: intOrNull(0),
    attempt_index: intOrNull(0),
  },
};

function check(value: unknown, model: Model, loc: (string | number)[]): Obj {
  if (!isObj(value)) throw new GymModelError(loc, "Input should be a valid dictionary or instance");
  for (const [key, ok] of Object.entries(model.required)) {
    if (!(key in value)) throw new GymModelError([...loc, key], "Field required");
    if (!ok(value[key])) throw new GymModelError([...loc, key], `Invalid value ${JSON.stringify(value[key])}`);
  }
  for (const [key, ok] of Object.entries(model.optional ?? {}))
    if (key in value && !ok(value[key]))
      throw new GymModelError([...loc, key], `Invalid value ${JSON.stringify(value[key])}`);
  if (model.forbid)
    for (const key of Object.keys(value))
      if (!(key in model.required) && !(key in (model.optional ?? {})))
        throw new GymModelError([...loc, key], "Extra inputs are not permitted");
  return value;
}

function each(
  value: unknown,
  model: Model,
  loc: (string | number)[],
  inner?: (item: Obj, at: (string | number)[]) => void,
) {
  if (!Array.isArray(value)) throw new GymModelError(loc, "Input should be a valid list");
  value.forEach((item, i) => {
    const checked = check(item, model, [...loc, i]);
    inner?.(checked, [...loc, i]);
  });
}

/** Validates a ContextCompactedResponse's compaction fields as Gym's agent does; throws GymModelError. */
export function checkCompactedResponse(response: unknown, loc: (string | number)[] = ["response"]): void {
  if (!isObj(response)) throw new GymModelError(loc, "Input should be a valid dictionary or instance");
  if (!("agent_input" in response)) throw new GymModelError([...loc, "agent_input"], "Field required");
  if (!Array.isArray(response.agent_input))
    throw new GymModelError([...loc, "agent_input"], "Input should be a valid list");
  each(response.completion_evidence ?? [], COMPLETION, [...loc, "completion_evidence"], (c, at) => {
    check(c.policy_decision, DECISION_EVIDENCE, [...at, "policy_decision"]);
    if ((c.sampled_token_ids as unknown[]).length !== (c.sampled_logprobs as unknown[]).length)
      throw new GymModelError(at, "Value error, sampled token/logprob length mismatch");
  });
  if (response.final_policy_decision !== null && response.final_policy_decision !== undefined) {
    const at = [...loc, "final_policy_decision"];
    const d = check(response.final_policy_decision, DECISION, at);
    const lineage = check(d.lineage, LINEAGE, [...at, "lineage"]);
    each(lineage.unit_records, UNIT, [...at, "lineage", "unit_records"]);
  }
  each(response.lineage_deltas ?? [], DELTA, [...loc, "lineage_deltas"], (d, at) =>
    each(d.unit_upserts, UNIT, [...at, "unit_upserts"]),
  );
  each(response.chunk_records ?? [], CHUNK, [...loc, "chunk_records"]);
  each(response.boundary_events ?? [], BOUNDARY, [...loc, "boundary_events"]);
  each(response.guard_records ?? [], GUARD, [...loc, "guard_records"]);
  const contract = check(response.context_compaction_contract, CONTRACT, [...loc, "context_compaction_contract"]);
  check(contract.generation_contract, GENERATION_CONTRACT, [
    ...loc,
    "context_compaction_contract",
    "generation_contract",
  ]);
}
