// callforest/compaction: an agent runtime that compacts its context (old images, old reasoning)
// while keeping exact token evidence, so its rollouts train without re-tokenizing.
export { runAgent, type CompactionOptions, type RunAgentOptions, type RunAgentResult } from "./agent.js";
export { createModelClient, plainBody, compactionBody, tokenizeBody, assertBodyKeys, ENDPOINT_PATHS, type ModelCall, type ModelClient, type FetchLike, type ModelClientOptions, type RequestParts } from "./client.js";
export { ContextController, changedRanges, checkRequiredPrefix, type BoundaryRecord, type BoundaryReason, type ChangedRange, type PreparedCall, type ViewDecision } from "./controller.js";
export { canonicalJson, sha256Hex } from "./digest.js";
export type { Environment, Observation, ObservationImage } from "./environment.js";
export { CompactionError, EvidenceError, ModelHttpError, PrefixMismatchError } from "./errors.js";
export {
  EVIDENCE_SCHEMA_VERSION,
  extractGeneration,
  rolloutFromEvidence,
  validateEvidence,
  type AttemptRecord,
  type CallEvidence,
  type EvidenceRecord,
  type GenerationEvidence,
  type StopReason,
} from "./evidence.js";
export { measureGuards, projectVisionTokens, validateGuards, type GuardCheck, type GuardConfig, type GuardEvaluation, type GuardOutcome, type GuardRound } from "./guards.js";
export { SemanticHistory, imagesOf, isImageGroup, type HistoryEntry, type NewEntry, type Origin, type UserPart } from "./history.js";
export { entryItem, entryKeys, materialize, type MaterializedView } from "./materialize.js";
export { MediaStore, pngSize, type MediaRecord } from "./media.js";
export {
  identityPolicy,
  latestScreenshotPolicy,
  omittedImagesMarker,
  policyIdentity,
  recencyPolicy,
  type Policy,
  type PolicyIdentity,
  type RecencyConfig,
  type ViewCounts,
  type ViewItem,
  type ViewPlan,
} from "./policies.js";
export * from "./responses.js";
export { createScheduler, rolling, turnChunked, type ChunkRecord, type ScheduleConfig, type ScheduledView, type Scheduler, type ViewTrigger } from "./schedules.js";
