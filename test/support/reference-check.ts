// Packed records checked against the reference's token trie (test/support/reference.ts):
// `checkTrees` holds a packer's trees to the reference's exactly (SPEC "Packed trees" leaves no
// choice), `checkBins` holds bins to SPEC's bin invariants ("Bins: packed records that fit a
// trainer's sequence length": which segments share a bin is the packer's choice, so the
// reference computes no bins, it checks a packer's), and `naiveBins` is a valid packer for tests.
//
// A record may be given as the API hands it over (camelCase: numTokens, tokenIds, positionIds,
// lossMask as a bitset Uint8Array, routedExperts as {tokens, layers, topk, data}, weightVersions,
// index or tree) or as a JSONL object (snake_case: num_tokens, token_ids, position_ids, loss_mask
// as base64 bitset or a 0/1 list, routed_experts as the envelope or nested lists,
// weight_versions, tree). A bin's segments need `tree` (the trie tree's index) and `trained`.
// The checks throw an AssertionError naming the first broken invariant.
import assert from "node:assert/strict";
import { type RefAccepted, type RefMedia, type RefPacked, type RefSegment, reference } from "./reference.js";

/** A record's segment; `tree` and `trained` only in bins. */
interface BinSegmentView {
  call: string;
  parent: number;
  start: number;
  length: number;
  end: number;
  tree?: number;
  trained?: boolean;
}

/** A bin's segment as SPEC names its fields. */
export interface RefBinSegment extends RefSegment {
  tree: number;
  trained: boolean;
}

/** A packed tree or bin with its fields read into plain arrays. */
export interface BinView {
  /** The tree's index (`tree`, or the API's `index`), null when the record has none. */
  tree: number | null;
  /** The record's group_id, undefined when it has no such field. */
  groupId: string | null | undefined;
  numTokens: number;
  tokenIds: number[];
  positionIds: number[];
  logprobs: number[];
  /** 0/1 per token. */
  mask: number[];
  /** `tree` and `trained` are undefined in a packed tree's segments. */
  segments: BinSegmentView[];
  media: RefMedia[];
  roots: string[] | null;
  calls: string[] | null;
  /** [num_tokens][L][K], null when the bin has none. */
  routes: number[][][] | null;
  versions: number[] | null;
}

const field = (o: Record<string, unknown>, camel: string, snake: string): unknown => o[camel] ?? o[snake];

function bitsetToInts(bytes: Uint8Array, n: number): number[] {
  return Array.from({ length: n }, (_, i) => (bytes[i >> 3] >> (i & 7)) & 1);
}

function readMask(value: unknown, n: number): number[] {
  if (typeof value === "string") return bitsetToInts(new Uint8Array(Buffer.from(value, "base64")), n);
  if (value instanceof Uint8Array) return bitsetToInts(value, n);
  if (Array.isArray(value) && value.length === n) return value.map((b) => (b === true || b === 1 ? 1 : 0));
  throw new assert.AssertionError({ message: "bin: loss mask is neither a bitset nor a 0/1 list" });
}

function readRoutes(value: unknown): number[][][] | null {
  if (value === undefined || value === null) return null;
  const nest = (data: ArrayLike<number>, s: number, l: number, k: number): number[][][] =>
    Array.from({ length: s }, (_, t) =>
      Array.from({ length: l }, (_, li) => Array.from({ length: k }, (_, ki) => data[(t * l + li) * k + ki])),
    );
  if (typeof value === "string") {
    const m = /^nrlre1:(int8|int16|int32):(\d+)x(\d+)x(\d+):(.*)$/.exec(value);
    assert.ok(m, "bin: routed_experts is not an envelope");
    const [, type, s, l, k, payload] = m;
    const bytes = Buffer.from(payload, "base64");
    const size = { int8: 1, int16: 2, int32: 4 }[type as "int8"];
    const data = Array.from({ length: bytes.length / size }, (_, i) =>
      size === 1 ? bytes.readInt8(i) : size === 2 ? bytes.readInt16LE(i * 2) : bytes.readInt32LE(i * 4),
    );
    return nest(data, Number(s), Number(l), Number(k));
  }
  if (Array.isArray(value)) return value as number[][][];
  const r = value as { tokens: number; layers: number; topk: number; data: ArrayLike<number> };
  return nest(r.data, r.tokens, r.layers, r.topk);
}

