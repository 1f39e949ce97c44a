// For a root, the closest earlier call: the one whose full sequence shares the longest prefix
// with its prompt (ties the latest), from one trie of the eligible calls' full sequences, O(total
// tokens) to build and to query. Near parents themselves (SPEC "Prefix breaks") come from the plan.

/** A call's closest earlier call (index into the input list) and where they part. */
export interface Parting {
  near: number;
  at: number;
}

/** A trie over token sequences; each node keeps the latest call whose sequence passes through it. */
class Trie {
  // Node 0 is the root. A node's first child is inline; more children go in `more`.
  private readonly childToken: number[] = [-1];
  private readonly childNode: number[] = [-1];
  private readonly more = new Map<number, Map<number, number>>();
  readonly latest: number[] = [-1];

  child(node: number, token: number): number {
    if (this.childToken[node] === token) return this.childNode[node]!;
    return this.more.get(node)?.get(token) ?? -1;
  }

  private addChild(node: number, token: number): number {
    const created = this.childToken.length;
    this.childToken.push(-1);
    this.childNode.push(-1);
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

  /** Adds call `id`'s full sequence (calls come in ledger order: `id` is the latest). */
  insert(id: number, full: ArrayLike<number>): void {
    let node = 0;
    this.latest[0] = id;
    for (let k = 0; k < full.length; k++) {
      let next = this.child(node, full[k]!);
      if (next === -1) next = this.addChild(node, full[k]!);
      node = next;
      this.latest[node] = id;
    }
  }

  /** The deepest node along `tokens` the trie has, and its depth. */
  deepest(tokens: ArrayLike<number>): { node: number; depth: number } {
    let node = 0;
    let depth = 0;
    for (; depth < tokens.length; depth++) {
      const next = this.child(node, tokens[depth]!);
      if (next === -1) break;
      node = next;
    }
    return { node, depth };
  }
}

/**
 * For each call (its prompt and full sequence, in ledger order), the closest earlier call by
 * longest common prefix (ties the latest), or null for the first call.
 */
export function closestEarlier(
  calls: readonly { prompt: ArrayLike<number>; full: ArrayLike<number> }[],
): (Parting | null)[] {
  const trie = new Trie();
  return calls.map((call, id) => {
    const { node, depth } = trie.deepest(call.prompt);
    const latest = trie.latest[node]!;
    trie.insert(id, call.full);
    return latest === -1 ? null : { near: latest, at: depth };
  });
}

/** The length of the longest common prefix of `a` and `b`. */
export function commonPrefix(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  let k = 0;
  while (k < n && a[k] === b[k]) k++;
  return k;
}
