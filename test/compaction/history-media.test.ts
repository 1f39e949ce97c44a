import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { CompactionError } from "../../src/compaction/errors.js";
import { SemanticHistory, imagesOf, isImageGroup } from "../../src/compaction/history.js";
import { MediaStore, pngSize } from "../../src/compaction/media.js";
import { png } from "./support.js";

describe("media store", () => {
  it("stores identical bytes once under the SHA-256 of the bytes", async () => {
    const store = new MediaStore();
    const bytes = png(20, 10, 7);
    const a = await store.put(bytes);
    const b = await store.put(bytes.slice());
    expect(a).toBe(b);
    expect(store.size).toBe(1);
    expect(a.id).toBe(`sha256:${createHash("sha256").update(bytes).digest("hex")}`);
    expect(a).toMatchObject({ mime: "image/png", width: 20, height: 10, byteLength: bytes.length });
    const other = await store.put(png(20, 10, 8));
    expect(other.id).not.toBe(a.id);
    expect(store.size).toBe(2);
  });

  it("keeps its own copy of the bytes", async () => {
    const store = new MediaStore();
    const bytes = png(4, 4, 1);
    const { id } = await store.put(bytes);
    bytes.fill(0);
    const kept = store.bytes(id);
    expect(pngSize(kept)).toEqual({ width: 4, height: 4 });
    kept.fill(0);
    expect(pngSize(store.bytes(id))).toEqual({ width: 4, height: 4 });
    expect(store.dataUrl(id)).toBe(`data:image/png;base64,${Buffer.from(store.bytes(id)).toString("base64")}`);
  });

  it(
    "keeps its own copy of a Node Buffer too (whose slice() is a view), " + "even if the caller reuses it at once",
    async () => {
      const store = new MediaStore();
      const reused = Buffer.from(png(4, 4, 1));
      const first = store.put(reused);
      Buffer.from(png(4, 4, 2)).copy(reused); // before put has finished hashing
      const { id } = await first;
      expect(id).toBe(
        `sha256:${createHash("sha256")
          .update(png(4, 4, 1))
          .digest("hex")}`,
      );
      expect(Buffer.from(store.bytes(id)).equals(Buffer.from(png(4, 4, 1)))).toBe(true);
    },
  );

  it("rejects bytes that are not an image of their mime type, and unknown ids", async () => {
    const store = new MediaStore();
    await expect(store.put(new Uint8Array([1, 2, 3]))).rejects.toThrow(
      /^media: 3 bytes are not a valid image\/png image: /,
    );
    const good = png(4, 4, 1);
    const edited = (at: number, value: number[]) => {
      const copy = good.slice();
      copy.set(value, at);
      return copy;
    };
    for (const [bad, why] of [
      [edited(0, [0, 0, 0, 0]), /unsupported file type/],
      [edited(16, [0, 0, 0, 0]), /0x4 is not an image size/],
      [edited(20, [255, 255, 255, 255]), /4x4294967295 is not an image size/],
    ] as const) {
      await expect(store.put(bad)).rejects.toThrow(why);
    }
    // a PNG is not a JPEG, whatever the caller says; and only three types are known
    await expect(store.put(png(2, 2, 0), "image/jpeg")).rejects.toThrow("its bytes are png");
    await expect(store.put(png(2, 2, 0), "image/gif")).rejects.toThrow(/unsupported mime type image\/gif/);
    expect(() => store.record("sha256:00")).toThrow(/unknown media id sha256:00/);
  });
});

describe("semantic history", () => {
  it("appends frozen copies and never lets them change", () => {
    const history = new SemanticHistory();
    const parts = [
      { type: "text" as const, text: "task" },
      { type: "image" as const, mediaId: "sha256:aa" },
    ];
    const first = history.append({ kind: "user", origin: "initial", turn: -1, parts });
    parts[0] = { type: "text", text: "changed" };
    expect(history.at(0)).toBe(first);
    expect(first.seq).toBe(0);
    expect(first.kind === "user" && first.parts[0]).toEqual({ type: "text", text: "task" });
    expect(() => {
      (first as { turn: number }).turn = 5;
    }).toThrow(TypeError);
    expect(() => {
      (first as unknown as { parts: unknown[] }).parts.push({ type: "text", text: "x" });
    }).toThrow(TypeError);
    const second = history.append({ kind: "reasoning", origin: "model", turn: 0, id: "rs_1", text: "hmm" });
    expect(second.seq).toBe(1);
    expect(history.length).toBe(2);
    expect(isImageGroup(first)).toBe(true);
    expect(isImageGroup(second)).toBe(false);
    expect(imagesOf(first)).toEqual(["sha256:aa"]);
  });

  it("hands out snapshots, and keeps the initial context first", () => {
    const history = new SemanticHistory();
    history.append({ kind: "user", origin: "initial", turn: -1, parts: [{ type: "text", text: "task" }] });
    const snapshot = history.entries();
    history.append({ kind: "function_output", origin: "environment", turn: 0, callId: "c", output: "ok" });
    expect(snapshot).toHaveLength(1);
    expect(() => history.append({ kind: "user", origin: "initial", turn: -1, parts: [] })).toThrow(CompactionError);
    expect(() => history.at(9)).toThrow(/no entry 9 \(history has 2\)/);
  });
});

describe("media formats (issue 19.8)", () => {
  // Smallest real files of each format, made by hand: a 3x2 baseline JPEG header and a 5x4 lossy WebP (VP8).
  const jpeg = Uint8Array.from([
    0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00,
    0x00, 0xff, 0xc0, 0x00, 0x11, 0x08, 0x00, 0x02, 0x00, 0x03, 0x03, 0x01, 0x22, 0x00, 0x02, 0x11, 0x01, 0x03, 0x11,
    0x01, 0xff, 0xd9,
  ]);
  const webp = Uint8Array.from([
    0x52, 0x49, 0x46, 0x46, 0x24, 0x00, 0x00, 0x00, 0x57, 0x45, 0x42, 0x50, 0x56, 0x50, 0x38, 0x20, 0x18, 0x00, 0x00,
    0x00, 0x30, 0x01, 0x00, 0x9d, 0x01, 0x2a, 0x05, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  ]);

  it(
    "stores JPEG and WebP with their sizes read by image-size, " + "and refuses a mime type their bytes are not",
    async () => {
      const store = new MediaStore();
      expect(await store.put(jpeg, "image/jpeg")).toMatchObject({ mime: "image/jpeg", width: 3, height: 2 });
      expect(await store.put(webp, "image/webp")).toMatchObject({ mime: "image/webp", width: 5, height: 4 });
      await expect(store.put(jpeg, "image/webp")).rejects.toThrow("its bytes are jpg");
      expect(store.dataUrl((await store.put(jpeg, "image/jpeg")).id)).toMatch(/^data:image\/jpeg;base64,\/9j\//);
    },
  );
});
