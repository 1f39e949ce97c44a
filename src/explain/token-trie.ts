// A plain token trie (one child per token) that explain builds from each call's tail: a call that
// continues another starts where that call's sequence ended, so the prefix they share is never
// walked again, and building costs the tokens the calls add, not the tokens they resend. Depth of
// a node = length of the prefix it ends. `work` counts the tokens walked (tests check it is
// linear in the input).

/** What explain's analysis touched, token by token: tests assert it grows linearly. */
export interface Work {
  tokens: number;
}

export class TokenTrie {
  // Node 0 is the root. A node's first child is inline; more children go in `more`.
  private childToken: Int32Array;
  private childNode: Int32Array;
  private parentOf: Int32Array;
  private readonly more = new Map<number, Map<number, number>>();
  size = 1;
  /** How many tokens the last walk() matched. */
  matched = 0;

  /** `capacity`: the nodes expected (it grows past them). */
  constructor(
    private readonly work: Work = { tokens: 0 },
    capacity = 1024,
  ) {
    const n = Math.max(16, capacity + 1);
    this.childToken = new Int32Array(n).fill(-1);
    this.childNode = new Int32Array(n).fill(-1);
    this.parentOf = new Int32Array(n).fill(-1);
  }

  child(node: number, token: number): number {
    if (this.childToken[node] === token) return this.childNode[node]!;
    return this.more.get(node)?.get(token) ?? -1;
  }

  private add(node: number, token: number): number {
    const created = this.size++;
    if (created === this.childNode.length) this.grow();
    this.parentOf[created] = node;
    if (this.childNode[node] === -1) {
      this.childToken[node] = token;
      this.childNode[node] = created;
    } else {
      let children = this.more.get(node);
      if (children === undefined) this.more.set(node, (children = new Map()));
      children.set(token, created);
    }
    return created;
  }

  private grow(): void {
    const bigger = (a: Int32Array) => {
      const out = new Int32Array(a.length * 2).fill(-1);
      out.set(a);
      return out;
    };
    this.childToken = bigger(this.childToken);
    this.childNode = bigger(this.childNode);
    this.parentOf = bigger(this.parentOf);
  }

  /** Follows `tokens[from:to]` from `node` as far as the trie has them; `matched` says how far. */
  walk(node: number, tokens: ArrayLike<number>, from: number, to: number): number {
    let k = from;
    for (; k < to; k++) {
      const next = this.child(node, tokens[k]!);
      if (next === -1) break;
      node = next;
    }
    this.matched = k - from;
    this.work.tokens += k - from + 1;
    return node;
  }

  /** Adds `tokens[from:to]` below `node` (following what is there); the node it ends at. */
  insert(node: number, tokens: ArrayLike<number>, from: number, to: number): number {
    node = this.walk(node, tokens, from, to);
    for (let k = from + this.matched; k < to; k++) node = this.add(node, tokens[k]!);
    this.work.tokens += to - from - this.matched;
    return node;
  }

  /**
   * An interval numbering of the nodes: node n's subtree is [first[n], first[n] + size[n]). A
   * parent is always created before its children, so two passes over the nodes by index do.
   */
  intervals(): { first: Int32Array; size: Int32Array } {
    const n = this.size;
    const size = new Int32Array(n).fill(1);
    for (let node = n - 1; node > 0; node--) size[this.parentOf[node]!]! += size[node]!;
    const first = new Int32Array(n);
    const cursor = new Int32Array(n);
    cursor[0] = 1;
    for (let node = 1; node < n; node++) {
      const parent = this.parentOf[node]!;
      first[node] = cursor[parent]!;
      cursor[parent]! += size[node]!;
      cursor[node] = first[node]! + 1;
    }
    this.work.tokens += 2 * n;
    return { first, size };
  }
}

/** The largest value over a range of positions, with point updates (values only grow). */
export class MaxTree {
  private readonly n: number;
  private readonly tree: Int32Array;

  constructor(n: number) {
    this.n = Math.max(1, n);
    this.tree = new Int32Array(2 * this.n).fill(-1);
  }

  set(at: number, value: number): void {
    for (let i = at + this.n; i >= 1; i >>= 1) if (this.tree[i]! < value) this.tree[i] = value;
  }

  /** The largest value in [from, to). */
  max(from: number, to: number): number {
    let best = -1;
    for (let l = from + this.n, r = to + this.n; l < r; l >>= 1, r >>= 1) {
      if (l & 1) best = Math.max(best, this.tree[l++]!);
      if (r & 1) best = Math.max(best, this.tree[--r]!);
    }
    return best;
  }
}
