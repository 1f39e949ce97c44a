import type { BoundaryRecord } from "./controller.js";
import type { GuardConfig, GuardEvaluation } from "./guards.js";
import type { MediaRecord } from "./media.js";
import type { PolicyIdentity, ViewCounts } from "./policies.js";
import type { ChunkRecord, ScheduleConfig, ViewTrigger } from "./schedules.js";
import type { Provenance } from "./provenance.js";

export const EVIDENCE_SCHEMA_VERSION = 1;

export interface GenerationEvidence {
  prompt_token_ids: number[];
  generation_token_ids: number[];
  generation_log_probs: number[];
}

export interface CallEvidence extends GenerationEvidence {
  call_id: string;
  /** 0-based model call number within the rollout. */
  turn: number;
  agent: string;
  endpoint: "responses" | "context_compaction";
  response_id: string;
  /** Attempts it took (1 = no retry). */
  attempts: number;
  /** Context segment; a new segment starts at every rewrite boundary. */
  segment: number;
  /**
   * The acknowledged call whose prompt + generation this call's prompt was required to start with
   * (null at a rewrite boundary). This is the session's lineage, not the rows': callforest links
   * by SPEC's token-prefix rule, so a boundary whose rewrite changed no token of an earlier call's
   * sequence (say, dropped reasoning the model never wrote) is still linked under that call —
   * unless an image there changed (a screenshot swapped in place): the media tell it apart.
   */
  parent_call: string | null;
  required_prefix_length: number;
  view_digest: string;
  /** `sha256:` of the canonical JSON of the request body that got the response. */
  request_digest: string;
  /** Policy decision that produced the view (null when compaction is off). */
  decision: (PolicyIdentity & { trigger: ViewTrigger; chunk: number | null }) | null;
  view: { input_items: number; retained: ViewCounts; omitted: ViewCounts };
  /** Media ids in order of occurrence in the request (the rollout's `media` locates each one in the prompt). */
  media: string[];
  /** Lineage delta: items appended since the parent call's request (0 for a segment start). */
  appended_items: number;
}

export interface AttemptRecord {
  call_id: string;
  attempt: number;
  status: "ok" | "failed";
  error?: string;
}

/**
 * Why an episode ended (`failed`: only in the evidence of a partial run, see partialRunOf);
 * `output_truncated`: the last response was cut off (status "incomplete") with no action in it.
 */
export type StopReason =
  | "max_turns"
  | "final_message"
  | "output_truncated"
  | "environment_done"
  | "guard_rejected"
  | "failed";

export interface EvidenceRecord {
  schema_version: typeof EVIDENCE_SCHEMA_VERSION;
  rollout_id: string;
  reward: number;
  agent: string;
  stop_reason: StopReason;
  compaction: {
    enabled: boolean;
    policy: PolicyIdentity | null;
    schedule: ScheduleConfig | null;
    guards: GuardConfig | null;
  };
  calls: CallEvidence[];
  attempts: AttemptRecord[];
  boundaries: BoundaryRecord[];
  chunks: ChunkRecord[];
  guards: GuardEvaluation[];
  /** Every image the rollout stored, in order of first occurrence. */
  media: MediaRecord[];
  /**
   * The token the model's template repeats for each image (the model client's
   * `imagePlaceholderToken`): the rollout's media spans are its runs. Null when not known: the
   * rollout then gives no media and callforest links its calls by tokens alone. Records written
   * before this field read as null.
   */
  image_placeholder_token: number | null;
  /**
   * What generated the tokens: the model, and the tokenizer, chat template and processor when the
   * server reported them (`complete: false` lists what it did not). Absent in records written
   * before the field.
   */
  provenance?: Provenance;
}
