import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { canonicalJson, sha256Hex } from "../../src/compaction/digest.js";
import { sha256HexSync } from "../../src/compaction/digest.js";

describe("digests", () => {
  it("canonical JSON sorts keys and drops undefined members", () => {
    expect(canonicalJson({ b: 1, a: [true, null, "x"], c: undefined, d: { z: 0, y: -1.5 } })).toBe(
      '{"a":[true,null,"x"],"b":1,"d":{"y":-1.5,"z":0}}',
    );
    expect(canonicalJson({ a: 1, b: 2 })).toBe(canonicalJson({ b: 2, a: 1 }));
    expect(() => canonicalJson({ a: Number.NaN })).toThrow(/non-finite/);
  });

  it("both SHA-256 paths agree with node:crypto, across block boundaries and non-ASCII text", async () => {
    const texts = ["", "abc", "é→☃", ...[55, 56, 63, 64, 65, 119, 120, 1000].map((n) => "x".repeat(n))];
    for (const text of texts) {
      const expected = createHash("sha256").update(text, "utf8").digest("hex");
      expect(sha256HexSync(text)).toBe(expected);
      expect(await sha256Hex(text)).toBe(expected);
    }
  });
});