/** Reads one packed tree or bin (API or JSONL shape) into plain arrays. */
export function readRecord(record: unknown): BinView {
  const o = record as Record<string, unknown>;
  const numTokens = field(o, "numTokens", "num_tokens") as number;
  const versions = field(o, "weightVersions", "weight_versions") as ArrayLike<number> | undefined;
  return {
    tree: (o.tree ?? o.index ?? null) as number | null,
    groupId: field(o, "groupId", "group_id") as string | null | undefined,
    numTokens,
    tokenIds: Array.from(field(o, "tokenIds", "token_ids") as ArrayLike<number>),
    positionIds: Array.from(field(o, "positionIds", "position_ids") as ArrayLike<number>),
    logprobs: Array.from(o.logprobs as ArrayLike<number>),
    mask: readMask(field(o, "lossMask", "loss_mask"), numTokens),
    segments: (o.segments as BinSegmentView[]).map((s) => ({ ...s })),
    media: ((o.media as RefMedia[] | undefined) ?? []).map((m) => ({ id: m.id, offset: m.offset, length: m.length })),
    roots: (o.roots as string[] | undefined) ?? null,
    calls: (o.calls as string[] | undefined) ?? null,
    routes: readRoutes(field(o, "routedExperts", "routed_experts")),
    versions: versions ? Array.from(versions) : null,
  };
}

/** Segments tile the bin in pre-order, parents first, each `end` just past its subtree. */
function checkLayout(bin: BinView, b: number): void {
  let at = 0;
  bin.segments.forEach((s, i) => {
    assert.equal(s.start, at, `bin ${b} segment ${i}: start`);
    assert.ok(s.length > 0, `bin ${b} segment ${i}: empty`);
    assert.ok(s.parent < i, `bin ${b} segment ${i}: parent ${s.parent} not before it`);
    at += s.length;
    const inSubtree = (x: number): boolean => x === i || (x > i && inSubtree(bin.segments[x].parent));
    let j = i + 1;
    while (j < bin.segments.length && inSubtree(j)) j++;
    const end = j < bin.segments.length ? bin.segments[j].start : bin.numTokens;
    assert.equal(s.end, end, `bin ${b} segment ${i}: end (attention rule)`);
  });
  assert.equal(at, bin.numTokens, `bin ${b}: segments do not tile num_tokens`);
  for (const name of ["tokenIds", "positionIds", "logprobs", "mask"] as const)
    assert.equal(bin[name].length, bin.numTokens, `bin ${b}: ${name} length`);
}

/** The index of the reference segment (in `tree`) that a bin segment holds. */
function refSegmentOf(tree: RefPacked, bin: BinView, s: BinSegmentView, where: string): number {
  const from = bin.positionIds[s.start];
  const k = tree.segments.findIndex((r) => r.call === s.call && tree.position_ids[r.start] === from);
  assert.ok(k >= 0, `${where}: no trie node of ${s.call} starts at position ${from} in tree ${s.tree}`);
  assert.equal(s.length, tree.segments[k].length, `${where}: length differs from the trie node's`);
  return k;
}

/**
 * SPEC's bin invariants for `bins` (a packer's bins of `rollout` at `capacity`), against the
 * reference trie: every bin has num_tokens ≤ C; its segments are trie nodes, laid out as a packed
 * tree (pieces contain their tree's root and are closed under parents: attention and prediction
 * rules); every generated token is trained in exactly one bin; for every leaf the bin that trains
 * the leaf's last segment holds its whole trie path (its row); packed_tokens ≥ trie_tokens (and
 * equal to `packedTokens`, the report's, when given); group_id as the rollout's where a bin has
 * one. Returns packed_tokens.
 */
