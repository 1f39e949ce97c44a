// The layout of packed records (SPEC "Packed trees" and "Bins"): which calls' segments each record
// holds, in pre-order, and where. Metadata only, from the forest's parents and the calls' lengths;
// a core then fills the records' token IDs, positions, logprobs and masks (ForestCore.finish).

/** One segment of a record: what call `call` adds to its parent's full sequence. */
export interface SegmentLayout {
  /** Eligible index of the call. */
  call: number;
  /** len(full(parent)) (0 for a root): the segment holds full(call)[from:]. */
  from: number;
  /** Index of the parent's segment in the record, -1 for a piece's root. */
  parent: number;
  start: number;
  length: number;
  /** Packed index just past the segment's whole subtree in the record. */
  end: number;
  /** The tree the call belongs to (0-based, in the ledger order of the roots). */
  tree: number;
  /** Whether this record trains the call (its generated tokens get mask 1). */
  trained: boolean;
}

export interface RecordLayout {
  segments: SegmentLayout[];
  numTokens: number;
}

/** What the packer needs of the linked forest (eligible calls, in ledger order). */
export interface ForestShape {
  parents: ArrayLike<number>;
  fullLengths: ArrayLike<number>;
}

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
    this.segments.push({ call, from, parent, start: this.numTokens, length, end: 0, tree, trained });
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
    for (const call of preOrder(root, children)) record.add(call, tree, true);
    return record.done();
  });
}

/** The eligible index of the first leaf longer than `capacity`, or -1. */
export function leafPastCapacity(shape: ForestShape, capacity: number): number {
  const { children } = childLists(shape);
  for (let c = 0; c < children.length; c++) if (children[c].length === 0 && shape.fullLengths[c] > capacity) return c;
  return -1;
}

/**
 * Bins of at most `capacity` tokens (no leaf may be longer: see leafPastCapacity). Each tree is
 * cut into pieces by leaves: a piece is the union of its leaves' paths (so it is closed under
 * parents, and the piece that trains a leaf holds its whole path). Leaves are taken in pre-order,
 * each into the piece of its tree where it adds the fewest tokens (what its path adds to what the
 * piece holds) and still fits, else into a new piece; as no leaf's path is counted twice, the
 * pieces hold at most row_tokens. A call is trained in the first piece that holds it. Pieces then
 * go into bins first-fit, in order: small trees and pieces share a bin.
 */
export function layOutBins(shape: ForestShape, capacity: number): RecordLayout[] {
  const { children, roots } = childLists(shape);
  const fullOf = (c: number) => shape.fullLengths[c];
  const pieces: Piece[] = [];
  roots.forEach((root, tree) => {
    const order = preOrder(root, children);
    const open: { held: Set<number>; tokens: number }[] = [];
    for (const leaf of order.filter((c) => children[c].length === 0)) {
      // What the leaf's path adds to a piece: full(leaf) past its deepest call already held.
      const adds = (held: Set<number>) => {
        let a = leaf;
        while (a >= 0 && !held.has(a)) a = shape.parents[a];
        return fullOf(leaf) - (a < 0 ? 0 : fullOf(a));
      };
      let best = -1;
      let bestAdds = Infinity;
      open.forEach((piece, i) => {
        const n = adds(piece.held);
        if (piece.tokens + n <= capacity && n < bestAdds) [best, bestAdds] = [i, n];
      });
      if (best < 0) {
        open.push({ held: new Set(), tokens: 0 });
        best = open.length - 1;
        bestAdds = fullOf(leaf);
      }
      const piece = open[best];
      for (let a = leaf; a >= 0 && !piece.held.has(a); a = shape.parents[a]) piece.held.add(a);
      piece.tokens += bestAdds;
    }
    const trained = new Set<number>();
    for (const piece of open) {
      const calls = order.filter((c) => piece.held.has(c)); // pre-order: parents first
      pieces.push({ tree, calls, trained: calls.map((c) => !trained.has(c)), tokens: piece.tokens });
      for (const c of calls) trained.add(c);
    }
  });

  const bins: { pieces: Piece[]; tokens: number }[] = [];
  for (const piece of pieces) {
    const bin = bins.find((b) => b.tokens + piece.tokens <= capacity);
    if (bin) {
      bin.pieces.push(piece);
      bin.tokens += piece.tokens;
    } else bins.push({ pieces: [piece], tokens: piece.tokens });
  }
  return bins.map((bin) => {
    const record = new RecordBuilder(shape);
    for (const piece of bin.pieces) {
      record.startPiece();
      piece.calls.forEach((call, i) => record.add(call, piece.tree, piece.trained[i]));
    }
    return record.done();
  });
}

/** Part of one tree, closed under parents, in pre-order; `trained` per call. */
interface Piece {
  tree: number;
  calls: number[];
  trained: boolean[];
  tokens: number;
}
