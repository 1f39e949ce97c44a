// Media for people: short names for media ids, a call's occurrences as text, and why a media
// cut happened. Shared by `show`, the SVG and the page, so all three name a media item alike.
import type { ForestCall, MediaItem } from "../types.js";

/** Ids up to this many characters are shown whole. */
const SHORT_MAX = 20;
/** A longer id keeps its head (a digest's algorithm and first hex digits) and its tail (a file name's number). */
const HEAD = 12;
const TAIL = 6;

/** The reason a media cut is drawn, in the SVG's tooltip and on the page. */
export const MEDIA_CUT_REASON = "its media differ from the earlier call whose tokens it extends";

function shorten(id: string): string {
  const chars = Array.from(id);
  if (chars.length <= SHORT_MAX) return id;
  return `${chars.slice(0, HEAD).join("")}…${chars.slice(-TAIL).join("")}`;
}

/**
 * A naming function for the media ids of a forest: each id shortened, except ids whose short
 * forms would coincide (two items that differ only in the middle), which stay whole, so two
 * items never look the same.
 */
export function mediaNamer(forest: readonly Pick<ForestCall, "media">[]): (id: string) => string {
  const idsOfShort = new Map<string, Set<string>>();
  for (const call of forest) {
    for (const item of call.media) {
      const short = shorten(item.id);
      let ids = idsOfShort.get(short);
      if (ids === undefined) idsOfShort.set(short, (ids = new Set()));
      ids.add(item.id);
    }
  }
  return (id) => {
    const short = shorten(id);
    return (idsOfShort.get(short)?.size ?? 1) > 1 ? id : short;
  };
}

/** One occurrence as `id@offset+length` (where its placeholder tokens start, and how many). */
function mediaOccurrence(item: MediaItem, name: (id: string) => string): string {
  return `${name(item.id)}@${item.offset}+${item.length}`;
}

/** A call's occurrences, `media a@3+3, b@20+3`; "" when it has none. */
export function mediaList(media: readonly MediaItem[], name: (id: string) => string): string {
  return media.length === 0 ? "" : `media ${media.map((item) => mediaOccurrence(item, name)).join(", ")}`;
}