export function checkBins(rollout: unknown, bins: readonly unknown[], capacity: number, packedTokens?: number): number {
  const ref = reference(rollout, { capacity });
  assert.equal(ref.status, "ok", `reference rejects the rollout: ${ref.status === "rejected" ? ref.message : ""}`);
  const accepted = ref as RefAccepted;
  const trees = accepted.trees!;
  const views = bins.map(readRecord);
  /** How many bins train each trie node with generated tokens, keyed "tree/segment". */
  const trainedIn = new Map<string, number>();
  const generatedIn = (tree: RefPacked, k: number): boolean => {
    const r = tree.segments[k];
    return tree.loss_mask.slice(r.start, r.start + r.length).some((bit) => bit === 1);
  };
  views.forEach((bin, b) => {
    // "every bin has num_tokens ≤ C"
    assert.ok(bin.numTokens <= capacity, `bin ${b}: ${bin.numTokens} tokens exceed the capacity ${capacity}`);
    checkLayout(bin, b);
    const refIndex: number[] = [];
    const media: RefMedia[] = [];
    bin.segments.forEach((s, i) => {
      const where = `bin ${b} segment ${i}`;
      assert.ok(typeof s.tree === "number" && typeof s.trained === "boolean", `${where}: no tree or trained`);
      const tree = trees[s.tree];
      assert.ok(tree, `${where}: no tree ${s.tree}`);
      const k = refSegmentOf(tree, bin, s, where);
      refIndex.push(k);
      const r = tree.segments[k];
      // "a piece is a part of one tree that contains the tree's root and is closed under parents
      // (every segment's parent segment is in it too)"
      if (s.parent < 0) assert.equal(r.parent, -1, `${where}: a piece's root that is not its tree's root`);
      else {
        assert.equal(bin.segments[s.parent].tree, s.tree, `${where}: parent in another tree`);
        assert.equal(refIndex[s.parent], r.parent, `${where}: parent is not the trie node's parent`);
      }
      const slice = <T>(xs: T[], from: number): T[] => xs.slice(from, from + s.length);
      assert.deepEqual(slice(bin.tokenIds, s.start), slice(tree.token_ids, r.start), `${where}: token_ids`);
      assert.deepEqual(slice(bin.positionIds, s.start), slice(tree.position_ids, r.start), `${where}: position_ids`);
      assert.deepEqual(
        slice(bin.logprobs, s.start).map((x) => Math.fround(x)),
        slice(tree.logprobs, r.start),
        `${where}: logprobs`,
      );
      if (tree.routed_experts)
        assert.deepEqual(slice(bin.routes ?? [], s.start), slice(tree.routed_experts, r.start), `${where}: routes`);
      if (tree.weight_versions)
        assert.deepEqual(
          slice(bin.versions ?? [], s.start),
          slice(tree.weight_versions, r.start),
          `${where}: weight_versions`,
        );
      for (const m of tree.media)
        if (m.offset >= r.start && m.offset < r.start + r.length)
          media.push({ id: m.id, offset: m.offset - r.start + s.start, length: m.length });
      // "its generated tokens are trained (mask 1) in exactly one of them"
      const bits = slice(bin.mask, s.start);
      const trains = bits.some((bit) => bit === 1);
      if (trains) assert.deepEqual(bits, slice(tree.loss_mask, r.start), `${where}: mask not on its generated tokens`);
      if (generatedIn(tree, k)) {
        assert.equal(s.trained, trains, `${where}: trained flag`);
        if (trains) trainedIn.set(`${s.tree}/${k}`, (trainedIn.get(`${s.tree}/${k}`) ?? 0) + 1);
      }
    });
    assert.deepEqual(bin.media, media, `bin ${b}: media`);
    if (bin.groupId !== undefined) assert.equal(bin.groupId, accepted.group_id, `bin ${b}: group_id`);
    // "calls naming what the bin holds": the creators of its segments, in pre-order of their first
    if (bin.calls) assert.deepEqual(bin.calls, [...new Set(bin.segments.map((s) => s.call))], `bin ${b}: calls`);
    if (bin.roots) {
      const forest = new Map(accepted.forest.map((c) => [c.id, c]));
      const rootOf = (id: string): string => {
        let c = forest.get(id)!;
        while (c.parent !== null) c = forest.get(c.parent)!;
        return c.id;
      };
      const held = new Set(bin.segments.map((s) => rootOf(s.call)));
      const roots = accepted.forest.filter((c) => c.root && held.has(c.id)).map((c) => c.id);
      assert.deepEqual(bin.roots, roots, `bin ${b}: roots`);
    }
  });
  // "every generated token is trained in exactly one bin"
  trees.forEach((tree, t) =>
    tree.segments.forEach((_, k) => {
      if (generatedIn(tree, k))
        assert.equal(trainedIn.get(`${t}/${k}`) ?? 0, 1, `tree ${t} segment ${k} (${tree.segments[k].call}): trained`);
    }),
  );
  // "for every leaf, the bin that trains the leaf's last segment holds its whole trie path"
  for (const row of accepted.rows) {
    const where = `leaf ${row.leaf}`;
    const trainer = views.findIndex((bin) =>
      bin.segments.some(
        (s) => s.call === row.leaf && s.trained && bin.positionIds[s.start + s.length - 1] === row.num_tokens - 1,
      ),
    );
    assert.ok(trainer >= 0, `${where}: no bin trains its last segment`);
    const bin = views[trainer];
    const last = bin.segments.findIndex(
      (s) => s.call === row.leaf && s.trained && bin.positionIds[s.start + s.length - 1] === row.num_tokens - 1,
    );
    const chain: number[] = [];
    for (let s = last; s >= 0; s = bin.segments[s].parent) chain.unshift(s);
    const path = chain.flatMap((s) =>
      Array.from({ length: bin.segments[s].length }, (_, k) => bin.segments[s].start + k),
    );
    // "the segments on the trie path that ends with l's node, concatenated, hold row l's token_ids
    // with position_ids 0 … n−1"
    assert.deepEqual(
      path.map((k) => bin.tokenIds[k]),
      row.token_ids,
      `${where}: its path in bin ${trainer} is not its row`,
    );
    assert.deepEqual(
      path.map((k) => bin.positionIds[k]),
      row.token_ids.map((_, i) => i),
      `${where}: path positions`,
    );
  }
  const packed = views.reduce((n, bin) => n + bin.numTokens, 0);
  // "report.packed_tokens (the sum of the bins' num_tokens) ...: at least trie_tokens". Its "and,
  // without routes, at most row_tokens" is not checked: the trie keeps twins' generations apart,
  // so twins T1, T2 continued by N (T1's agent) and M (T2's agent), both trie paths through T2's
  // node, leave T1's node for a bin of its own when full(N) = full(M) = C, one full(T1) more than
  // the rows hold (test/plan/reference-v4.test.ts shows it).
  assert.ok(packed >= accepted.counts.trie_tokens!, `packed_tokens ${packed} < trie_tokens`);
  if (packedTokens !== undefined) assert.equal(packedTokens, packed, "report's packed_tokens");
  return packed;
}

