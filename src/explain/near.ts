// Near parents (SPEC "Prefix breaks") and, for roots, the closest earlier call, from one trie of
// the eligible calls' full sequences: O(total tokens) to build and to query.

/** One eligible call, in ledger order. */
export interface NearInput {
  prompt: ArrayLike<number>;
  full: ArrayLike<number>;
  /** len(full(parent(c))): 0 for a root. */
  parentLength: number;
}

/** A call's near parent (index into the input list) and where they part. */
export interface Parting {
  near: number;
  at: number;
}

/**
 * A trie over token sequences. Each node keeps, for SPEC's rule, the two latest calls whose
 * generation passes through it on different next tokens (so for any next token of a later prompt,
 * the latest call that parts from it there is at hand), and the latest call through it at all.
 */
class Trie {
  // Node 0 is the root. A node's first child is inline; more children go in `more`.
  private readonly childToken: number[] = [-1];
  private readonly childNode: number[] = [-1];
  private readonly more = new Map<number, Map<number, number>>();
  private readonly best1: number[] = [-1];
  private readonly edge1: number[] = [-1];
  private readonly best2: number[] = [-1];
  readonly latest: number[] = [-1];

  child(node: number, token: number): number {
    if (this.childToken[node] === token) return this.childNode[node]!;
    return this.more.get(node)?.get(token) ?? -1;
  }

  private addChild(node: number, token: number): number {
    const created = this.childToken.length;
    this.childToken.push(-1);
    this.childNode.push(-1);
    this.best1.push(-1);
    this.edge1.push(-1);
    this.best2.push(-1);
    this.latest.push(-1);
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

  /** Adds call `id`'s full sequence; its generation's nodes record it as a possible near parent. */
  insert(id: number, full: ArrayLike<number>, promptLength: number): void {
    let node = 0;
    this.latest[0] = id;
    for (let k = 0; k < full.length; k++) {
      const token = full[k]!;
      if (k >= promptLength) {
        // Calls come in ledger order, so `id` is the latest: it takes best1; the old best1 stays
        // the latest on another edge unless it took this one.
        if (this.edge1[node] !== token) {
          this.best2[node] = this.best1[node]!;
          this.edge1[node] = token;
        }
        this.best1[node] = id;
      }
      let next = this.child(node, token);
      if (next === -1) next = this.addChild(node, token);
      node = next;
      this.latest[node] = id;
    }
  }

  /** The nodes along `tokens` from the root, as far as the trie has them. */
  walk(tokens: ArrayLike<number>): number[] {
    const path = [0];
    let node = 0;
    for (let k = 0; k < tokens.length; k++) {
      node = this.child(node, tokens[k]!);
      if (node === -1) break;
      path.push(node);
    }
    return path;
  }

  /** The latest call at `node` that went on with a token other than `token`, or -1. */
  partingAt(node: number, token: number): number {
    return this.edge1[node] !== token ? this.best1[node]! : this.best2[node]!;
  }
}

/**
 * For each call, its near parent per SPEC (the largest `at`, ties the latest call), or null; and
 * for each call, the closest earlier call by longest common prefix (ties the latest), or null for
 * the first call.
 */
export function partings(calls: readonly NearInput[]): { near: (Parting | null)[]; closest: (Parting | null)[] } {
  const trie = new Trie();
  const near: (Parting | null)[] = [];
  const closest: (Parting | null)[] = [];
  calls.forEach((call, id) => {
    const path = trie.walk(call.prompt);
    const depth = path.length - 1;
    let found: Parting | null = null;
    for (let k = Math.min(depth, call.prompt.length - 1); k > call.parentLength; k--) {
      const p = trie.partingAt(path[k]!, call.prompt[k]!);
      if (p !== -1) {
        found = { near: p, at: k };
        break;
      }
    }
    near.push(found);
    const latest = trie.latest[path[depth]!]!;
    closest.push(latest === -1 ? null : { near: latest, at: depth });
    trie.insert(id, call.full, call.prompt.length);
  });
  return { near, closest };
}

/** The length of the longest common prefix of `a` and `b`. */
export function commonPrefix(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  let k = 0;
  while (k < n && a[k] === b[k]) k++;
  return k;
}
