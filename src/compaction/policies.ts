// Compaction policies: pure functions from history to a view plan (what to show, what to omit).
// They never touch the history; each decision is identified by name, version and config digest.
import { canonicalJson, sha256HexSync } from "./digest.js";
import { CompactionError } from "./errors.js";
import { imagesOf, isImageGroup, type HistoryEntry } from "./history.js";

export interface PolicyIdentity {
  name: string;
  version: string;
  config_digest: string;
}

/**
 * One shown history entry; `dropImages` replaces its images by `marker` text (or nothing);
 * `images` shows these media ids where its first image stood, instead of its own images.
 */
export interface ViewItem {
  entry: number;
  dropImages?: true;
  marker?: string;
  images?: string[];
}

export interface ViewCounts {
  images: number;
  imageGroups: number;
  reasoning: number;
}

export interface ViewPlan {
  /** The policy whose decision this is. */
  policy: PolicyIdentity;
  items: ViewItem[];
  retained: ViewCounts;
  omitted: ViewCounts;
}

export interface Policy {
  readonly name: string;
  readonly version: string;
  /** Gym's form of the policy block, `{type, config}` (`{type}` for identity): what `config_digest` digests. */
  readonly config: Readonly<Record<string, unknown>>;
  readonly identity: PolicyIdentity;
  plan(entries: readonly HistoryEntry[]): ViewPlan;
}

/**
 * Name, version and config digest: SHA-256 hex of the canonical JSON of Gym's form of the policy
 * block (`{type, config}`), as Gym's `_config_digest` computes it, so an equal policy has Gym's id.
 */
export function policyIdentity(
  name: string,
  version: string,
  gymForm: Readonly<Record<string, unknown>>,
): PolicyIdentity {
  return Object.freeze({ name, version, config_digest: sha256HexSync(canonicalJson(gymForm)) });
}

function count(entries: readonly HistoryEntry[], items: readonly ViewItem[]): ViewCounts {
  const c: ViewCounts = { images: 0, imageGroups: 0, reasoning: 0 };
  for (const item of items) {
    const entry = entries[item.entry];
    if (entry.kind === "reasoning") c.reasoning++;
    if (isImageGroup(entry) && !item.dropImages) {
      c.imageGroups++;
      c.images += item.images?.length ?? imagesOf(entry).length;
    }
  }
  return c;
}

function totals(entries: readonly HistoryEntry[]): ViewCounts {
  return count(
    entries,
    entries.map((_, i) => ({ entry: i })),
  );
}

function subtract(a: ViewCounts, b: ViewCounts): ViewCounts {
  return {
    images: a.images - b.images,
    imageGroups: a.imageGroups - b.imageGroups,
    reasoning: a.reasoning - b.reasoning,
  };
}

/** Builds a plan's counts from its items (retained) and the entries it covers (omitted = rest). */
export function planOf(policy: PolicyIdentity, entries: readonly HistoryEntry[], items: ViewItem[]): ViewPlan {
  const retained = count(entries, items);
  return { policy, items, retained, omitted: subtract(totals(entries), retained) };
}

/** Shows everything (Gym's `identity`, version 1). */
export function identityPolicy(): Policy {
  const config = { type: "identity" };
  const identity = policyIdentity("identity", "1", config);
  return {
    name: "identity",
    version: "1",
    config,
    identity,
    plan: (entries) =>
      planOf(
        identity,
        entries,
        entries.map((_, i) => ({ entry: i })),
      ),
  };
}

export interface RecencyImagesConfig {
  enabled: boolean;
  /**
   * Image groups (observations with images) to keep, counted from the newest. Groups the next
   * action responds to are always kept.
   */
  keepLastGroups: number;
  /** Always keep the images of the initial context (the task). */
  protectInitialContext: boolean;
  /** Text put in place of each run of omitted image groups (null: none). Default Gym's "[Earlier image omitted]". */
  omissionMarker: string | null;
}

export interface RecencyReasoningConfig {
  enabled: boolean;
  /** Always keep the first turn's reasoning. */
  keepFirstBlock: boolean;
  /** Turns whose reasoning to keep, counted from the newest. */
  keepLastBlocks: number;
}

export interface RecencyConfig {
  /** Present: on (unless `enabled: false`). Setting a knob while `enabled` is false is an error, as in Gym. */
  images?: Partial<RecencyImagesConfig>;
  reasoning?: Partial<RecencyReasoningConfig>;
}

/** Gym's default omission marker. */
export const OMISSION_MARKER = "[Earlier image omitted]";

/** A recency setting: a non-negative integer, `fallback` when unset. */
function configCount(name: string, value: unknown, fallback: number): number {
  const v = value ?? fallback;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) {
    throw new CompactionError(`recency policy: ${name} must be a non-negative integer (got ${JSON.stringify(value)})`);
  }
  return v;
}

function flag(name: string, value: unknown, fallback: boolean): boolean {
  const v = value ?? fallback;
  if (typeof v !== "boolean")
    throw new CompactionError(`recency policy: ${name} must be a boolean (got ${JSON.stringify(value)})`);
  return v;
}

/** Gym's rule: a knob of a half that is switched off is a mistake, not a default. */
function checkDisabledHalf(half: string, given: Readonly<Record<string, unknown>> | undefined, enabled: boolean): void {
  const set = Object.keys(given ?? {}).filter(
    (k) => k !== "enabled" && (given as Record<string, unknown>)[k] !== undefined,
  );
  if (!enabled && set.length)
    throw new CompactionError(`recency policy: ${half}.${set[0]} is set but ${half}.enabled is false`);
}

