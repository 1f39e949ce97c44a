// The bin packer as it was before issue 31 (first-fit decreasing by a linear search of the open
// bins: quadratic in the number of bins), kept verbatim as the reference the O(n log n) packer of
// src/plan/packing.ts must match byte for byte.
import type { ForestShape, RecordLayout, SegmentLayout } from "../../src/plan/packing.js";

/** Children in ledger order and roots in ledger order. */
function childLists(shape: ForestShape): { children: number[][]; roots: number[] } {
  const n = shape.parents.length;
  const children: number[][] = Array.from({ length: n }, () => []);
  const roots: number[] = [];
  for (let c = 0; c < n; c++) {
    const p = shape.parents[c];
    if (p < 0) roots.push(c);
    else children[p].push(c);
  }
  return { children, roots };
}

/** The calls of the tree under `root` in pre-order (a call, then each child's subtree in ledger order). */
function preOrder(root: number, children: number[][]): number[] {
  const order: number[] = [];
  const pending = [root];
  while (pending.length > 0) {
    const c = pending.pop()!;
    order.push(c);
    const kids = children[c];
    for (let i = kids.length - 1; i >= 0; i--) pending.push(kids[i]);
  }
  return order;
}

/** Builds a record from segments added in pre-order (parent before child): starts, ends. */
class RecordBuilder {
  readonly segments: SegmentLayout[] = [];
  numTokens = 0;
  /** Segment index of each call in this record. */
  private readonly at = new Map<number, number>();

  constructor(private readonly shape: ForestShape) {}

  /** The next calls form a new piece: their parents are looked up among its own segments. */
  startPiece(): void {
    this.at.clear();
  }

  add(call: number, tree: number, trained: boolean): void {
    const p = this.shape.parents[call];
    const from = p < 0 ? 0 : this.shape.fullLengths[p];
    const length = this.shape.fullLengths[call] - from;
    const parent = p < 0 || !this.at.has(p) ? -1 : this.at.get(p)!;
    this.at.set(call, this.segments.length);
    this.segments.push({ node: call, from, parent, start: this.numTokens, length, end: 0, tree, trained });
    this.numTokens += length;
  }

  /** The record, with each segment's `end` (its subtree is an interval: pre-order). */
  done(): RecordLayout {
    const segments = this.segments;
    for (const s of segments) s.end = s.start + s.length;
    for (let i = segments.length - 1; i >= 0; i--) {
      const p = segments[i].parent;
      if (p >= 0 && segments[i].end > segments[p].end) segments[p].end = segments[i].end;
    }
    return { segments, numTokens: this.numTokens };
  }
}

/**
 * Bins of at most `capacity` tokens (no leaf may be longer: see leafPastCapacity), built bottom-up.
 * A piece of a call's subtree is the call plus at most one piece of each child; it must leave
 * room for the call's ancestors, so under call c the child pieces are bin-packed, first-fit
 * decreasing, into as few pieces as fit in `capacity - full(c)`: each extra piece repeats c's
 * segment (and, above, its path). First fit never leaves two pieces that would fit together, so no
 * piece can hold two pieces of one child. The trees' root pieces (small trees whole) then go into
 * bins. A call is trained in the first of its tree's pieces that holds it; a piece holds each of
 * its leaves' paths once, so packed_tokens ≤ row_tokens.
 */
export function layOutBinsLinear(shape: ForestShape, capacity: number): RecordLayout[] {
  const { children, roots } = childLists(shape);
  const full = shape.fullLengths;
  const pieces: Piece[] = [];
  roots.forEach((root, tree) => {
    // Post-order (reverse pre-order visits children before parents).
    const order = preOrder(root, children);
    const below = new Map<number, SubtreePiece[]>();
    for (let i = order.length - 1; i >= 0; i--) {
      const c = order[i];
      const own = full[c] - (shape.parents[c] < 0 ? 0 : full[shape.parents[c]]);
      const items = children[c].flatMap((k) => below.get(k)!);
      for (const k of children[c]) below.delete(k);
      below.set(c, packUnder(c, own, items, capacity - full[c]));
    }
    const trained = new Set<number>();
    for (const piece of below.get(root)!) {
      const calls = callsOf(piece);
      pieces.push({ tree, calls, trained: calls.map((c) => !trained.has(c)), tokens: piece.tokens });
      for (const c of calls) trained.add(c);
    }
  });

  // Bins first-fit decreasing (fewer bins: less padding for a trainer), then each bin's pieces,
  // and the bins, in tree order, so that bins read in the order of the rollout.
  const bins: { pieces: number[]; tokens: number }[] = [];
  const bySize = pieces.map((_, i) => i).sort((a, b) => pieces[b].tokens - pieces[a].tokens || a - b);
  for (const i of bySize) {
    const bin = bins.find((b) => b.tokens + pieces[i].tokens <= capacity);
    if (bin) {
      bin.pieces.push(i);
      bin.tokens += pieces[i].tokens;
    } else bins.push({ pieces: [i], tokens: pieces[i].tokens });
  }
  for (const bin of bins) bin.pieces.sort((a, b) => a - b);
  bins.sort((a, b) => a.pieces[0] - b.pieces[0]);
  return bins.map((bin) => {
    const record = new RecordBuilder(shape);
    for (const piece of bin.pieces.map((i) => pieces[i])) {
      record.startPiece();
      piece.calls.forEach((call, i) => record.add(call, piece.tree, piece.trained[i]));
    }
    return record.done();
  });
}

/** A piece of one call's subtree while packing: the call and one piece of some of its children. */
interface SubtreePiece {
  call: number;
  parts: SubtreePiece[];
  tokens: number;
}

/** The pieces of `call`'s subtree: its children's pieces first-fit decreasing into `room` each, plus `call`. */
function packUnder(call: number, own: number, items: SubtreePiece[], room: number): SubtreePiece[] {
  if (items.length === 0) return [{ call, parts: [], tokens: own }];
  items.sort((a, b) => b.tokens - a.tokens);
  const groups: SubtreePiece[] = [];
  for (const item of items) {
    const group = groups.find((g) => g.tokens + item.tokens <= room);
    if (group) {
      group.parts.push(item);
      group.tokens += item.tokens;
    } else groups.push({ call, parts: [item], tokens: item.tokens });
  }
  for (const g of groups) g.tokens += own;
  return groups;
}

/** A piece's calls in pre-order (children in ledger order), without recursion: trees run deep. */
function callsOf(piece: SubtreePiece): number[] {
  const calls: number[] = [];
  const pending = [piece];
  while (pending.length > 0) {
    const p = pending.pop()!;
    calls.push(p.call);
    const parts = p.parts.sort((a, b) => b.call - a.call); // popped in ledger order
    for (const part of parts) pending.push(part);
  }
  return calls;
}

/** Part of one tree, closed under parents, in pre-order; `trained` per call. */
interface Piece {
  tree: number;
  calls: number[];
  trained: boolean[];
  tokens: number;
}
