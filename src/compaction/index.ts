// callforest/compaction: an agent runtime that compacts its context (old images, old reasoning)
// while keeping exact token evidence, so its rollouts train without re-tokenizing. This is the
// public surface; everything else is internal to its modules.
export {
  runAgent,
  type CompactionOptions,
  type ResourcesOptions,
  type RunAgentOptions,
  type RunAgentResult,
} from "./agent.js";
export { createModelClient, type ModelCall, type ModelClient, type ModelClientOptions } from "./client.js";
export type { FetchLike } from "./http.js";
export {
  createResourcesServer,
  jsonObservation,
  type AggregateMetrics,
  type GymRunBody,
  type ResourcesServer,
  type ResourcesServerOptions,
  type VerifyResponse,
} from "./resources.js";
export {
  identityPolicy,
  latestScreenshotPolicy,
  recencyPolicy,
  type Policy,
  type PolicyIdentity,
  type RecencyConfig,
} from "./policies.js";
export { rolling, turnChunked, type ScheduleConfig } from "./schedules.js";
export type { GuardConfig } from "./guards.js";
export {
  compactionOf,
  datasetPathOf,
  maxStepsOf,
  normalizeContextHistory,
  parseContextHistory,
  type ContextHistoryConfig,
} from "./gym-config.js";
export {
  rolloutFromEvidence,
  validateEvidence,
  type CallEvidence,
  type EvidenceRecord,
  type StopReason,
} from "./evidence.js";
export { expandEvidence, packEvidence, type PackedEvidenceRecord } from "./evidence-packing.js";
export { transportResponse, type GymResponse } from "./gym-response.js";
export { partialRunOf, type PartialRun } from "./partial.js";
export type { Provenance } from "./provenance.js";
export type { BoundaryRecord } from "./controller.js";
export type { ChunkRecord } from "./schedules.js";
export type { GuardEvaluation } from "./guards.js";
export type { Environment, Observation, ObservationImage } from "./environment.js";
export { taskInputItems, type TaskInput, type TaskItem, type TaskPart } from "./task-input.js";
export { runIdentity, type RunIdentity } from "./run-identity.js";
export type { FunctionTool, InputItem, ResponsesResponse } from "./responses.js";
export {
  CompactionError,
  ConfigError,
  EvidenceError,
  GuardRejectedError,
  HttpError,
  ModelHttpError,
  PrefixMismatchError,
  ResourcesServerError,
  ResponseTooLargeError,
} from "./errors.js";
