// Gym's `context_history` block (§4.1 of the Gym formats reference) with Gym's keys, values,
// defaults and validators, from YAML or JSON: it becomes the runtime's compaction options, and
// its canonical form (Gym's `model_dump`) is what Gym digests, so policy ids match Gym's.
import { laxIndex } from "../formats/values.js";
import { loadFeature } from "../optional-dependency.js";
import { CompactionError, ConfigError } from "./errors.js";
import type { CompactionOptions } from "./options.js";
import type { GuardConfig } from "./guards.js";
import { OMISSION_MARKER, identityPolicy, latestScreenshotPolicy, recencyPolicy, type Policy } from "./policies.js";
import { rolling, turnChunked } from "./schedules.js";
import { stableIdSync } from "./gym-ids.js";

// An optional peer: a missing one is one line naming what to install (src/optional-dependency.ts).
const { parse: parseYaml } = await loadFeature("the compaction runtime (callforest/compaction)", () => import("yaml"));

/** Gym's ContextHistoryConfig.model_dump(): every key, defaults filled in. */
export interface ContextHistoryConfig {
  enabled: boolean;
  policy: { type: string; config: Record<string, unknown> };
  schedule: { type: "rolling_recency" | "turn_chunked_recency"; actions_per_chunk: number };
  guards: {
    max_total_tokens: number | null;
    reserved_generation_tokens: number;
    max_active_images: number | null;
    max_vision_tokens: number | null;
    projected_vision_tokens_per_image: number | null;
  };
}

type Obj = Record<string, unknown>;

function object(path: string, value: unknown): Obj {
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value))
    throw new ConfigError(path, `must be a mapping, got ${JSON.stringify(value)}`);
  return value as Obj;
}

/** Gym's models are extra="forbid": a key they do not define is an error naming its path. */
function onlyKeys(path: string, o: Obj, allowed: readonly string[]): void {
  for (const key of Object.keys(o))
    if (!allowed.includes(key))
      throw new ConfigError(`${path}.${key}`, `unknown key (expected one of ${allowed.join(", ")})`);
}

function bool(path: string, v: unknown, fallback: boolean): boolean {
  if (v === undefined) return fallback;
  if (typeof v !== "boolean") throw new ConfigError(path, `must be true or false, got ${JSON.stringify(v)}`);
  return v;
}

