// A call's media occurrences (SPEC "Input", `calls[].media`): checked, copied out of the caller's
// objects, and numbered for the cores, which compare media as integer triples.
import { describeValue } from "../messages.js";
import { isRecord } from "./validate.js";
import type { MediaItem } from "../types.js";

const MAX_INDEX = 2 ** 31 - 1;

function isIndex(value: unknown, least: number): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= least && value <= MAX_INDEX;
}

/**
 * The call's occurrences as fresh {id, offset, length} objects (null: none, for `undefined`,
 * `null` and `[]`), or what is wrong with them: one line naming the occurrence, for SPEC's
 * `invalid_media`. `promptLength` bounds the spans.
 */
export function readMedia(value: unknown, promptLength: number): MediaItem[] | null | string {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value)) return `media must be an array of {id, offset, length}, got ${describeValue(value)}`;
  if (value.length === 0) return null;
  const items: MediaItem[] = [];
  for (let i = 0; i < value.length; i++) {
    const item: unknown = value[i];
    if (!isRecord(item)) return `media[${i}] must be an object {id, offset, length}, got ${describeValue(item)}`;
    const { id, offset, length } = item;
    if (typeof id !== "string" || id === "")
      return `media[${i}].id must be a non-empty string, got ${describeValue(id)}`;
    if (!isIndex(offset, 0)) return `media[${i}].offset must be an integer >= 0, got ${describeValue(offset)}`;
    if (!isIndex(length, 1)) return `media[${i}].length must be an integer >= 1, got ${describeValue(length)}`;
    if (i > 0) {
      const before = items[i - 1];
      if (offset < before.offset)
        return `media[${i}] starts before media[${i - 1}] (occurrences must be in prompt order)`;
      if (offset < before.offset + before.length) return `media[${i}] overlaps media[${i - 1}]`;
    }
    if (offset + length > promptLength) {
      return `media[${i}] ends at ${offset + length}, past the prompt's ${promptLength} tokens`;
    }
    items.push({ id, offset, length });
  }
  return items;
}

/** Numbers media ids within one rollout (equal ids, equal numbers) for the cores' triples. */
export class MediaNumbers {
  private readonly numbers = new Map<string, number>();

  /** The occurrences as (item, offset, length) triples. */
  triples(items: readonly MediaItem[]): Int32Array {
    const out = new Int32Array(items.length * 3);
    for (let i = 0; i < items.length; i++) {
      const { id, offset, length } = items[i];
      let n = this.numbers.get(id);
      if (n === undefined) this.numbers.set(id, (n = this.numbers.size));
      out[3 * i] = n;
      out[3 * i + 1] = offset;
      out[3 * i + 2] = length;
    }
    return out;
  }
}
