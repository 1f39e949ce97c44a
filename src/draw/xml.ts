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
  // never inside a number: `row 1…` for `row 123` would name another row
  const digit = (i: number) => chars[i] >= "0" && chars[i] <= "9";
  let end = max - 1;
  while (end > 0 && digit(end - 1) && digit(end)) end--;
  return chars.slice(0, end).join("") + "…";
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
 * Never cuts inside a number: a cut in a run of digits moves to its edge (keeping the run whole
 * when it fits), and a text whose closing number cannot be kept whole is not shortened but
 * dropped (""), since `c…9` for `c999` would name another call.
 */
export function clipMiddle(text: string, max: number): string {
  const chars = Array.from(text);
  if (chars.length <= max) return text;
  if (max <= 1) return "";
  const digit = (i: number) => i >= 0 && i < chars.length && chars[i] >= "0" && chars[i] <= "9";
  // the end tells ids apart more often than the start: it gets the odd character
  let tailStart = chars.length - Math.ceil((max - 1) / 2);
  if (digit(tailStart - 1) && digit(tailStart)) {
    let runStart = tailStart;
    while (digit(runStart - 1)) runStart--;
    let runEnd = tailStart;
    while (digit(runEnd)) runEnd++;
    tailStart = chars.length - runStart <= max - 1 ? runStart : runEnd;
  }
  if (digit(chars.length - 1) && tailStart === chars.length) return "";
  let headEnd = max - 1 - (chars.length - tailStart);
  while (headEnd > 0 && digit(headEnd - 1) && digit(headEnd)) headEnd--;
  return chars.slice(0, headEnd).join("") + "…" + chars.slice(tailStart).join("");
}

/** A <text> element at (x, y), its content escaped. */
export function text(x: number, y: number, content: string, cls?: string): string {
  return `<text x="${x}" y="${y}"${cls ? ` class="${cls}"` : ""}>${xmlText(content)}</text>`;
}
