import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { CompactionError, MediaStore, SemanticHistory, imagesOf, isImageGroup, pngSize } from "../../src/compaction/index.js";
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

  it("keeps its own copy of a Node Buffer too (whose slice() is a view), even if the caller reuses it at once", async () => {
    const store = new MediaStore();
    const reused = Buffer.from(png(4, 4, 1));
    const first = store.put(reused);
    Buffer.from(png(4, 4, 2)).copy(reused); // before put has finished hashing
    const { id } = await first;
    expect(id).toBe(`sha256:${createHash("sha256").update(png(4, 4, 1)).digest("hex")}`);
    expect(Buffer.from(store.bytes(id)).equals(Buffer.from(png(4, 4, 1)))).toBe(true);
  });

  it("rejects bytes that are not a PNG and unknown ids", async () => {
    const store = new MediaStore();
    await expect(store.put(new Uint8Array([1, 2, 3]))).rejects.toThrow(/not a PNG image \(3 bytes\)/);
    const good = png(4, 4, 1);
    const edited = (at: number, value: number[]) => {
      const copy = good.slice();
      copy.set(value, at);
      return copy;
    };
    for (const [bad, why] of [
      [good.subarray(0, 24), /no PNG signature and header/],
      [edited(8, [0, 0, 0, 12]), /the first chunk is not a 13-byte IHDR/],
      [edited(16, [0, 0, 0, 0]), /0x4 is not a PNG size/],
      [edited(20, [255, 255, 255, 255]), /4x4294967295 is not a PNG size/],
    ] as const) {
      await expect(store.put(bad)).rejects.toThrow(why);
    }
    await expect(store.put(png(2, 2, 0), "image/jpeg")).rejects.toThrow(/unsupported mime type image\/jpeg/);
    expect(() => store.record("sha256:00")).toThrow(/unknown media id sha256:00/);
  });
});

describe("semantic history", () => {
  it("appends frozen copies and never lets them change", () => {
    const history = new SemanticHistory();
    const parts = [{ type: "text" as const, text: "task" }, { type: "image" as const, mediaId: "sha256:aa" }];
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