/**
 * A packer's packed trees (`{ trees: true }`) against the reference's, field by field: SPEC's
 * token trie decides them exactly (records, segments, tokens, positions, logprobs, masks, media,
 * roots, calls, routes, versions, group_id when the record has it).
 */
export function checkTrees(rollout: unknown, trees: readonly unknown[]): void {
  const ref = reference(rollout, { trees: true });
  assert.equal(ref.status, "ok", `reference rejects the rollout: ${ref.status === "rejected" ? ref.message : ""}`);
  const want = (ref as RefAccepted).trees!;
  const got = trees.map(readRecord);
  assert.equal(got.length, want.length, "number of packed trees");
  want.forEach((w, t) => {
    const g = got[t];
    const where = `tree ${t}`;
    if (g.tree !== null) assert.equal(g.tree, t, `${where}: index`);
    assert.deepEqual(
      g.segments.map((s) => ({ call: s.call, parent: s.parent, start: s.start, length: s.length, end: s.end })),
      w.segments,
      `${where}: segments`,
    );
    assert.equal(g.numTokens, w.num_tokens, `${where}: num_tokens`);
    assert.deepEqual(g.tokenIds, w.token_ids, `${where}: token_ids`);
    assert.deepEqual(g.positionIds, w.position_ids, `${where}: position_ids`);
    assert.deepEqual(
      g.logprobs.map((x) => Math.fround(x)),
      w.logprobs,
      `${where}: logprobs`,
    );
    assert.deepEqual(g.mask, w.loss_mask, `${where}: loss_mask`);
    assert.deepEqual(g.media, w.media, `${where}: media`);
    if (g.roots) assert.deepEqual(g.roots, w.roots, `${where}: roots`);
    if (g.calls) assert.deepEqual(g.calls, w.calls, `${where}: calls`);
    if (g.groupId !== undefined) assert.equal(g.groupId, w.group_id, `${where}: group_id`);
    assert.deepEqual(g.routes, w.routed_experts ?? null, `${where}: routed_experts`);
    assert.deepEqual(g.versions, w.weight_versions ?? null, `${where}: weight_versions`);
  });
}

