// The layout of packed records (SPEC "Packed trees" and "Bins"): which nodes' segments each record
// holds, in pre-order, and where. Metadata only, over a tree of nodes each of which holds the
// tokens [full(parent), full(node)) — the token trie's nodes (src/plan/trie.ts), where `full` is
// the position a node's run ends at; leafPastCapacity also takes the forest's calls so. A core
// then fills the records' token IDs, positions, logprobs and masks (ForestCore.finish).
import { firstFit } from "./first-fit.js";

/** One segment of a record: the tokens node `node` adds to its parent's. */
export interface SegmentLayout {
  /** Index of the node in the shape laid out (a trie node: src/plan/trie.ts). */
  node: number;
  /** Where the node's run starts, full(parent) (0 for a root): it holds positions [from, from + length). */
  from: number;
  /** Index of the parent's segment in the record, -1 for a piece's root. */
  parent: number;
  start: number;
  length: number;
  /** Packed index just past the segment's whole subtree in the record. */
  end: number;
  /** The tree the node belongs to (0-based, in the order of the roots). */
  tree: number;
  /** Whether this record trains the node (its generated tokens get mask 1). */
  trained: boolean;
}

export interface RecordLayout {
  segments: SegmentLayout[];
  numTokens: number;
}

/** What the packer needs of a tree of nodes (parents before children, siblings in their order). */
export interface ForestShape {
  parents: ArrayLike<number>;
  fullLengths: ArrayLike<number>;
}

/** Each node's children and the roots, in index order. */
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

/** The nodes of the tree under `root` in pre-order (a node, then each child's subtree in order). */
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
  /** Segment index of each node in this record. */
  private readonly at = new Map<number, number>();

  constructor(private readonly shape: ForestShape) {}

  /** The next nodes form a new piece: their parents are looked up among its own segments. */
  startPiece(): void {
    this.at.clear();
  }

  add(node: number, tree: number, trained: boolean): void {
    const p = this.shape.parents[node];
    const from = p < 0 ? 0 : this.shape.fullLengths[p];
    const length = this.shape.fullLengths[node] - from;
    const parent = p < 0 || !this.at.has(p) ? -1 : this.at.get(p)!;
    this.at.set(node, this.segments.length);
    this.segments.push({ node, from, parent, start: this.numTokens, length, end: 0, tree, trained });
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

/** One record per tree, in the ledger order of the roots; every segment trained. */
export function layOutTrees(shape: ForestShape): RecordLayout[] {
  const { children, roots } = childLists(shape);
  return roots.map((root, tree) => {
    const record = new RecordBuilder(shape);
    for (const node of preOrder(root, children)) record.add(node, tree, true);
    return record.done();
  });
}

/** The eligible index of the first leaf longer than `capacity`, or -1. */
export function leafPastCapacity(shape: ForestShape, capacity: number): number {
  const n = shape.parents.length;
  const isParent = new Uint8Array(n);
  for (let c = 0; c < n; c++) if (shape.parents[c] >= 0) isParent[shape.parents[c]] = 1;
  for (let c = 0; c < n; c++) if (!isParent[c] && shape.fullLengths[c] > capacity) return c;
  return -1;
}

/**
 * Bins of at most `capacity` tokens (no leaf may be longer: see leafPastCapacity), built bottom-up.
 * A piece of a node's subtree is the node plus at most one piece of each child; it must leave
 * room for the node's ancestors, so under node c the child pieces are bin-packed, first-fit
 * decreasing (firstFit), into as few pieces as fit in `capacity - full(c)`: each extra piece
 * repeats c's segment (and, above, its path). First fit never leaves two pieces that would fit
 * together, so no piece can hold two pieces of one child. The trees' root pieces (small trees whole) then go into
 * bins. A node is trained in the first of its tree's pieces that holds it; a piece holds each of
 * its leaves' paths once, so packed_tokens ≤ row_tokens.
 */
export function layOutBins(shape: ForestShape, capacity: number): RecordLayout[] {
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
      const nodes = nodesOf(piece);
      pieces.push({ tree, nodes, trained: nodes.map((c) => !trained.has(c)), tokens: piece.tokens });
      for (const c of nodes) trained.add(c);
    }
  });

  // Bins first-fit decreasing (fewer bins: less padding for a trainer), then each bin's pieces,
  // and the bins, in tree order, so that bins read in the order of the rollout.
  const bins: { pieces: number[] }[] = [];
  const bySize = pieces.map((_, i) => i).sort((a, b) => pieces[b].tokens - pieces[a].tokens || a - b);
  const binOf = firstFit(
    bySize.map((i) => pieces[i].tokens),
    capacity,
  );
  bySize.forEach((i, j) => {
    if (binOf[j] === bins.length) bins.push({ pieces: [] });
    bins[binOf[j]].pieces.push(i);
  });
  for (const bin of bins) bin.pieces.sort((a, b) => a - b);
  bins.sort((a, b) => a.pieces[0] - b.pieces[0]);
  return bins.map((bin) => {
    const record = new RecordBuilder(shape);
    for (const piece of bin.pieces.map((i) => pieces[i])) {
      record.startPiece();
      piece.nodes.forEach((node, i) => record.add(node, piece.tree, piece.trained[i]));
    }
    return record.done();
  });
}

