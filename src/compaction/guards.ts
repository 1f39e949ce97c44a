// Context guards: limits checked before a call is sent. Every evaluation is recorded.
import { CompactionError } from "./errors.js";
import type { MaterializedView } from "./materialize.js";
import type { MediaStore } from "./media.js";

export interface GuardConfig {
  /** Limit on prompt tokens (preflight through the server's /tokenize) plus `reserveGenerationTokens`. */
  maxTotalTokens?: number;
  /** Tokens reserved for the generation in the total-token check (default 0). */
  reserveGenerationTokens?: number;
  /** Limit on images in the request. */
  maxActiveImages?: number;
  /** Limit on projected vision tokens of the request's images. */
  maxVisionTokens?: number;
  /** Gym's projection: this many vision tokens per image. When unset, each image's own size is projected in patches. */
  projectedVisionTokensPerImage?: number;
  /** Side in pixels of one vision patch for the size projection (default 16). */
  patchSize?: number;
}

export type GuardName = "total_tokens" | "active_images" | "vision_tokens";

export interface GuardCheck {
  guard: GuardName;
  measured: number;
  limit: number;
  ok: boolean;
}

export type GuardOutcome = "admit" | "admit_after_compaction" | "reject";

/** One measurement of one request against the limits. */
export interface GuardRound {
  view_digest: string;
  checks: GuardCheck[];
}

/**
 * The guard decision for one call. `rounds[0]` measured the scheduled view; when it tripped under
 * turnChunked, the chunk was closed early and `rounds[1]` measured the recompacted view.
 */
export interface GuardEvaluation {
  call_id: string;
  outcome: GuardOutcome;
  rounds: GuardRound[];
  /**
   * The chunk whose view the first round measured, and the model calls that chunk had completed
   * (Gym's `completed_action_count`; 0 under rolling). Absent in records written before them.
   */
  chunk?: number | null;
  completed_actions?: number;
}

/** Vision tokens a model spends on one image: one per patch, rounding the image up to whole patches. */
export function projectVisionTokens(width: number, height: number, patchSize = 16): number {
  return Math.ceil(width / patchSize) * Math.ceil(height / patchSize);
}

export function validateGuards(config: GuardConfig): GuardConfig {
  for (const key of [
    "maxTotalTokens",
    "reserveGenerationTokens",
    "maxActiveImages",
    "maxVisionTokens",
    "projectedVisionTokensPerImage",
    "patchSize",
  ] as const) {
    const v = config[key];
    if (v !== undefined && (!Number.isInteger(v) || v < (key === "patchSize" ? 1 : 0))) {
      throw new CompactionError(
        `guards: ${key} must be a ${key === "patchSize" ? "positive" : "non-negative"} integer (got ${v})`,
      );
    }
  }
  return config;
}

/**
 * Measures a request against every configured limit. `countPromptTokens` is only called when the
 * token guard is on (it is the server preflight).
 */
export async function measureGuards(
  config: GuardConfig,
  view: MaterializedView,
  media: MediaStore,
  countPromptTokens: () => Promise<number>,
): Promise<GuardCheck[]> {
  const checks: GuardCheck[] = [];
  if (config.maxTotalTokens !== undefined) {
    const measured = (await countPromptTokens()) + (config.reserveGenerationTokens ?? 0);
    checks.push({
      guard: "total_tokens",
      measured,
      limit: config.maxTotalTokens,
      ok: measured <= config.maxTotalTokens,
    });
  }
  if (config.maxActiveImages !== undefined) {
    const measured = view.mediaIds.length;
    checks.push({
      guard: "active_images",
      measured,
      limit: config.maxActiveImages,
      ok: measured <= config.maxActiveImages,
    });
  }
  if (config.maxVisionTokens !== undefined) {
    let measured = 0;
    const perImage = config.projectedVisionTokensPerImage;
    for (const id of view.mediaIds) {
      const r = media.record(id);
      measured += perImage ?? projectVisionTokens(r.width, r.height, config.patchSize ?? 16);
    }
    checks.push({
      guard: "vision_tokens",
      measured,
      limit: config.maxVisionTokens,
      ok: measured <= config.maxVisionTokens,
    });
  }
  return checks;
}

export function hasGuards(config: GuardConfig | undefined): config is GuardConfig {
  return (
    !!config &&
    (config.maxTotalTokens !== undefined ||
      config.maxActiveImages !== undefined ||
      config.maxVisionTokens !== undefined)
  );
}
