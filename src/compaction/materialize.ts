// Materialization: a view plan becomes Responses API `input` items, byte-for-byte deterministic.
import { canonicalJson, sha256Hex, utf8 } from "./digest.js";
import type { HistoryEntry, UserPart } from "./history.js";
import type { MediaStore } from "./media.js";
import type { ViewPlan } from "./policies.js";
import type { InputItem, InputImage, InputText } from "./responses.js";

export interface MaterializedView {
  input: InputItem[];
  /** Canonical JSON of each input item: what append-compatibility compares. */
  itemKeys: string[];
  /** Media ids in order of occurrence in `input`. */
  mediaIds: string[];
  /** Canonical JSON of `input`. */
  bytes: Uint8Array;
  /** `sha256:<hex>` of `bytes`: the view digest. */
  digest: string;
}

/** The input item of one history entry; null when nothing of it is left to show. */
export function entryItem(
  entry: HistoryEntry,
  media: MediaStore,
  dropImages = false,
  marker?: string,
): InputItem | null {
  switch (entry.kind) {
    case "user": {
      const content: (InputText | InputImage)[] = [];
      let markerPlaced = false;
      for (const part of entry.parts) {
        if (part.type === "text") content.push({ type: "input_text", text: part.text });
        else if (!dropImages)
          content.push({ type: "input_image", image_url: media.dataUrl(part.mediaId), detail: "auto" });
        else if (marker !== undefined && !markerPlaced) {
          content.push({ type: "input_text", text: marker });
          markerPlaced = true;
        }
      }
      return content.length ? { type: "message", role: entry.role ?? "user", content } : null;
    }
    case "reasoning":
      return {
        type: "reasoning",
        ...idOf(entry),
        summary: [],
        content: [{ type: "reasoning_text", text: entry.text }],
      };
    case "message":
      return {
        type: "message",
        role: "assistant",
        ...idOf(entry),
        content: [{ type: "output_text", text: entry.text }],
      };
    case "function_call":
      return {
        type: "function_call",
        ...idOf(entry),
        call_id: entry.callId,
        name: entry.name,
        arguments: entry.arguments,
      };
    case "function_output":
      return { type: "function_call_output", call_id: entry.callId, output: entry.output };
  }
}

/** `{id}` when the entry has one (an earlier turn of the initial context may not). */
function idOf(entry: { id?: string }): { id: string } | Record<string, never> {
  return entry.id === undefined ? {} : { id: entry.id };
}

/** Media ids an entry shows, in order (none when its images are dropped). */
function shownMedia(entry: HistoryEntry, dropImages: boolean): string[] {
  if (entry.kind !== "user" || dropImages) return [];
  return entry.parts.flatMap((p) => (p.type === "image" ? [p.mediaId] : []));
}

/** A user entry showing `images` where its first image stood, instead of its own (a screen's newest screenshot). */
function withImages(entry: HistoryEntry, images: readonly string[]): HistoryEntry {
  if (entry.kind !== "user") return entry;
  const parts: UserPart[] = [];
  let placed = false;
  for (const part of entry.parts) {
    if (part.type === "text") parts.push(part);
    else if (!placed) {
      for (const mediaId of images) parts.push({ type: "image", mediaId });
      placed = true;
    }
  }
  return { ...entry, parts };
}

export async function materialize(
  plan: ViewPlan,
  entries: readonly HistoryEntry[],
  media: MediaStore,
): Promise<MaterializedView> {
  const input: InputItem[] = [];
  const itemKeys: string[] = [];
  const mediaIds: string[] = [];
  for (const view of plan.items) {
    const entry = view.images ? withImages(entries[view.entry], view.images) : entries[view.entry];
    const item = entryItem(entry, media, view.dropImages === true, view.marker);
    if (!item) continue;
    input.push(item);
    itemKeys.push(canonicalJson(item));
    mediaIds.push(...shownMedia(entry, view.dropImages === true));
  }
  const bytes = utf8(`[${itemKeys.join(",")}]`);
  return { input, itemKeys, mediaIds, bytes, digest: `sha256:${await sha256Hex(bytes)}` };
}

/** Canonical keys of entries shown in full (the model's own output, as the next request will resend it). */
export function entryKeys(entries: readonly HistoryEntry[], media: MediaStore): string[] {
  return entries.flatMap((e) => {
    const item = entryItem(e, media);
    return item ? [canonicalJson(item)] : [];
  });
}
