// SHA-256, synchronously: Node's own when this runs in Node (looked up at run time, so the page's
// build imports no Node module), else FIPS 180-4 in plain TypeScript: the importer runs in the
// page too, where Web Crypto only digests asynchronously.

/** What the token digest needs of a SHA-256. */
export interface Hasher {
  update(bytes: Uint8Array): void;
  hex(): string;
}

type NodeCrypto = {
  createHash(name: "sha256"): { update(bytes: Uint8Array): unknown; digest(encoding: "hex"): string };
};
const nodeCrypto = (
  globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }
).process?.getBuiltinModule?.("node:crypto") as NodeCrypto | undefined;

/** A fresh SHA-256: Node's (about ten times faster) where there is one. */
export function sha256(): Hasher {
  if (nodeCrypto === undefined) return new Sha256();
  const hash = nodeCrypto.createHash("sha256");
  return { update: (bytes) => void hash.update(bytes), hex: () => hash.digest("hex") };
}

// Int32Array, not Uint32Array: words past 2^31 would read back as heap doubles, several times slower.
const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);

/** An incremental SHA-256 in TypeScript: `update` any number of times, then `hex` once. */
export class Sha256 implements Hasher {
  private readonly state = new Int32Array([
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
  ]);
  /** The message schedule; words 0..15 are the block being filled. */
  private readonly w = new Int32Array(64);
  /** Bytes in the current block. */
  private filled = 0;
  /** Bytes hashed so far (a double: exact up to 2^53, far past any token file). */
  private length = 0;

  update(bytes: Uint8Array): this {
    let i = 0;
    while (i < bytes.length && (this.filled & 3) !== 0) this.byte(bytes[i++]);
    // The block is kept as words: four bytes at a time once aligned.
    for (; i + 4 <= bytes.length; i += 4)
      this.word((bytes[i] << 24) | (bytes[i + 1] << 16) | (bytes[i + 2] << 8) | bytes[i + 3]);
    while (i < bytes.length) this.byte(bytes[i++]);
    return this;
  }

  private byte(value: number): void {
    const at = this.filled;
    const shift = 24 - 8 * (at & 3);
    // The first byte of a word replaces what the last block left there.
    this.w[at >> 2] = (at & 3) === 0 ? value << 24 : this.w[at >> 2] | ((value & 255) << shift);
    this.length++;
    if (++this.filled === 64) this.compress();
  }

  /** A big-endian 32-bit word, when the bytes so far are whole words. */
  private word(value: number): void {
    this.w[this.filled >> 2] = value;
    this.length += 4;
    this.filled += 4;
    if (this.filled === 64) this.compress();
  }

  /** The digest as 64 lowercase hex digits. */
  hex(): string {
    const bits = this.length * 8;
    this.byte(0x80);
    while (this.filled !== 56) this.byte(0);
    this.word(Math.floor(bits / 0x100000000));
    this.word(bits >>> 0);
    let out = "";
    for (const word of this.state) out += (word >>> 0).toString(16).padStart(8, "0");
    return out;
  }

  private compress(): void {
    this.filled = 0;
    const w = this.w;
    for (let t = 16; t < 64; t++) {
      const a = w[t - 15];
      const b = w[t - 2];
      const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
      const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
      w[t] = (w[t - 16] + s0 + w[t - 7] + s1) | 0;
    }
    const s = this.state;
    let a = s[0],
      b = s[1],
      c = s[2],
      d = s[3],
      e = s[4],
      f = s[5],
      g = s[6],
      h = s[7];
    for (let t = 0; t < 64; t++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const ch = (e & f) ^ (~e & g);
      const t1 = (((h + S1) | 0) + ((ch + K[t]) | 0) + w[t]) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const maj = (a & b) ^ (a & c) ^ (b & c);
      const t2 = (S0 + maj) | 0;
      h = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    s[0] = (s[0] + a) | 0;
    s[1] = (s[1] + b) | 0;
    s[2] = (s[2] + c) | 0;
    s[3] = (s[3] + d) | 0;
    s[4] = (s[4] + e) | 0;
    s[5] = (s[5] + f) | 0;
    s[6] = (s[6] + g) | 0;
    s[7] = (s[7] + h) | 0;
  }
}
