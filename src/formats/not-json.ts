// Why a line is not JSON, and where: a small byte-level JSON checker that only runs after the
// fast path failed, so its message can name the byte offset (JSON.parse names UTF-16 positions,
// and not always).

enum Ch {
  Quote = 0x22,
  Backslash = 0x5c,
}

class NotJson {
  constructor(
    readonly offset: number,
    readonly why: string,
  ) {}
}

/**
 * Length of the valid UTF-8 sequence at i, or 0 (TextDecoder's fatal rules: no overlongs,
 * surrogates or > U+10FFFF).
 */
function utf8Length(bytes: Uint8Array, i: number): number {
  const b = bytes[i];
  const n = bytes.length;
  const cont = (j: number, lo = 0x80, hi = 0xbf) => j < n && bytes[j] >= lo && bytes[j] <= hi;
  if (b < 0x80) return 1;
  if (b >= 0xc2 && b <= 0xdf) return cont(i + 1) ? 2 : 0;
  if (b >= 0xe0 && b <= 0xef) {
    const lo = b === 0xe0 ? 0xa0 : 0x80;
    const hi = b === 0xed ? 0x9f : 0xbf;
    return cont(i + 1, lo, hi) && cont(i + 2) ? 3 : 0;
  }
  if (b >= 0xf0 && b <= 0xf4) {
    const lo = b === 0xf0 ? 0x90 : 0x80;
    const hi = b === 0xf4 ? 0x8f : 0xbf;
    return cont(i + 1, lo, hi) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  }
  return 0;
}

function show(byte: number): string {
  return byte >= 0x20 && byte < 0x7f
    ? `'${String.fromCharCode(byte)}'`
    : `byte 0x${byte.toString(16).padStart(2, "0")}`;
}

/** A byte-level JSON checker (iterative: any nesting depth). Throws NotJson at the first problem. */
class Checker {
  private i = 0;
  constructor(private readonly b: Uint8Array) {}

  private fail(why: string): never {
    throw new NotJson(this.i, why);
  }
  private unexpected(what: string): never {
    if (this.i >= this.b.length) throw new NotJson(this.i, `cut off: the line ends where ${what} should be`);
    return this.fail(`unexpected ${show(this.b[this.i])} where ${what} should be`);
  }
  private space(): void {
    const b = this.b;
    while (this.i < b.length && (b[this.i] === 0x20 || b[this.i] === 0x09 || b[this.i] === 0x0a || b[this.i] === 0x0d))
      this.i++;
  }
  private string(): void {
    const b = this.b;
    this.i++;
    while (true) {
      if (this.i >= b.length) throw new NotJson(this.i, "cut off inside a string");
      const c = b[this.i];
      if (c === Ch.Quote) {
        this.i++;
        return;
      }
      if (c < 0x20) this.fail("unescaped control character in a string");
      if (c === Ch.Backslash) {
        const e = b[this.i + 1];
        if (this.i + 1 >= b.length) {
          this.i++;
          throw new NotJson(this.i, "cut off inside a string");
        }
        if (e === 0x75) {
          for (let k = 2; k < 6; k++) {
            const h = b[this.i + k];
            const hex = (h >= 0x30 && h <= 0x39) || (h >= 0x41 && h <= 0x46) || (h >= 0x61 && h <= 0x66);
            if (!hex) {
              this.i += k;
              if (this.i >= b.length) throw new NotJson(this.i, "cut off inside a string");
              this.fail("bad \\u escape");
            }
          }
          this.i += 6;
        } else if ('"\\/bfnrt'.includes(String.fromCharCode(e))) {
          this.i += 2;
        } else {
          this.i++;
          this.fail("bad escape in a string");
        }
        continue;
      }
      if (c >= 0x80) {
        const length = utf8Length(b, this.i);
        if (length === 0) this.fail("invalid UTF-8");
        this.i += length;
        continue;
      }
      this.i++;
    }
  }
  private digits(): number {
    const start = this.i;
    while (this.i < this.b.length && this.b[this.i] >= 0x30 && this.b[this.i] <= 0x39) this.i++;
    return this.i - start;
  }
  private number(): void {
    const b = this.b;
    if (b[this.i] === 0x2d) this.i++;
    if (b[this.i] === 0x30) this.i++;
    else if (this.digits() === 0) this.unexpected("a digit");
    if (b[this.i] === 0x2e) {
      this.i++;
      if (this.digits() === 0) this.unexpected("a digit");
    }
    if (b[this.i] === 0x65 || b[this.i] === 0x45) {
      this.i++;
      if (b[this.i] === 0x2b || b[this.i] === 0x2d) this.i++;
      if (this.digits() === 0) this.unexpected("a digit");
    }
  }
  private literal(word: string): void {
    for (let k = 0; k < word.length; k++) {
      if (this.b[this.i] !== word.charCodeAt(k)) this.unexpected(`'${word}'`);
      this.i++;
    }
  }

  run(): void {
    const b = this.b;
    // Stack of open containers: 0x5b `[` or 0x7b `{`.
    const open: number[] = [];
    this.space();
    value: while (true) {
      // A value is expected here.
      if (this.i >= b.length) this.unexpected("a value");
      const c = b[this.i];
      if (c === 0x7b || c === 0x5b) {
        this.i++;
        this.space();
        if (b[this.i] === (c === 0x7b ? 0x7d : 0x5d)) {
          this.i++;
        } else {
          open.push(c);
          if (c === 0x7b) this.key();
          continue;
        }
      } else if (c === Ch.Quote) this.string();
      else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) this.number();
      else if (c === 0x74) this.literal("true");
      else if (c === 0x66) this.literal("false");
      else if (c === 0x6e) this.literal("null");
      else this.unexpected("a value");
      // After a value: a separator, a closer, or the end.
      while (true) {
        this.space();
        if (open.length === 0) {
          if (this.i < b.length) this.fail(`unexpected ${show(b[this.i])} after the JSON value`);
          return;
        }
        const top = open[open.length - 1];
        const close = top === 0x7b ? 0x7d : 0x5d;
        if (b[this.i] === 0x2c) {
          this.i++;
          this.space();
          if (top === 0x7b) this.key();
          continue value;
        }
        if (b[this.i] === close) {
          this.i++;
          open.pop();
          continue;
        }
        this.unexpected(top === 0x7b ? "',' or '}'" : "',' or ']'");
      }
    }
  }
  private key(): void {
    if (this.b[this.i] !== Ch.Quote) this.unexpected("a key string");
    this.string();
    this.space();
    if (this.b[this.i] !== 0x3a) this.unexpected("':'");
    this.i++;
    this.space();
  }
}

/** One line naming the first problem and its byte offset, or null when the bytes are valid JSON. */
export function describeNotJson(bytes: Uint8Array): string | null {
  try {
    new Checker(bytes).run();
    return null;
  } catch (error) {
    if (!(error instanceof NotJson)) throw error;
    return `not JSON at byte ${error.offset}: ${error.why}${opensPrettyJson(bytes) ? PRETTY_HINT : ""}`;
  }
}

const PRETTY_HINT =
  " (a JSON value spread over lines? JSONL holds one a line; a .json file may hold one value over many)";

/** True for a line that is only `{` or `[` (and white space): the first line of pretty-printed JSON. */
function opensPrettyJson(bytes: Uint8Array): boolean {
  if (bytes.length > 64) return false;
  const text = new TextDecoder().decode(bytes).trim();
  return text === "{" || text === "[";
}
