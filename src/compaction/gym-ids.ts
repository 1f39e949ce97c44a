// Gym's identifiers (§4.3 of the Gym formats reference): `canonical_digest` is SHA-256 of Python's
// `json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`, so floats are written
// as Python writes them (`-1.0`, `1e-05`); `stable_id(prefix, *parts)` is a prefix and 24 hex digits of it.
import { canonicalJson, sha256Hex, sha256HexSync } from "./digest.js";

/** A float as Python's `repr` writes it (the shortest digits, `.0` on integers, exponent past 1e16 or under 1e-4). */
export function pythonFloat(x: number): string {
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mantissa, exp] = x.toExponential().split("e");
  const e = Number(exp);
  const negative = mantissa.startsWith("-");
  const digits = mantissa.replace(/^-/, "").replace(".", "");
  const sign = negative ? "-" : "";
  if (e < -4 || e >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${sign}${m}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  }
  if (e < 0) return `${sign}0.${"0".repeat(-e - 1)}${digits}`;
  const whole = digits.slice(0, e + 1).padEnd(e + 1, "0");
  const fraction = digits.slice(e + 1);
  return `${sign}${whole}.${fraction || "0"}`;
}

/** Python's canonical JSON of a value whose listed arrays hold floats (everything else as JSON writes it). */
export function pythonJsonWithFloats(value: Record<string, unknown>, floatKeys: readonly string[]): string {
  const parts = Object.keys(value)
    .sort()
    .map((key) => {
      const v = value[key];
      const text =
        floatKeys.includes(key) && Array.isArray(v)
          ? `[${v.map((x) => pythonFloat(x as number)).join(",")}]`
          : canonicalJson(v);
      return `${JSON.stringify(key)}:${text}`;
    });
  return `{${parts.join(",")}}`;
}

/** Gym's canonical_digest of a value without floats (configs, ids, token lists). */
export function canonicalDigestSync(value: unknown): string {
  return sha256HexSync(canonicalJson(value));
}

export async function canonicalDigest(value: unknown): Promise<string> {
  return sha256Hex(canonicalJson(value));
}

/** Gym's stable_id(prefix, *parts). */
export async function stableId(prefix: string, ...parts: unknown[]): Promise<string> {
  return `${prefix}-${(await canonicalDigest(parts)).slice(0, 24)}`;
}

export function stableIdSync(prefix: string, ...parts: unknown[]): string {
  return `${prefix}-${canonicalDigestSync(parts).slice(0, 24)}`;
}

/** Gym's `_ordered_id_digest`: SHA-256 of the ids joined by U+001F. */
export function orderedIdDigest(ids: readonly string[]): string {
  return sha256HexSync(ids.join("\x1f"));
}
