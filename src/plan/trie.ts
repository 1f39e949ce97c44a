// The rollout's token trie (SPEC v4 "Packed trees"): what packed records hold. The eligible calls
// are inserted in ledger order; a node is a run of one call's tokens (its creator), shared by every
// later call that has the same tokens there with the same media and agreeing routes. A call stops
// at the first token it does not share, at the end of its prompt at the latest (its generated
// tokens always get a node of its own), never inside a media occurrence; it splits the node it
// stops in. Metadata only: the cores fill the records' arrays from (creator, from, length).
//
// Cost. The links already prove most sharing: a call shares every token of a forest ancestor's
// full sequence but perhaps its last (whose route is its continuations' own), so along nodes
// created by ancestors only that last token is compared. Tokens, media and routes are compared
// token by token only against nodes of other branches (a system prompt that fresh agents and
// compacted contexts begin with, twins), each compared token one the call sends. At a branch
// (several children share the call's next token: twins' generations, or a call's last token,
// whose route is none) children are walked by the most they could share (see best), so k twins
// cost one walk, not k. Each insert walks down from a trie root (a node at a time), and the
// calls' full sequences are copied out of the core once each, kept until the trie is built.
import type { MediaItem } from "../types.js";
import { NO_ROUTE } from "./route-ids.js";

/** What the trie needs of the eligible calls, in ledger order. */
export interface TrieInput {
  promptLengths: ArrayLike<number>;
  fullLengths: ArrayLike<number>;
  /** Forest parent of each eligible call (-1: a root). */
  parents: ArrayLike<number>;
  /** Each call's media occurrences (null: none). */
  media: readonly (readonly MediaItem[] | null)[];
  /** Each call's route ids for tokens [0, full − 1), null when the rollout gives no routes. */
  routes: readonly (Int32Array | null)[] | null;
  /** full(call), read on first need. */
  tokens(call: number): Int32Array;
}

/** One node of the trie: tokens [start, end) of its creator's full sequence. */
export interface TrieNode {
  creator: number;
  start: number;
  end: number;
  /** Parent node (index into `nodes`), -1 for a trie root. */
  parent: number;
}

export interface Trie {
  /** In pre-order, children in the ledger order of their creators (so parents come first). */
  nodes: TrieNode[];
  /**
   * For each call, the later call whose route resolved its last token (the first that shared it
   * with a route), -1 when none did: SPEC's "resolved route" there is that call's.
   */
  lastResolver: Int32Array;
}

interface Node {
  creator: number;
  start: number;
  end: number;
  /** The deepest end in the node's subtree: no call shares more than up to it along the node. */
  maxEnd: number;
  parent: number;
  /** Children by the first token of their run. */
  children: Map<number, number[]> | null;
}

const ROOT = -1;

export function buildTrie(input: TrieInput): Trie {
  return new TrieBuilder(input).build();
}

class TrieBuilder {
  private readonly nodes: Node[] = [];
  private readonly roots = new Map<number, number[]>();
  private readonly lastResolver: Int32Array;
  /** ancestorOf[x] === c while inserting c when x is a forest ancestor of c. */
  private readonly ancestorOf: Int32Array;
  private readonly tokenCache: (Int32Array | undefined)[] = [];
  private readonly hasMedia: boolean;

  constructor(private readonly input: TrieInput) {
    const n = input.fullLengths.length;
    this.lastResolver = new Int32Array(n).fill(-1);
    this.ancestorOf = new Int32Array(n).fill(-1);
    this.hasMedia = input.media.some((m) => m !== null && m.length > 0);
  }

  build(): Trie {
    const n = this.input.fullLengths.length;
    for (let c = 0; c < n; c++) this.insert(c);
    return { nodes: this.preOrder(), lastResolver: this.lastResolver };
  }

  private tokens(call: number): Int32Array {
    let t = this.tokenCache[call];
    if (t === undefined) this.tokenCache[call] = t = this.input.tokens(call);
    return t;
  }

  private childrenOf(node: number): Map<number, number[]> | null {
    return node === ROOT ? this.roots : this.nodes[node].children;
  }

  private addChild(parent: number, child: number, token: number): void {
    let map = this.childrenOf(parent);
    if (map === null) map = this.nodes[parent].children = new Map();
    const list = map.get(token);
    if (list === undefined) map.set(token, [child]);
    else list.push(child);
  }