/** A piece of one node's subtree while packing: the node and one piece of some of its children. */
interface SubtreePiece {
  node: number;
  parts: SubtreePiece[];
  tokens: number;
}

/** The pieces of `node`'s subtree: its children's pieces first-fit decreasing into `room` each, plus `node`. */
function packUnder(node: number, own: number, items: SubtreePiece[], room: number): SubtreePiece[] {
  if (items.length === 0) return [{ node, parts: [], tokens: own }];
  items.sort((a, b) => b.tokens - a.tokens);
  const groups: SubtreePiece[] = [];
  const groupOf = firstFit(
    items.map((item) => item.tokens),
    room,
  );
  items.forEach((item, j) => {
    if (groupOf[j] === groups.length) groups.push({ node, parts: [], tokens: own });
    groups[groupOf[j]].parts.push(item);
    groups[groupOf[j]].tokens += item.tokens;
  });
  return groups;
}

/** A piece's nodes in pre-order (children in their order), without recursion: trees run deep. */
function nodesOf(piece: SubtreePiece): number[] {
  const nodes: number[] = [];
  const pending = [piece];
  while (pending.length > 0) {
    const p = pending.pop()!;
    nodes.push(p.node);
    const parts = p.parts.sort((a, b) => b.node - a.node); // popped in order
    for (const part of parts) pending.push(part);
  }
  return nodes;
}

/** Part of one tree, closed under parents, in pre-order; `trained` per node. */
interface Piece {
  tree: number;
  nodes: number[];
  trained: boolean[];
  tokens: number;
}

/**
 * A lower bound on packed_tokens for any bins of `capacity` (what no packer can beat): every
 * token below node c lies in a piece that also holds c's path, so c's segment is repeated at
 * least ceil(tokens below c ÷ (capacity − full(c))) times, and at least as often as any child's.
 */
export function packedTokensLowerBound(shape: ForestShape, capacity: number): number {
  const n = shape.parents.length;
  const full = shape.fullLengths;
  const own = (c: number) => full[c] - (shape.parents[c] < 0 ? 0 : full[shape.parents[c]]);
  const below = new Float64Array(n);
  const copies = new Float64Array(n).fill(1);
  let total = 0;
  // A parent precedes its children in ledger order, so this visits children first.
  for (let c = n - 1; c >= 0; c--) {
    if (below[c] > 0) copies[c] = Math.max(copies[c], Math.ceil(below[c] / (capacity - full[c])));
    total += own(c) * copies[c];
    const p = shape.parents[c];
    if (p >= 0) {
      below[p] += own(c) + below[c];
      copies[p] = Math.max(copies[p], copies[c]);
    }
  }
  return total;
}
