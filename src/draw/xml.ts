// Text that is safe inside an SVG document: escaped markup characters, and no characters that
// XML 1.0 forbids (ids in a rollout are free text; a stray control character must not make the
// picture unreadable).

const FORBIDDEN = new RegExp(
  "[\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\uFFFE\\uFFFF]" +
    "|[\\uD800-\\uDBFF](?![\\uDC00-\\uDFFF])|(?<![\\uD800-\\uDBFF])[\\uDC00-\\uDFFF]",
  "g",
);

/** Escapes text for element content and double-quoted attribute values. */
export function xmlText(text: string): string {
  return text
    .replace(FORBIDDEN, "\uFFFD")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}

/** Shortens text to at most `max` characters (an ellipsis marks the cut), counting code points. */
export function clip(text: string, max: number): string {
  const chars = Array.from(text);
  if (chars.length <= max) return text;
  if (max <= 1) return "…";
  return chars.slice(0, max - 1).join("") + "…";
}

/** Splits text into lines of at most `width` characters, breaking at spaces when it can. */
export function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let rest = text;
  while (Array.from(rest).length > width) {
    const chars = Array.from(rest);
    const head = chars.slice(0, width).join("");
    const space = head.lastIndexOf(" ");
    const cut = space > width / 2 ? space : head.length;
    lines.push(rest.slice(0, cut).trimEnd());
    rest = rest.slice(cut).trimStart();
  }
  if (rest.length > 0 || lines.length === 0) lines.push(rest);
  return lines;
}

/**
 * Shortens text to at most `max` characters by cutting the middle (`mc-…der-3`): ids that share a
 * prefix (`mc-leader-1`, `mc-leader-2`) keep the end that tells them apart. Counts code points.
 */
export function clipMiddle(text: string, max: number): string {
  const chars = Array.from(text);
  if (chars.length <= max) return text;
  if (max <= 1) return "…";
  const tail = Math.ceil((max - 1) / 2); // the end tells ids apart more often than the start
  const head = max - 1 - tail;
  return chars.slice(0, head).join("") + "…" + chars.slice(chars.length - tail).join("");
}

/** A <text> element at (x, y), its content escaped. */
export function text(x: number, y: number, content: string, cls?: string): string {
  return `<text x="${x}" y="${y}"${cls ? ` class="${cls}"` : ""}>${xmlText(content)}</text>`;
}