/** The model call after which the newest observations came (the history's pending groups condition the next one). */
function latestTurn(entries: readonly HistoryEntry[]): number {
  let turn = -1;
  for (const e of entries) if (e.origin === "model") turn = Math.max(turn, e.turn);
  return turn;
}

/**
 * Gym's `recency` policy (version 2): keeps the newest image groups and the newest turns'
 * reasoning; each half can be switched on alone. Image groups the next action responds to (the
 * observations since the last model call, or the task before the first) are always kept. A run
 * of consecutive omitted image groups becomes one `omissionMarker` text where its first image stood.
 */
export function recencyPolicy(config: RecencyConfig = {}): Policy {
  const imagesOn = flag("images.enabled", config.images?.enabled, config.images !== undefined);
  const reasoningOn = flag("reasoning.enabled", config.reasoning?.enabled, config.reasoning !== undefined);
  checkDisabledHalf("images", config.images, imagesOn);
  checkDisabledHalf("reasoning", config.reasoning, reasoningOn);
  if (!imagesOn && !reasoningOn) throw new CompactionError("recency policy: images or reasoning must be enabled");
  const marker = config.images?.omissionMarker === undefined ? OMISSION_MARKER : config.images.omissionMarker;
  if (marker !== null && typeof marker !== "string")
    throw new CompactionError(
      `recency policy: images.omissionMarker must be a string or null (got ${JSON.stringify(marker)})`,
    );
  const images: RecencyImagesConfig = {
    enabled: imagesOn,
    keepLastGroups: configCount("images.keepLastGroups", config.images?.keepLastGroups, 3),
    protectInitialContext: flag("images.protectInitialContext", config.images?.protectInitialContext, true),
    omissionMarker: marker,
  };
  const reasoning: RecencyReasoningConfig = {
    enabled: reasoningOn,
    keepFirstBlock: flag("reasoning.keepFirstBlock", config.reasoning?.keepFirstBlock, false),
    keepLastBlocks: configCount("reasoning.keepLastBlocks", config.reasoning?.keepLastBlocks, 3),
  };
  // Gym's RecencyHistoryPolicyConfig.model_dump(): every key, snake_case.
  const gymConfig = {
    images: {
      enabled: images.enabled,
      protect_initial_context: images.protectInitialContext,
      keep_last_groups: images.keepLastGroups,
      omission_marker: images.omissionMarker,
    },
    reasoning: {
      enabled: reasoning.enabled,
      keep_first_block: reasoning.keepFirstBlock,
      keep_last_blocks: reasoning.keepLastBlocks,
    },
  };
  const form = { type: "recency", config: gymConfig };
  const identity = policyIdentity("recency", "2", form);
  const lastN = <T>(xs: readonly T[], n: number): T[] => (n > 0 ? xs.slice(-n) : []);
  return {
    name: "recency",
    version: "2",
    config: form,
    identity,
    plan(entries) {
      const dropGroup = new Set<number>();
      if (images.enabled) {
        const latest = latestTurn(entries);
        const pending = (e: HistoryEntry) =>
          latest < 0 ? e.origin === "initial" : e.origin === "environment" && e.turn === latest;
        const candidates = entries.filter(
          (e) => isImageGroup(e) && !(images.protectInitialContext && e.origin === "initial"),
        );
        const kept = new Set(lastN(candidates, images.keepLastGroups).map((e) => e.seq));
        for (const e of candidates) if (!kept.has(e.seq) && !pending(e)) dropGroup.add(e.seq);
      }
      const dropReasoning = new Set<number>();
      if (reasoning.enabled) {
        // Reasoning is kept or dropped a turn at a time.
        const turns = [...new Set(entries.filter((e) => e.kind === "reasoning").map((e) => e.turn))];
        const keep = new Set(lastN(reasoning.keepFirstBlock ? turns.slice(1) : turns, reasoning.keepLastBlocks));
        if (reasoning.keepFirstBlock && turns.length) keep.add(turns[0]);
        for (const e of entries) if (e.kind === "reasoning" && !keep.has(e.turn)) dropReasoning.add(e.seq);
      }
      const items: ViewItem[] = [];
      let inRun = false;
      for (const entry of entries) {
        if (dropReasoning.has(entry.seq)) continue;
        if (dropGroup.has(entry.seq)) {
          items.push(
            !inRun && images.omissionMarker !== null
              ? { entry: entry.seq, dropImages: true, marker: images.omissionMarker }
              : { entry: entry.seq, dropImages: true },
          );
          inRun = true;
          continue;
        }
        if (isImageGroup(entry)) inRun = false; // a kept image group ends the run
        items.push({ entry: entry.seq });
      }
      return planOf(identity, entries, items);
    },
  };
}

/**
 * A computer-use harness's screen: one screenshot slot, where the first image stood, that always
 * shows the newest image; every later image group keeps its text and loses its images (no
 * marker). Each new screenshot replaces the old one in place: a same-size image has the same
 * tokens, so only the media tell the two contexts apart.
 */
export function latestScreenshotPolicy(): Policy {
  const config = { type: "latest_screenshot" };
  const identity = policyIdentity("latest_screenshot", "1", config);
  return {
    name: "latest_screenshot",
    version: "1",
    config,
    identity,
    plan(entries) {
      const groups = entries.filter(isImageGroup);
      const screen = groups[0]?.seq;
      const latest = groups.length ? imagesOf(groups[groups.length - 1]).slice(-1) : [];
      const items = entries.map((e): ViewItem => {
        if (e.seq === screen) return { entry: e.seq, images: latest };
        return isImageGroup(e) ? { entry: e.seq, dropImages: true } : { entry: e.seq };
      });
      return planOf(identity, entries, items);
    },
  };
}