function int(path: string, v: unknown, fallback: number | null, min: number): number | null {
  if (v === undefined || v === null) {
    if (v === null && fallback !== null) throw new ConfigError(path, "must be an integer, got null");
    return fallback;
  }
  if (!Number.isSafeInteger(v) || (v as number) < min)
    throw new ConfigError(path, `must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  return v as number;
}

const IMAGES = ["enabled", "protect_initial_context", "keep_last_groups", "omission_marker"];
const REASONING = ["enabled", "keep_first_block", "keep_last_blocks"];

/** Gym's RecencyHistoryPolicyConfig, dumped. */
function recencyConfig(path: string, raw: Obj): Obj {
  onlyKeys(path, raw, ["images", "reasoning"]);
  const images = object(`${path}.images`, raw.images);
  const reasoning = object(`${path}.reasoning`, raw.reasoning);
  onlyKeys(`${path}.images`, images, IMAGES);
  onlyKeys(`${path}.reasoning`, reasoning, REASONING);
  const half = (name: string, o: Obj) => {
    const enabled = bool(`${path}.${name}.enabled`, o.enabled, false);
    const set = Object.keys(o).filter((k) => k !== "enabled");
    if (!enabled && set.length)
      throw new ConfigError(
        `${path}.${name}.${set[0]}`,
        `is set but ${name}.enabled is false (Gym refuses settings of a disabled half)`,
      );
    return enabled;
  };
  const imagesOn = half("images", images);
  const reasoningOn = half("reasoning", reasoning);
  if (!imagesOn && !reasoningOn)
    throw new ConfigError(path, "the recency policy requires images.enabled or reasoning.enabled");
  const marker = images.omission_marker === undefined ? OMISSION_MARKER : images.omission_marker;
  if (marker !== null && typeof marker !== "string")
    throw new ConfigError(`${path}.images.omission_marker`, `must be a string or null, got ${JSON.stringify(marker)}`);
  return {
    images: {
      enabled: imagesOn,
      protect_initial_context: bool(`${path}.images.protect_initial_context`, images.protect_initial_context, true),
      keep_last_groups: int(`${path}.images.keep_last_groups`, images.keep_last_groups, 3, 0),
      omission_marker: marker,
    },
    reasoning: {
      enabled: reasoningOn,
      keep_first_block: bool(`${path}.reasoning.keep_first_block`, reasoning.keep_first_block, false),
      keep_last_blocks: int(`${path}.reasoning.keep_last_blocks`, reasoning.keep_last_blocks, 3, 0),
    },
  };
}

/**
 * Policy types this runtime knows: Gym's two, and the test bed's screen policy (registered, as
 * Gym's custom policies are).
 */
const POLICY_TYPES = ["identity", "recency", "latest_screenshot"];

/** Validates a `context_history` block as Gym does and returns its dump (every key, defaults filled in). */
export function normalizeContextHistory(value: unknown, path = "context_history"): ContextHistoryConfig {
  const raw = object(path, value);
  onlyKeys(path, raw, ["enabled", "policy", "schedule", "guards"]);
  const policy = object(`${path}.policy`, raw.policy);
  onlyKeys(`${path}.policy`, policy, ["type", "config"]);
  const type = policy.type === undefined ? "identity" : policy.type;
  if (typeof type !== "string" || type === "")
    throw new ConfigError(`${path}.policy.type`, `must be a non-empty string, got ${JSON.stringify(type)}`);
  if (!POLICY_TYPES.includes(type))
    throw new ConfigError(
      `${path}.policy.type`,
      `unknown policy ${JSON.stringify(type)} (available: ${POLICY_TYPES.join(", ")})`,
    );
  const config = object(`${path}.policy.config`, policy.config);
  if (type !== "recency") onlyKeys(`${path}.policy.config`, config, []);
  const schedule = object(`${path}.schedule`, raw.schedule);
  onlyKeys(`${path}.schedule`, schedule, ["type", "actions_per_chunk"]);
  const scheduleType = schedule.type === undefined ? "rolling_recency" : schedule.type;
  if (scheduleType !== "rolling_recency" && scheduleType !== "turn_chunked_recency") {
    throw new ConfigError(
      `${path}.schedule.type`,
      `must be rolling_recency or turn_chunked_recency, got ${JSON.stringify(scheduleType)}`,
    );
  }
  const perChunk = int(`${path}.schedule.actions_per_chunk`, schedule.actions_per_chunk, 1, 1)!;
  if (scheduleType === "rolling_recency" && perChunk !== 1)
    throw new ConfigError(`${path}.schedule.actions_per_chunk`, `rolling_recency requires 1, got ${perChunk}`);
  const guards = object(`${path}.guards`, raw.guards);
  const guardKeys = [
    "max_total_tokens",
    "reserved_generation_tokens",
    "max_active_images",
    "max_vision_tokens",
    "projected_vision_tokens_per_image",
  ];
  onlyKeys(`${path}.guards`, guards, guardKeys);
  const g = {
    max_total_tokens: int(`${path}.guards.max_total_tokens`, guards.max_total_tokens, null, 1),
    reserved_generation_tokens: int(
      `${path}.guards.reserved_generation_tokens`,
      guards.reserved_generation_tokens,
      0,
      0,
    )!,
    max_active_images: int(`${path}.guards.max_active_images`, guards.max_active_images, null, 0),
    max_vision_tokens: int(`${path}.guards.max_vision_tokens`, guards.max_vision_tokens, null, 0),
    projected_vision_tokens_per_image: int(
      `${path}.guards.projected_vision_tokens_per_image`,
      guards.projected_vision_tokens_per_image,
      null,
      0,
    ),
  };
  if (g.max_vision_tokens !== null && g.projected_vision_tokens_per_image === null) {
    throw new ConfigError(`${path}.guards.max_vision_tokens`, "requires projected_vision_tokens_per_image");
  }
  return {
    enabled: bool(`${path}.enabled`, raw.enabled, false),
    policy: { type, config: type === "recency" ? recencyConfig(`${path}.policy.config`, config) : {} },
    schedule: { type: scheduleType, actions_per_chunk: perChunk },
    guards: g,
  };
}

function policyOf(policy: ContextHistoryConfig["policy"]): Policy {
  if (policy.type === "identity") return identityPolicy();
  if (policy.type === "latest_screenshot") return latestScreenshotPolicy();
  const { images, reasoning } = policy.config as { images: Obj; reasoning: Obj };
  return recencyPolicy({
    ...(images.enabled
      ? {
          images: {
            keepLastGroups: images.keep_last_groups as number,
            protectInitialContext: images.protect_initial_context as boolean,
            omissionMarker: images.omission_marker as string | null,
          },
        }
      : {}),
    ...(reasoning.enabled
      ? {
          reasoning: {
            keepFirstBlock: reasoning.keep_first_block as boolean,
            keepLastBlocks: reasoning.keep_last_blocks as number,
          },
        }
      : {}),
  });
}

/** The runtime's compaction options for a validated block (false when `enabled` is false: a plain agent). */
export function compactionOf(config: ContextHistoryConfig): CompactionOptions | false {
  if (!config.enabled) return false;
  const g = config.guards;
  const guards: GuardConfig = {};
  if (g.max_total_tokens !== null) guards.maxTotalTokens = g.max_total_tokens;
  if (g.reserved_generation_tokens !== 0) guards.reserveGenerationTokens = g.reserved_generation_tokens;
  if (g.max_active_images !== null) guards.maxActiveImages = g.max_active_images;
  if (g.max_vision_tokens !== null) guards.maxVisionTokens = g.max_vision_tokens;
  if (g.projected_vision_tokens_per_image !== null)
    guards.projectedVisionTokensPerImage = g.projected_vision_tokens_per_image;
  const schedule =
    config.schedule.type === "rolling_recency" ? rolling() : turnChunked(config.schedule.actions_per_chunk);
  return { policy: policyOf(config.policy), schedule, ...(Object.keys(guards).length ? { guards } : {}) };
}

/**
 * The object that holds the one `context_history` key in a parsed file (a Gym agent config, or a
 * file of that key alone) and its path, or null when there is none (the file is the block itself).
 */
function blockHolder(doc: unknown): { holder: Obj; path: string } | null {
  const found: { holder: Obj; path: string }[] = [];
  const walk = (v: unknown, path: string) => {
    if (!v || typeof v !== "object") return;
    for (const [key, child] of Object.entries(v as Obj)) {
      if (key === "context_history") found.push({ holder: v as Obj, path });
      else walk(child, path ? `${path}.${key}` : key);
    }
  };
  walk(doc, "");
  if (found.length > 1)
    throw new ConfigError("context_history", `the file holds ${found.length} context_history blocks; give one`);
  return found[0] ?? null;
}

/** The `context_history` block in a parsed file: the file itself, or the one such key in it. */
function findBlock(doc: unknown): unknown {
  const found = blockHolder(doc);
  return found === null ? doc : found.holder.context_history;
}

/** Parses YAML or JSON text (a `context_history` block, or a Gym agent config holding one). */
export function parseContextHistory(text: string): {
  contextHistory: ContextHistoryConfig;
  compaction: CompactionOptions | false;
} {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (error) {
    throw new ConfigError("(file)", `not YAML or JSON: ${(error as Error).message.split("\n")[0]}`);
  }
  const contextHistory = normalizeContextHistory(findBlock(doc));
  return { contextHistory, compaction: compactionOf(contextHistory) };
}

/** Gym's dump of the block these options stand for (what `compaction_policy_id` digests). */
export function contextHistoryOf(compaction: CompactionOptions | null): ContextHistoryConfig {
  const g = compaction?.guards ?? {};
  const policy = compaction?.policy.config ?? { type: "identity" };
  return {
    enabled: compaction !== null,
    policy: { type: String(policy.type ?? compaction?.policy.name), config: (policy.config as Obj | undefined) ?? {} },
    schedule:
      compaction?.schedule.type === "turn_chunked"
        ? { type: "turn_chunked_recency", actions_per_chunk: compaction.schedule.actionsPerChunk }
        : { type: "rolling_recency", actions_per_chunk: 1 },
    guards: {
      max_total_tokens: g.maxTotalTokens ?? null,
      reserved_generation_tokens: g.reserveGenerationTokens ?? 0,
      max_active_images: g.maxActiveImages ?? null,
      max_vision_tokens: g.maxVisionTokens ?? null,
      projected_vision_tokens_per_image: g.projectedVisionTokensPerImage ?? null,
    },
  };
}

/** Gym's `compaction_policy_id` of a block. */
export function compactionPolicyId(config: ContextHistoryConfig): string {
  return stableIdSync("compaction-policy", config);
}

/**
 * The `max_steps` of the agent config that holds the `context_history` block, or null when it has
 * none: Gym's agent stops after that many model calls (each call's function calls run first), and
 * null or 0 sets no limit (`if self.config.max_steps and step >= self.config.max_steps`). A
 * negative value, which Gym takes as a limit of one call, is refused here as the typo it is.
 */
export function maxStepsOf(text: string): number | null {
  const found = blockHolder(parseYaml(text));
  if (found === null) return null;
  const raw = found.holder.max_steps;
  if (raw === undefined || raw === null) return null;
  const steps = laxIndex(raw);
  if (steps === null) {
    const where = found.path ? `${found.path}.max_steps` : "max_steps";
    throw new CompactionError(`agent config: ${where}: must be an integer >= 0 or null, got ${JSON.stringify(raw)}`);
  }
  return steps === 0 ? null : steps;
}

/** The first `datasets[].jsonl_fpath` in a Gym agent config (YAML or JSON text), if any. */
export function datasetPathOf(text: string): string | undefined {
  return datasetPathIn(parseYaml(text));
}

function datasetPathIn(doc: unknown): string | undefined {
  let found: string | undefined;
  const walk = (v: unknown) => {
    if (found !== undefined || !v || typeof v !== "object") return;
    for (const [key, child] of Object.entries(v as Record<string, unknown>)) {
      if (key === "datasets" && Array.isArray(child)) {
        const entry = child.find((d) => typeof (d as { jsonl_fpath?: unknown })?.jsonl_fpath === "string");
        if (entry) found = (entry as { jsonl_fpath: string }).jsonl_fpath;
      } else walk(child);
      if (found !== undefined) return;
    }
  };
  walk(doc);
  return found;
}
