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
  /** Plain data; its canonical JSON digest identifies the policy's decisions. */
  readonly config: Readonly<Record<string, unknown>>;
  readonly identity: PolicyIdentity;
  plan(entries: readonly HistoryEntry[]): ViewPlan;
}

/** Name, version and `sha256:` digest of the canonical JSON of the config. */
export function policyIdentity(name: string, version: string, config: Readonly<Record<string, unknown>>): PolicyIdentity {
  return Object.freeze({ name, version, config_digest: `sha256:${sha256HexSync(canonicalJson(config))}` });
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
  return count(entries, entries.map((_, i) => ({ entry: i })));
}

function subtract(a: ViewCounts, b: ViewCounts): ViewCounts {
  return { images: a.images - b.images, imageGroups: a.imageGroups - b.imageGroups, reasoning: a.reasoning - b.reasoning };
}

/** Builds a plan's counts from its items (retained) and the entries it covers (omitted = rest). */
export function planOf(policy: PolicyIdentity, entries: readonly HistoryEntry[], items: ViewItem[]): ViewPlan {
  const retained = count(entries, items);
  return { policy, items, retained, omitted: subtract(totals(entries), retained) };
}

/** Shows everything. */
export function identityPolicy(): Policy {
  const identity = policyIdentity("identity", "1", {});
  return {
    name: "identity",
    version: "1",
    config: {},
    identity,
    plan: (entries) => planOf(identity, entries, entries.map((_, i) => ({ entry: i }))),
  };
}

export interface RecencyImagesConfig {
  enabled: boolean;
  /** Image groups (observations with images) to keep, counted from the newest. */
  keepLastGroups: number;
  /** Always keep the images of the initial context (the task). */
  protectInitialContext: boolean;
}

export interface RecencyReasoningConfig {
  enabled: boolean;
  /** Always keep the first reasoning block. */
  keepFirstBlock: boolean;
  /** Reasoning blocks to keep, counted from the newest. */
  keepLastBlocks: number;
}

export interface RecencyConfig {
  images?: Partial<RecencyImagesConfig>;
  reasoning?: Partial<RecencyReasoningConfig>;
}

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
  if (typeof v !== "boolean") throw new CompactionError(`recency policy: ${name} must be a boolean (got ${JSON.stringify(value)})`);
  return v;
}

function pluralImages(n: number): string {
  return n === 1 ? "1 earlier image" : `${n} earlier images`;
}

/** The text that stands in for a run of omitted images. */
export function omittedImagesMarker(images: number): string {
  return `[${pluralImages(images)} omitted]`;
}

/**
 * Keeps the newest image groups and reasoning blocks; each half can be switched on alone.
 * A run of consecutive omitted image groups becomes one text marker at the run's first group.
 */
export function recencyPolicy(config: RecencyConfig = {}): Policy {
  const images: RecencyImagesConfig = {
    enabled: flag("images.enabled", config.images?.enabled, config.images !== undefined),
    keepLastGroups: configCount("images.keepLastGroups", config.images?.keepLastGroups, 3),
    protectInitialContext: flag("images.protectInitialContext", config.images?.protectInitialContext, true),
  };
  const reasoning: RecencyReasoningConfig = {
    enabled: flag("reasoning.enabled", config.reasoning?.enabled, config.reasoning !== undefined),
    keepFirstBlock: flag("reasoning.keepFirstBlock", config.reasoning?.keepFirstBlock, false),
    keepLastBlocks: configCount("reasoning.keepLastBlocks", config.reasoning?.keepLastBlocks, 3),
  };
  const normalized = { images: { ...images }, reasoning: { ...reasoning } };
  const identity = policyIdentity("recency", "1", normalized);
  return {
    name: "recency",
    version: "1",
    config: normalized,
    identity,
    plan(entries) {
      const dropGroup = new Set<number>();
      if (images.enabled) {
        const candidates = entries.filter((e) => isImageGroup(e) && !(images.protectInitialContext && e.origin === "initial"));
        const cut = Math.max(0, candidates.length - images.keepLastGroups);
        for (const e of candidates.slice(0, cut)) dropGroup.add(e.seq);
      }
      const dropReasoning = new Set<number>();
      if (reasoning.enabled) {
        const blocks = entries.filter((e) => e.kind === "reasoning");
        const keepFrom = Math.max(0, blocks.length - reasoning.keepLastBlocks);
        blocks.forEach((e, i) => {
          if (i < keepFrom && !(reasoning.keepFirstBlock && i === 0)) dropReasoning.add(e.seq);
        });
      }
      const items: ViewItem[] = [];
      let run: ViewItem | null = null;
      let runImages = 0;
      for (const entry of entries) {
        if (dropReasoning.has(entry.seq)) continue;
        if (dropGroup.has(entry.seq)) {
          const n = imagesOf(entry).length;
          if (run) {
            runImages += n;
            run.marker = omittedImagesMarker(runImages);
            items.push({ entry: entry.seq, dropImages: true });
          } else {
            runImages = n;
            run = { entry: entry.seq, dropImages: true, marker: omittedImagesMarker(n) };
            items.push(run);
          }
          continue;
        }
        if (isImageGroup(entry)) run = null; // a kept image group ends the run
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
  const identity = policyIdentity("latest_screenshot", "1", {});
  return {
    name: "latest_screenshot",
    version: "1",
    config: {},
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