  /** The route SPEC resolves for token i of a node created by x (NO_ROUTE: none). */
  private resolvedRoute(x: number, i: number): number {
    const routes = this.input.routes;
    if (routes === null) return NO_ROUTE;
    if (i < this.input.fullLengths[x] - 1) return routes[x]![i];
    const resolver = this.lastResolver[x];
    return resolver < 0 ? NO_ROUTE : routes[resolver]![i];
  }

  /** The occurrence of `call` that covers token i, or null. */
  private occurrenceAt(call: number, i: number): MediaItem | null {
    const media = this.input.media[call];
    if (media === null) return null;
    let low = 0;
    let high = media.length - 1;
    while (low <= high) {
      const mid = (low + high) >> 1;
      const m = media[mid];
      if (i < m.offset) high = mid - 1;
      else if (i >= m.offset + m.length) low = mid + 1;
      else return m;
    }
    return null;
  }

  /** Whether c (inserting) shares token i of its full sequence with the node run of creator x. */
  private shares(c: number, x: number, i: number): boolean {
    const last = this.input.fullLengths[x] - 1;
    if (this.ancestorOf[x] !== c || i === last) {
      if (this.tokens(c)[i] !== this.tokens(x)[i]) return false;
      if (this.hasMedia && !sameOccurrence(this.occurrenceAt(c, i), this.occurrenceAt(x, i))) return false;
    }
    // A forest ancestor's routes are c's on all tokens but its last (the links checked them).
    if (this.ancestorOf[x] === c && i !== last) return true;
    // c's own last token has no route (none agrees with any).
    if (this.input.routes === null || i === this.input.fullLengths[c] - 1) return true;
    const route = this.resolvedRoute(x, i);
    return route === NO_ROUTE || route === this.input.routes[c]![i];
  }

  /** How many tokens from `pos` c shares with node `node`'s run, up to `cap`. */
  private sharedWithin(c: number, node: number, pos: number, cap: number): number {
    const { creator, end } = this.nodes[node];
    const to = Math.min(end, cap);
    if (this.ancestorOf[creator] === c) {
      // All shared but perhaps the creator's last token (see shares).
      const last = this.input.fullLengths[creator] - 1;
      if (last >= pos && last < to && !this.shares(c, creator, last)) return last - pos;
      return to - pos;
    }
    let i = pos;
    while (i < to && this.shares(c, creator, i)) i++;
    return i - pos;
  }

  /** The children of `node` whose first token c shares at `pos`. */
  private sharingChildren(c: number, node: number, pos: number): number[] {
    const list = this.childrenOf(node)?.get(this.tokens(c)[pos]);
    if (list === undefined) return [];
    return list.filter((child) => this.shares(c, this.nodes[child].creator, pos));
  }

  /** The most tokens c shares from `pos` along `node` and any path below it, up to `cap`. */
  private sharedAlong(c: number, node: number, pos: number, cap: number): number {
    let total = 0;
    for (;;) {
      const { end } = this.nodes[node];
      const k = this.sharedWithin(c, node, pos, cap);
      total += k;
      pos += k;
      if (pos >= cap || pos < end) return total;
      const children = this.sharingChildren(c, node, pos);
      if (children.length === 0) return total;
      if (children.length === 1) {
        node = children[0];
        continue;
      }
      return total + this.best(c, children, pos, cap).shared;
    }
  }

  /**
   * SPEC's choice at a branch: the child along which c shares the most, ties the latest. Children
   * are tried by how much they could share at most (their subtree's deepest end), then latest
   * first; one that cannot beat the best so far (nor tie it, being earlier) is not walked. So of
   * k twins' identical generations only the latest is walked: the cost does not grow with k.
   */
  private best(c: number, children: number[], pos: number, cap: number): { node: number; shared: number } {
    const bound = (n: number) => Math.min(this.nodes[n].maxEnd, cap) - pos;
    const order = [...children].sort((a, b) => bound(b) - bound(a) || this.nodes[b].creator - this.nodes[a].creator);
    let pick = order[0];
    let most = -1;
    for (const child of order) {
      const most_ = bound(child);
      if (most_ < most) break;
      if (most_ === most && this.nodes[child].creator < this.nodes[pick].creator) continue;
      const shared = this.sharedAlong(c, child, pos, cap);
      if (shared > most || (shared === most && this.nodes[child].creator > this.nodes[pick].creator)) {
        most = shared;
        pick = child;
      }
    }
    return { node: pick, shared: most };
  }