/** A bin as SPEC's JSONL names its fields (loss_mask as a 0/1 list, routes as nested lists). */
export interface RefBin extends Omit<RefPacked, "tree" | "segments"> {
  bin: number;
  segments: RefBinSegment[];
}

/**
 * A naive packer, for tests of the checker: each trie tree that fits is one bin; a tree that does
 * not is cut into one bin per trie leaf node holding its whole path, each node trained in the
 * first bin that holds it. Bins are SPEC-valid but not economical.
 */
export function naiveBins(rollout: unknown, capacity: number): RefBin[] {
  const ref = reference(rollout, { capacity });
  if (ref.status !== "ok") throw new Error(`reference rejects the rollout: ${ref.message}`);
  const bins: RefBin[] = [];
  ref.trees!.forEach((tree, t) => {
    const pieces: number[][] =
      tree.num_tokens <= capacity
        ? [tree.segments.map((_, k) => k)]
        : tree.segments
            .map((_, k) => k)
            .filter((k) => !tree.segments.some((s) => s.parent === k))
            .map((leaf) => {
              const chain: number[] = [];
              for (let k = leaf; k >= 0; k = tree.segments[k].parent) chain.unshift(k);
              return chain;
            });
    const trained = new Set<number>();
    for (const piece of pieces) {
      const bin: RefBin = {
        rollout_id: tree.rollout_id,
        bin: bins.length,
        roots: [],
        calls: [],
        num_tokens: 0,
        token_ids: [],
        position_ids: [],
        logprobs: [],
        loss_mask: [],
        segments: [],
        media: [],
        reward: tree.reward,
        group_id: tree.group_id,
      };
      const routes: number[][][] = [];
      const versions: number[] = [];
      for (const k of piece) {
        const r = tree.segments[k];
        const start = bin.token_ids.length;
        const trains = !trained.has(k);
        trained.add(k);
        const take = <T>(xs: T[]): T[] => xs.slice(r.start, r.start + r.length);
        bin.token_ids.push(...take(tree.token_ids));
        bin.position_ids.push(...take(tree.position_ids));
        bin.logprobs.push(...take(tree.logprobs));
        bin.loss_mask.push(...take(tree.loss_mask).map((bit) => (trains ? bit : 0)));
        if (tree.routed_experts) routes.push(...take(tree.routed_experts));
        if (tree.weight_versions) versions.push(...take(tree.weight_versions));
        for (const m of tree.media)
          if (m.offset >= r.start && m.offset < r.start + r.length)
            bin.media.push({ ...m, offset: m.offset - r.start + start });
        bin.segments.push({
          call: r.call,
          parent: r.parent < 0 ? -1 : piece.indexOf(r.parent),
          start,
          length: r.length,
          end: 0,
          tree: t,
          trained: trains && take(tree.loss_mask).includes(1),
        });
        if (!bin.calls.includes(r.call)) bin.calls.push(r.call);
      }
      // a chain or a whole tree: each segment's subtree is the segments after it up to the first
      // that is not its descendant
      bin.segments.forEach((s, i) => {
        const inSubtree = (x: number): boolean => x === i || (x > i && inSubtree(bin.segments[x].parent));
        let j = i + 1;
        while (j < bin.segments.length && inSubtree(j)) j++;
        s.end = j < bin.segments.length ? bin.segments[j].start : bin.token_ids.length;
      });
      bin.num_tokens = bin.token_ids.length;
      const forest = new Map(ref.forest.map((c) => [c.id, c]));
      const rootOf = (id: string): string => {
        let c = forest.get(id)!;
        while (c.parent !== null) c = forest.get(c.parent)!;
        return c.id;
      };
      const held = new Set(bin.segments.map((s) => rootOf(s.call)));
      bin.roots = ref.forest.filter((c) => c.root && held.has(c.id)).map((c) => c.id);
      if (tree.routed_experts) bin.routed_experts = routes;
      if (tree.weight_versions) bin.weight_versions = versions;
      bins.push(bin);
    }
  });
  return bins;
}