  private newNode(creator: number, start: number, end: number, parent: number): number {
    this.nodes.push({ creator, start, end, maxEnd: end, parent, children: null });
    const index = this.nodes.length - 1;
    this.addChild(parent, index, this.tokens(creator)[start]);
    for (let p = parent; p >= 0 && this.nodes[p].maxEnd < end; p = this.nodes[p].parent) this.nodes[p].maxEnd = end;
    return index;
  }

  /** Splits `node` at position `at` (start < at < end); the first half keeps its place. */
  private split(node: number, at: number): void {
    const first = this.nodes[node];
    const second: Node = {
      creator: first.creator,
      start: at,
      end: first.end,
      maxEnd: first.maxEnd,
      parent: node,
      children: first.children,
    };
    this.nodes.push(second);
    const index = this.nodes.length - 1;
    if (second.children !== null)
      for (const list of second.children.values()) for (const child of list) this.nodes[child].parent = index;
    first.end = at;
    first.children = null;
    this.addChild(node, index, this.tokens(first.creator)[at]);
  }

  private insert(c: number): void {
    const { promptLengths, fullLengths, parents } = this.input;
    for (let x = parents[c]; x >= 0; x = parents[x]) this.ancestorOf[x] = c;
    const prompt = promptLengths[c];
    const path: number[] = []; // nodes c runs through, from a root down
    let node = ROOT;
    let pos = 0;
    let stop = 0;
    while (pos < prompt) {
      const children = this.sharingChildren(c, node, pos);
      if (children.length === 0) break;
      // "Along which c would share the most": counted over all of full(c), not only its prompt.
      const next = children.length === 1 ? children[0] : this.best(c, children, pos, fullLengths[c]).node;
      const k = this.sharedWithin(c, next, pos, prompt);
      path.push(next);
      node = next;
      pos += k;
      if (pos < this.nodes[next].end) break; // stops inside `next`
    }
    stop = pos;
    // Never inside a media occurrence of c: back to its start.
    const occurrence = stop > 0 ? this.occurrenceAt(c, stop - 1) : null;
    if (occurrence !== null && occurrence.offset + occurrence.length > stop) stop = occurrence.offset;
    // Where c hangs: the node on its path that ends at `stop`, or the one `stop` falls inside (split).
    while (path.length > 0 && this.nodes[path[path.length - 1]].start >= stop) path.pop();
    let parent = ROOT;
    if (path.length > 0) {
      parent = path[path.length - 1];
      if (this.nodes[parent].end > stop) this.split(parent, stop);
    }
    this.resolveLastRoutes(c, path, stop);
    this.newNode(c, stop, fullLengths[c], parent);
  }

  /** c's route resolves the last token of each creator whose last token c shares and no one resolved. */
  private resolveLastRoutes(c: number, path: number[], stop: number): void {
    if (this.input.routes === null) return;
    const full = this.input.fullLengths;
    for (const node of path) {
      const { creator, end } = this.nodes[node];
      const last = full[creator] - 1;
      if (end === full[creator] && last < stop && this.lastResolver[creator] < 0) this.lastResolver[creator] = c;
    }
  }

  /** The nodes in pre-order, children in the ledger order of their creators, renumbered. */
  private preOrder(): TrieNode[] {
    const out: TrieNode[] = [];
    const byCreator = (list: Map<number, number[]> | null): number[] => {
      if (list === null) return [];
      const all: number[] = [];
      for (const l of list.values()) all.push(...l);
      return all.sort((a, b) => this.nodes[a].creator - this.nodes[b].creator);
    };
    const pending: { node: number; parent: number }[] = byCreator(this.roots)
      .reverse()
      .map((node) => ({ node, parent: -1 }));
    while (pending.length > 0) {
      const { node, parent } = pending.pop()!;
      const { creator, start, end, children } = this.nodes[node];
      const index = out.length;
      out.push({ creator, start, end, parent });
      const kids = byCreator(children);
      for (let i = kids.length - 1; i >= 0; i--) pending.push({ node: kids[i], parent: index });
    }
    return out;
  }
}

function sameOccurrence(a: MediaItem | null, b: MediaItem | null): boolean {
  if (a === null || b === null) return a === b;
  return a.id === b.id && a.offset === b.offset && a.length === b.length;
}
