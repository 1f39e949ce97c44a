// The pure TypeScript core: the same algorithm as the WebAssembly core (assembly/), written for
// reading. A prefix tree over the eligible calls' full sequences, walked once per call; edges
// point into a store that holds each distinct token once. Every prompt ends at a node, and nodes
// keep who could be a near parent through them (SPEC's prefix_break; see assembly/tree.ts).
import { CoreMemoryError } from "./errors.js";
import {
  AMBIGUOUS_PARENT,
  BREAK_QUOTE,
  type CoreBreak,
  type CoreRouteMismatch,
  SEGMENT_INTS,
  INVALID_LOGPROB,
  INVALID_TOKEN,
  NOT_LINKED,
  WASM_MEMORY_MAX_BYTES,
  KEPT_MEMORY_MAX_BYTES,
  MAX_IDLE_CORES,
  type CoreForest,
  type CorePacked,
  type CoreRow,
  type PackRequest,
  type ForestCore,
  type SizeHints,
  type StagedCall,
} from "./types.js";

/** The most elements a size hint may reserve at once (larger arrays grow as data comes). */
const MAX_HINT = 2 ** 26;

/** chooseParent's answer when no candidate agrees with c (the walk up goes on). */
const NONE_AGREES = -100;

const NO_TOKENS = new Int32Array(0);
const NO_LOGPROBS = new Float32Array(0);

function reverseRange(values: number[], from: number, to: number): void {
  for (let i = from, j = to - 1; i < j; i++, j--) {
    const swap = values[i];
    values[i] = values[j];
    values[j] = swap;
  }
}

/** Sets bits [start, end) of a bitset (SPEC's order): whole bytes at once between the ends. */
function setBits(mask: Uint8Array, start: number, end: number): void {
  let i = start;
  for (; i < end && (i & 7) !== 0; i++) mask[i >> 3] |= 1 << (i & 7);
  const full = (end - i) >> 3;
  if (full > 0) {
    mask.fill(255, i >> 3, (i >> 3) + full);
    i += full << 3;
  }
  for (; i < end; i++) mask[i >> 3] |= 1 << (i & 7);
}

export class TsCore implements ForestCore {
  /** `maxBytes`: the most its arrays may hold at once (init's maxMemory; default 4 GiB, as a WASM core's memory). */
  constructor(
    private readonly maxBytes = WASM_MEMORY_MAX_BYTES,
    /**
     * Whether linking finds prefix breaks (and keeps what it needs for them: prompt nodes, covers,
     * contiguous generations). Always on but in the bench, which measures what they cost.
     */
    private readonly breaksOn = true,
  ) {}

  get memoryLimit(): number {
    return this.maxBytes;
  }

  /**
   * The token store holds the longest call's tokens (4 bytes a token; typed arrays are read in
   * place, unstaged) and some row holds them with their logprobs (8).
   */
  minimumBytes(hints: SizeHints): number {
    return 12 * (hints.longestLinked ?? 0);
  }

  private agentParents = new Int32Array(0);
  private stageTokens = new Int32Array(256);
  private stageLogprobs = new Float32Array(256);
  private badIndex = -1;
  /** Set by link(): the first token of the call outside [0, 2^31-1], or -1. */
  private invalidTokenAt = -1;
  private ambiguous: [number, number] = [-1, -1];
  /** The next commit's media triples (see stageMedia); emptied by every commit. */
  private stagedMedia: Int32Array = NO_TOKENS;
  private mediaMismatch = false;
  /** The next commit's route ids (see stageRoutes), null when none; emptied by every commit. */
  private stagedRoutes: Int32Array | null = null;
  private routeMismatch: CoreRouteMismatch | null = null;
  private prefixBreak: CoreBreak | null = null;

  // Eligible calls, in ledger order.
  private callFull: number[] = [];
  private callPrompt: number[] = [];
  private callAgent: number[] = [];
  private callLpOff: number[] = [];
  private callParent: number[] = [];
  private callEndNode: number[] = [];
  private callEndNext: number[] = [];
  /** Where each call's generation lies, contiguous, in `tokens`. */
  private callGeneration: number[] = [];
  /** Where each call's media triples start in `media` (they run to the next call's start). */
  private callMedia: number[] = [];
  /** Every linked call's media triples (item, offset, length), in ledger order. */
  private media: number[] = [];
  /** Each linked call's route ids for tokens [0, full − 1) (SPEC v4), null when it gives none. */
  private callRoutes: (Int32Array | null)[] = [];
  /** The bytes they hold (counted against maxBytes, as the WebAssembly core's are). */
  private routeBytes = 0;

  // Tree nodes; node 0 is the root (the empty sequence).
  private nodeEdgeOff: number[] = [];
  private nodeEdgeLen: number[] = [];
  private nodeDepth: number[] = [];
  private nodeParent: number[] = [];
  private nodeEndHead: number[] = [];
  // Per node, who could be a near parent through it. A call p covers the edge into node v when
  // full(p) runs through v and len(prompt(p)) <= depth(parent(v)); calls come in ledger order,
  // so the latest is the last one added.
  /** The latest call covering the edge into the node, -1 if none. */
  private coverEdge: number[] = [];
  /** The latest call covering an edge out of the node, -1 if none; and that edge's child. */
  private coverFirst: number[] = [];
  private coverFirstChild: number[] = [];
  /** The latest call covering an edge out of the node to a child other than coverFirstChild. */
  private coverSecond: number[] = [];
  /** Per node, its children by the first token of their edge (null: none yet). */
  private children: (Map<number, number> | null)[] = [];

  private callCount = 0;
  private nodeCount = 0;
  private staging: StagedCall = { tokens: NO_TOKENS, logprobs: NO_LOGPROBS };
  private tokens = new Int32Array(1024);
  private tokenCount = 0;
  private logprobs = new Float32Array(1024);
  private logprobCount = 0;
  // Row output, reused from plan to plan: rows are views into these (valid until release(), as
  // the WASM backend's are views into linear memory).
  private rowTokens = new Int32Array(1024);
  private rowLogprobs = new Float32Array(1024);
  private rowMask = new Uint8Array(1024);
  private rowAt = 0;
  private maskAt = 0;
  // Packed records' output, reused like the rows' (valid until release()).
  private packTokens = new Int32Array(0);
  private packPositions = new Int32Array(0);
  private packLogprobs = new Float32Array(0);
  private packMask = new Uint8Array(0);
  private packAt = 0;
  private packMaskAt = 0;

  begin(agentParents: Int32Array, hints: SizeHints): void {
    this.agentParents = agentParents.slice();
    // Keep the lists' capacity from plan to plan (length = 0 would free their backing stores).
    this.callCount = 0;
    this.nodeCount = 0;
    this.tokenCount = 0;
    this.logprobCount = 0;
    this.media.length = 0; // small: no capacity worth keeping
    this.callRoutes.length = 0;
    this.routeBytes = 0;
    this.stagedMedia = NO_TOKENS;
    this.stagedRoutes = null;
    this.routeMismatch = null;
    // Hints reserve up front, within reason (a wrong one must not allocate gigabytes, nor take
    // more than a quarter of the budget each: a hint never makes a rollout too large).
    const hint = (n: number) => (n <= MAX_HINT && n * 4 <= this.maxBytes / 4 ? n : 0);
    this.logprobs = this.grow(this.logprobs, hint(hints.generated));
    this.tokens = this.grow(this.tokens, hint(hints.longestCall));
    // (Not the staging area: typed arrays are read in place, so stage() grows it only if used.)
    this.newNode(0, 0, 0, -1);
  }

  stage(prompt: number, generated: number): StagedCall {
    this.stageTokens = this.grow(this.stageTokens, prompt + generated);
    this.stageLogprobs = this.grow(this.stageLogprobs, generated);
    const s = this.staging;
    if (s.tokens !== this.stageTokens || s.logprobs !== this.stageLogprobs)
      this.staging = { tokens: this.stageTokens, logprobs: this.stageLogprobs };
    return this.staging;
  }

  staged(): StagedCall {
    return this.staging;
  }

  checkStagedTokens(count: number): number {
    for (let i = 0; i < count; i++) if (this.stageTokens[i] < 0) return i;
    return -1;
  }

  // The call being committed: its tokens are prompt ++ generation, read from these two arrays —
  // the staging area's two parts, or the caller's own arrays (commitArrays: no copy).
  private promptSource: Int32Array = NO_TOKENS;
  private generationSource: Int32Array = NO_TOKENS;
  private logprobSource: Float32Array = NO_LOGPROBS;

  /** Index (into prompt ++ generation) of the first negative token in [from, to), or -1. */
  private firstNegative(from: number, to: number, prompt: number): number {
    const head = this.promptSource;
    for (let i = from, end = Math.min(to, prompt); i < end; i++) if (head[i] < 0) return i;
    const tail = this.generationSource;
    for (let i = Math.max(from, prompt); i < to; i++) if (tail[i - prompt] < 0) return i;
    return -1;
  }

  private firstNonFinite(generated: number): number {
    const logprobs = this.logprobSource;
    for (let i = 0; i < generated; i++) if (!Number.isFinite(logprobs[i])) return i;
    return -1;
  }

  stageMedia(triples: Int32Array): void {
    this.stagedMedia = triples.slice();
  }

  stageRoutes(ids: Int32Array): void {
    // Held until the plan ends, as the WebAssembly core holds them: within the same budget.
    if (this.heldBytes() + ids.byteLength > this.maxBytes)
      throw new CoreMemoryError(`the TypeScript core ran out of memory for route ids at ${this.maxBytes} bytes`);
    this.stagedRoutes = ids.slice();
  }

  lastRouteMismatch(): CoreRouteMismatch | null {
    return this.routeMismatch;
  }

  fullTokens(call: number): Int32Array {
    const out = new Int32Array(this.callFull[call]);
    for (let node = this.callEndNode[call]; node > 0; node = this.nodeParent[node]) {
      const depth = this.nodeDepth[node];
      const edgeLen = this.nodeEdgeLen[node];
      const off = this.nodeEdgeOff[node];
      out.set(this.tokens.subarray(off, off + edgeLen), depth - edgeLen);
    }
    return out;
  }

  lastMediaMismatch(): boolean {
    return this.mediaMismatch;
  }

  lastPrefixBreak(): CoreBreak | null {
    return this.prefixBreak;
  }

  commit(prompt: number, generated: number, agent: number, link: boolean): number {
    this.promptSource = this.stageTokens;
    this.generationSource = this.stageTokens.subarray(prompt, prompt + generated);
    this.logprobSource = this.stageLogprobs;
    return this.commitSources(prompt, generated, agent, link);
  }

  commitArrays(
    prompt: Int32Array,
    generation: Int32Array,
    logprobs: Float32Array,
    agent: number,
    link: boolean,
  ): number {
    this.promptSource = prompt;
    this.generationSource = generation;
    this.logprobSource = logprobs;
    try {
      return this.commitSources(prompt.length, generation.length, agent, link);
    } finally {
      // Let go of the caller's arrays: a pooled core must not keep a released plan's input alive.
      this.promptSource = this.generationSource = NO_TOKENS;
      this.logprobSource = NO_LOGPROBS;
    }
  }

  private commitSources(prompt: number, generated: number, agent: number, link: boolean): number {
    try {
      return this.checkAndLink(prompt, generated, agent, link);
    } finally {
      this.stagedMedia = NO_TOKENS;
      this.stagedRoutes = null;
    }
  }

  private checkAndLink(prompt: number, generated: number, agent: number, link: boolean): number {
    if (!link) {
      this.badIndex = this.firstNegative(0, prompt + generated, prompt);
      if (this.badIndex >= 0) return INVALID_TOKEN;
      this.badIndex = this.firstNonFinite(generated);
      return this.badIndex >= 0 ? INVALID_LOGPROB : NOT_LINKED;
    }
    // Linking checks the tokens as it goes (see link), so they are read once.
    const logprobAt = this.firstNonFinite(generated);
    const parent = this.link(prompt, generated, agent);
    if (this.invalidTokenAt >= 0) {
      this.badIndex = this.invalidTokenAt;
      return INVALID_TOKEN;
    }
    if (logprobAt >= 0) {
      this.badIndex = logprobAt;
      return INVALID_LOGPROB;
    }
    return parent;
  }

  lastBadIndex(): number {
    return this.badIndex;
  }

  ambiguousCandidates(): [number, number] {
    return this.ambiguous;
  }

  private childOf(node: number, token: number): number | undefined {
    return this.children[node]?.get(token);
  }

  private setChild(node: number, token: number, child: number): void {
    (this.children[node] ??= new Map()).set(token, child);
  }

  private newNode(edgeOff: number, edgeLen: number, depth: number, parent: number): number {
    const id = this.nodeCount++;
    this.children[id] = null;
    this.nodeEdgeOff[id] = edgeOff;
    this.nodeEdgeLen[id] = edgeLen;
    this.nodeDepth[id] = depth;
    this.nodeParent[id] = parent;
    this.nodeEndHead[id] = -1;
    this.coverEdge[id] = -1;
    this.coverFirst[id] = -1;
    this.coverFirstChild[id] = -1;
    this.coverSecond[id] = -1;
    return id;
  }

  /**
   * Splits the edge into `child` (a child of `node` by `token`) after `same` of its tokens; returns
   * the new node between them. What covers the edge covers both halves (no prompt ends inside an
   * edge), so the cover records carry over.
   */
  private splitEdge(node: number, token: number, child: number, same: number): number {
    const edgeOff = this.nodeEdgeOff[child];
    const mid = this.newNode(edgeOff, same, this.nodeDepth[node] + same, node);
    this.setChild(node, token, mid);
    this.nodeEdgeOff[child] = edgeOff + same;
    this.nodeEdgeLen[child] -= same;
    this.nodeParent[child] = mid;
    this.setChild(mid, this.tokens[edgeOff + same], child);
    const covering = this.coverEdge[child];
    this.coverEdge[mid] = covering;
    this.coverFirst[mid] = covering;
    this.coverFirstChild[mid] = child;
    if (this.coverFirstChild[node] === child) this.coverFirstChild[node] = mid;
    return mid;
  }

  /** Records that call c (the latest so far) covers the edge into `child`. */
  private addCover(child: number, c: number): void {
    this.coverEdge[child] = c;
    const node = this.nodeParent[child];
    if (this.coverFirstChild[node] !== child) {
      this.coverSecond[node] = this.coverFirst[node];
      this.coverFirstChild[node] = child;
    }
    this.coverFirst[node] = c;
  }

  /**
   * SPEC's prefix_break for c (just inserted, its prompt ending at `promptNode`): the deepest node
   * on c's prompt path, below its parent's sequence, where an earlier call's generation parts
   * from c's prompt.
   */
  private findBreak(c: number, promptNode: number, parent: number): CoreBreak | null {
    const floor = parent >= 0 ? this.callFull[parent] : 0;
    let below = promptNode;
    for (let node = this.nodeParent[below]; node >= 0; node = this.nodeParent[node]) {
      const at = this.nodeDepth[node];
      if (at <= floor) return null;
      const near = this.coverFirstChild[node] !== below ? this.coverFirst[node] : this.coverSecond[node];
      if (near >= 0) {
        const from = this.callGeneration[near] + at - this.callPrompt[near];
        const expected = Array.from(this.tokens.subarray(from, from + Math.min(BREAK_QUOTE, this.callFull[near] - at)));
        const found = Array.from(this.promptSource.subarray(at, Math.min(at + BREAK_QUOTE, this.callPrompt[c])));
        return { near, at, expected, found };
      }
      below = node;
    }
    return null;
  }

  /** Appends tokens [from, to) of the call (prompt ++ generation) to the store; returns where. */
  private storeTokens(from: number, to: number, prompt: number): number {
    const at = this.tokenCount;
    this.tokens = this.grow(this.tokens, at + to - from);
    if (from < prompt) this.tokens.set(this.promptSource.subarray(from, Math.min(to, prompt)), at);
    if (to > prompt)
      this.tokens.set(
        this.generationSource.subarray(Math.max(from, prompt) - prompt, to - prompt),
        at + Math.max(0, prompt - from),
      );
    this.tokenCount = at + to - from;
    return at;
  }

  private link(prompt: number, generated: number, agent: number): number {
    this.invalidTokenAt = -1;
    const c = this.callCount++;
    const full = prompt + generated;
    this.logprobs = this.grow(this.logprobs, this.logprobCount + generated);
    this.logprobs.set(this.logprobSource.subarray(0, generated), this.logprobCount);
    this.callFull[c] = full;
    this.callPrompt[c] = prompt;
    this.callAgent[c] = agent;
    this.callLpOff[c] = this.logprobCount;
    this.logprobCount += generated;
    this.callMedia[c] = this.media.length;
    for (const value of this.stagedMedia) this.media.push(value);
    this.callRoutes[c] = this.stagedRoutes === null ? null : this.stagedRoutes.subarray(0, full - 1);
    this.routeBytes += this.stagedRoutes?.byteLength ?? 0;

    // Walk full(c) down the tree, inserting what is new, with a node where the prompt ends.
    // `best` is the deepest node at depth <= len(prompt) where an earlier full sequence ends:
    // those calls are the candidates.
    const head = this.promptSource;
    const tail = this.generationSource;
    const tokenAt = (i: number) => (i < prompt ? head[i] : tail[i - prompt]);
    let node = 0;
    let pos = 0;
    let best = -1;
    let generation = -1;
    let promptNode = 0;
    while (pos < full) {
      let token = tokenAt(pos);
      const child = this.childOf(node, token);
      if (child === undefined) {
        // Tokens that matched the tree equal tokens checked before: only new ones can be bad.
        this.invalidTokenAt = this.firstNegative(pos, full, prompt);
        // The generation is stored whole, even where it runs along the tree (prompt < pos).
        const from = this.breaksOn ? Math.min(pos, prompt) : pos;
        const at = this.storeTokens(from, full, prompt);
        generation = at + prompt - from;
        if (this.breaksOn && pos < prompt) {
          const mid = this.newNode(at, prompt - pos, prompt, node);
          this.setChild(node, token, mid);
          node = mid;
          pos = prompt;
          token = tail[0];
        }
        const leaf = this.newNode(at + pos - from, full - pos, full, node);
        this.setChild(node, token, leaf);
        if (pos === prompt) promptNode = node;
        node = leaf;
        break;
      }
      const edgeOff = this.nodeEdgeOff[child];
      const edgeLen = this.nodeEdgeLen[child];
      const room = Math.min(edgeLen, full - pos);
      const stored = this.tokens;
      // Compare the edge with the call's tokens: the prompt's part, then (if the edge runs on)
      // the generation's.
      const inPrompt = Math.max(0, Math.min(room, prompt - pos));
      let same = 0;
      for (
        let i = edgeOff, end = edgeOff + inPrompt, delta = pos - edgeOff;
        i < end && stored[i] === head[i + delta];
        i++
      )
        same++;
      if (same === inPrompt) {
        for (
          let i = edgeOff + same, end = edgeOff + room, delta = pos - prompt - edgeOff;
          i < end && stored[i] === tail[i + delta];
          i++
        )
          same++;
      }
      if (this.breaksOn && pos < prompt && prompt - pos < same) {
        // The prompt ends inside the edge, which goes on along the call: a node there.
        const cut = prompt - pos;
        node = this.splitEdge(node, token, child, cut);
        promptNode = node;
        pos = prompt;
        same -= cut;
        token = tail[0];
        if (same === edgeLen - cut) {
          node = child;
          pos += same;
          continue;
        }
      } else if (same === edgeLen) {
        node = child;
        pos += edgeLen;
        if (pos <= prompt && this.nodeEndHead[node] >= 0) best = node;
        if (pos === prompt) promptNode = node;
        continue;
      }
      // full(c) leaves (or ends inside) the edge: split it after `same` tokens.
      node = this.splitEdge(node, token, child, same);
      pos += same;
      if (pos === prompt) promptNode = node;
    }
    if (generation < 0 && this.breaksOn) generation = this.storeTokens(prompt, full, prompt);
    this.callGeneration[c] = generation;
    this.callEndNode[c] = node;
    this.callEndNext[c] = this.nodeEndHead[node];
    this.nodeEndHead[node] = c;

    this.mediaMismatch = false;
    this.routeMismatch = null;
    // A rollout with no media and no routes so far (c's included) links by tokens alone, as in SPEC v1.
    const parent =
      best < 0
        ? -1
        : this.media.length === 0 && this.callRoutes[c] === null
          ? this.chooseParent(c, this.nodeEndHead[best], false)
          : this.linkByAgreement(c, best);
    this.callParent[c] = parent;
    if (!this.breaksOn) return parent;
    this.prefixBreak = this.invalidTokenAt < 0 && parent >= -1 ? this.findBreak(c, promptNode, parent) : null;
    // c covers the edges of its generation, for the calls after it.
    for (let v = node; this.nodeDepth[v] > prompt; v = this.nodeParent[v]) this.addCover(v, c);
    return parent;
  }

  /** Number of media triple values (3 per occurrence) of linked call x. */
  private mediaInts(x: number): number {
    const end = x + 1 < this.callCount ? this.callMedia[x + 1] : this.media.length;
    return end - this.callMedia[x];
  }

  /**
   * SPEC's media clause: media(p) == media(c) before len(full(p)). p's occurrences all lie in its
   * prompt, so they must be c's first ones exactly, and c's next one must start at or past full(p).
   */
  private mediaAgree(p: number, c: number): boolean {
    const pInts = this.mediaInts(p);
    const cInts = this.mediaInts(c);
    if (pInts > cInts) return false;
    const media = this.media;
    const pAt = this.callMedia[p];
    const cAt = this.callMedia[c];
    for (let i = 0; i < pInts; i++) if (media[pAt + i] !== media[cAt + i]) return false;
    return pInts === cInts || media[cAt + pInts + 1] >= this.callFull[p];
  }

  /** The first token before p's last where p's and c's route ids differ, or -1 (also when either has none). */
  private firstRouteDifference(p: number, c: number): number {
    const pRoutes = this.callRoutes[p];
    const cRoutes = this.callRoutes[c];
    if (pRoutes === null || cRoutes === null) return -1;
    for (let i = 0; i < pRoutes.length; i++) if (pRoutes[i] !== cRoutes[i]) return i;
    return -1;
  }

  /** SPEC's media and routes clauses. */
  private agrees(p: number, c: number): boolean {
    return this.mediaAgree(p, c) && this.firstRouteDifference(p, c) < 0;
  }

  /**
   * Linking with the media and routes clauses: from `best` (the deepest node where an earlier full
   * sequence ends inside c's prompt) up, the first node with a call that agrees on both holds the
   * candidates; the first node with one whose media agree is where tokens and media alone would
   * have linked c (SPEC's route_mismatch when none agrees on routes there).
   */
  private linkByAgreement(c: number, best: number): number {
    let nearPending = true; // no node with a media-agreeing candidate seen yet
    for (let node = best; node > 0; node = this.nodeParent[node]) {
      const head = this.nodeEndHead[node];
      if (head < 0) continue;
      // (Each candidate's routes are compared once here, in chooseParent's first pass.)
      const parent = this.chooseParent(c, head, true);
      if (parent !== NONE_AGREES) return parent;
      let near = -1;
      for (let x = head; x >= 0 && near < 0; x = this.callEndNext[x]) if (this.mediaAgree(x, c)) near = x;
      if (near < 0) {
        if (node === best) this.mediaMismatch = true;
      } else if (nearPending) {
        nearPending = false;
        this.routeMismatch = { near, at: this.firstRouteDifference(near, c) };
      }
    }
    return -1;
  }

  /**
   * SPEC's tie-break among calls with identical full sequences (a list through callEndNext), among
   * those that agree with c on media and routes when `filtered` (NONE_AGREES when none does).
   */
  private chooseParent(c: number, candidates: number, filtered: boolean): number {
    if (!filtered && this.callEndNext[candidates] < 0) return candidates;
    const agreeing: number[] = [];
    for (let x = candidates; x >= 0; x = this.callEndNext[x]) if (!filtered || this.agrees(x, c)) agreeing.push(x);
    if (agreeing.length === 1) return agreeing[0];
    if (agreeing.length === 0) return NONE_AGREES;
    const pickBy = (agent: number): number[] => agreeing.filter((x) => this.callAgent[x] === agent);
    let picked = pickBy(this.callAgent[c]);
    if (picked.length === 0) {
      // Agents past the table (unlisted ones) have no parent agent.
      const parentAgent = this.agentParents[this.callAgent[c]] ?? -1;
      if (parentAgent >= 0) picked = pickBy(parentAgent);
    }
    if (picked.length === 1) return picked[0];
    this.ambiguous = [agreeing[0], agreeing[1]];
    return AMBIGUOUS_PARENT;
  }

  finish(packs: readonly PackRequest[] = []): CoreForest {
    const forest = this.buildRows();
    forest.packed = packs.map((request, i) => this.pack(request, i === 0));
    return forest;
  }

  /** Fills a request's records: views into arrays kept from plan to plan, as rows' are. */
  private pack(request: PackRequest, first: boolean): CorePacked[] {
    const { segments, recordStarts, recordTokens } = request;
    let total = 0;
    let maskTotal = 0;
    for (const tokens of recordTokens) {
      total += tokens;
      maskTotal += (tokens + 7) >> 3;
    }
    // Later requests of one finish() go after the earlier ones (their views must stay valid).
    if (first) this.packAt = this.packMaskAt = 0;
    this.packTokens = this.grow(this.packTokens, this.packAt + total, this.packAt);
    this.packPositions = this.grow(this.packPositions, this.packAt + total, this.packAt);
    this.packLogprobs = this.grow(this.packLogprobs, this.packAt + total, this.packAt);
    this.packMask = this.grow(this.packMask, this.packMaskAt + maskTotal, this.packMaskAt);
    return Array.from(recordTokens, (tokens, r) => {
      const at = this.packAt;
      const maskAt = this.packMaskAt;
      this.packAt += tokens;
      this.packMaskAt += (tokens + 7) >> 3;
      const record: CorePacked = {
        tokenIds: this.packTokens.subarray(at, at + tokens),
        positionIds: this.packPositions.subarray(at, at + tokens),
        logprobs: this.packLogprobs.subarray(at, at + tokens).fill(0),
        lossMask: this.packMask.subarray(maskAt, this.packMaskAt).fill(0),
      };
      let offset = 0;
      for (let s = recordStarts[r]; s < recordStarts[r + 1]; s++) {
        const [call, from, length, trained] = segments.subarray(SEGMENT_INTS * s, SEGMENT_INTS * (s + 1));
        this.writeSegment(call, from, from + length, trained !== 0, offset, record);
        offset += length;
      }
      return record;
    });
  }

  /** Writes full(call)[from : to] at packed index `at`: tokens, positions, logprobs, mask bits. */
  private writeSegment(call: number, from: number, to: number, trained: boolean, at: number, record: CorePacked): void {
    const prompt = this.callPrompt[call];
    for (let node = this.callEndNode[call]; node > 0; node = this.nodeParent[node]) {
      const depth = this.nodeDepth[node];
      if (depth <= from) break;
      const edgeStart = depth - this.nodeEdgeLen[node];
      const low = Math.max(edgeStart, from);
      const high = Math.min(depth, to);
      const off = this.nodeEdgeOff[node] + low - edgeStart;
      if (high > low) record.tokenIds.set(this.tokens.subarray(off, off + high - low), at + low - from);
    }
    for (let k = 0; k < to - from; k++) record.positionIds[at + k] = from + k;
    // Generated tokens of the segment: [max(from, prompt), to).
    const generatedFrom = Math.max(from, prompt);
    if (to <= generatedFrom) return;
    const lp = this.callLpOff[call] + generatedFrom - prompt;
    record.logprobs.set(this.logprobs.subarray(lp, lp + to - generatedFrom), at + generatedFrom - from);
    if (trained) setBits(record.lossMask, at + generatedFrom - from, at + to - from);
  }

  private buildRows(): CoreForest {
    const n = this.callCount;
    const parents = new Int32Array(n);
    for (let c = 0; c < n; c++) parents[c] = this.callParent[c];
    const firstChild = new Int32Array(n).fill(-1);
    const sameAgentChild = new Int32Array(n).fill(-1);
    for (let c = 0; c < n; c++) {
      const p = parents[c];
      if (p < 0) continue;
      if (firstChild[p] < 0) firstChild[p] = c;
      if (sameAgentChild[p] < 0 && this.callAgent[c] === this.callAgent[p]) sameAgentChild[p] = c;
    }
    const leaves: number[] = [];
    const rowOfLeaf = new Int32Array(n).fill(-1);
    for (let c = 0; c < n; c++) {
      if (firstChild[c] < 0) {
        rowOfLeaf[c] = leaves.length;
        leaves.push(c);
      }
    }
    // Ownership: the owner of a call is the owner of its next call (the earliest same-agent
    // child, else the earliest child); children come later in ledger order, so walk backwards.
    const ownerRows = new Int32Array(n);
    for (let c = n - 1; c >= 0; c--) {
      if (firstChild[c] < 0) ownerRows[c] = rowOfLeaf[c];
      else ownerRows[c] = ownerRows[sameAgentChild[c] >= 0 ? sameAgentChild[c] : firstChild[c]];
    }
    let total = 0;
    let maskTotal = 0;
    for (const leaf of leaves) {
      total += this.callFull[leaf];
      maskTotal += (this.callFull[leaf] + 7) >> 3;
    }
    // Room for every row at once, before any row is made (the rows are views into it). Not
    // grow() (which copies): the old rows are gone.
    if (this.rowTokens.length < total) {
      // Tokens and logprobs side by side: 8 bytes a row token.
      const size = this.roomFor(
        this.rowTokens.byteLength + this.rowLogprobs.byteLength,
        8,
        total,
        Math.max(total, this.rowTokens.length * 2),
      );
      this.rowTokens = new Int32Array(size);
      this.rowLogprobs = new Float32Array(size);
    }
    if (this.rowMask.length < maskTotal)
      this.rowMask = new Uint8Array(
        this.roomFor(this.rowMask.byteLength, 1, maskTotal, Math.max(maskTotal, this.rowMask.length * 2)),
      );
    this.rowAt = 0;
    this.maskAt = 0;
    const paths: number[] = [];
    const rows: CoreRow[] = leaves.map((leaf, row) => this.buildRow(leaf, row, parents, ownerRows, paths));
    return { parents, ownerRows, paths, rows, packed: [] };
  }

  private buildRow(leaf: number, row: number, parents: Int32Array, ownerRows: Int32Array, paths: number[]): CoreRow {
    const pathStart = paths.length;
    for (let x = leaf; x >= 0; x = parents[x]) paths.push(x);
    const pathLength = paths.length - pathStart;
    reverseRange(paths, pathStart, paths.length);
    const numTokens = this.callFull[leaf];
    const at = this.rowAt;
    this.rowAt += numTokens;
    const tokenIds = this.rowTokens.subarray(at, at + numTokens);
    for (let node = this.callEndNode[leaf]; node > 0; node = this.nodeParent[node]) {
      const len = this.nodeEdgeLen[node];
      const off = this.nodeEdgeOff[node];
      tokenIds.set(this.tokens.subarray(off, off + len), this.nodeDepth[node] - len);
    }
    const logprobs = this.rowLogprobs.subarray(at, at + numTokens).fill(0);
    const maskAt = this.maskAt;
    this.maskAt += (numTokens + 7) >> 3;
    const lossMask = this.rowMask.subarray(maskAt, this.maskAt).fill(0);
    for (let k = pathStart; k < pathStart + pathLength; k++) {
      const x = paths[k];
      const start = this.callPrompt[x];
      const end = this.callFull[x];
      const off = this.callLpOff[x];
      logprobs.set(this.logprobs.subarray(off, off + end - start), start);
      if (ownerRows[x] === row) setBits(lossMask, start, end);
    }
    return { leaf, pathStart, pathLength, tokenIds, logprobs, lossMask };
  }

  /**
   * `array`, or a copy with room for `need` elements that keeps its first `kept` (doubling, within
   * the budget). Past the budget: a CoreMemoryError, which rejects the rollout with
   * rollout_too_large, as a WASM core's memory limit does, rather than letting the process grow
   * until the system kills it.
   */
  private grow<T extends Int32Array | Float32Array | Uint8Array>(array: T, need: number, kept = array.length): T {
    if (need <= array.length) return array;
    const size = this.roomFor(array.byteLength, array.BYTES_PER_ELEMENT, need, Math.max(need, array.length * 2, 256));
    const bigger = new (array.constructor as { new (n: number): T })(size);
    bigger.set(kept === array.length ? array : array.subarray(0, kept)); // only what is still in use
    return bigger;
  }

  /**
   * How many elements of `bytesPerElement` to allocate in place of arrays holding `replacedBytes`:
   * `wanted`, or fewer but at least `need` if the budget is short; throws past it.
   */
  private roomFor(replacedBytes: number, bytesPerElement: number, need: number, wanted: number): number {
    const left = Math.floor((this.maxBytes - this.heldBytes() + replacedBytes) / bytesPerElement);
    if (need > left) {
      const limit =
        this.maxBytes === WASM_MEMORY_MAX_BYTES
          ? "4 GiB, as a WebAssembly core's"
          : `init's maxMemory of ${this.maxBytes} bytes`;
      throw new CoreMemoryError(`the TypeScript core ran out of memory at ${limit}`);
    }
    return Math.min(wanted, left);
  }

  /** Bytes held by the arrays kept from plan to plan (the token-sized ones: the rest is smaller). */
  heldBytes(): number {
    const arrays = [
      this.stageTokens,
      this.stageLogprobs,
      this.tokens,
      this.logprobs,
      this.rowTokens,
      this.rowLogprobs,
      this.rowMask,
      this.packTokens,
      this.packPositions,
      this.packLogprobs,
      this.packMask,
    ];
    return arrays.reduce((sum, array) => sum + array.byteLength, this.routeBytes);
  }

  release(): void {
    // The arrays (rows' included) serve the next plan. TsCorePool's lease hands the core on; the
    // plan has emptied its rows by then (see PlannedRollout.release). Route ids are the plan's own.
    this.callRoutes.length = 0;
    this.routeBytes = 0;
  }
}

/**
 * One plan's hold on a pooled core. After release() it lets go of the core, which may serve the
 * next plan by then: a second release() or a late call from this holder cannot reach it.
 */
class TsCoreLease implements ForestCore {
  constructor(
    private core: TsCore | null,
    private readonly giveBack: (core: TsCore) => void,
  ) {}

  private held(): TsCore {
    if (this.core === null) throw new Error("this core was released");
    return this.core;
  }

  get memoryLimit(): number {
    return this.held().memoryLimit;
  }

  minimumBytes(hints: SizeHints): number {
    return this.held().minimumBytes(hints);
  }

  begin(agentParents: Int32Array, hints: SizeHints): void {
    this.held().begin(agentParents, hints);
  }

  stage(prompt: number, generated: number): StagedCall {
    return this.held().stage(prompt, generated);
  }

  staged(): StagedCall {
    return this.held().staged();
  }

  checkStagedTokens(count: number): number {
    return this.held().checkStagedTokens(count);
  }

  stageMedia(triples: Int32Array): void {
    this.held().stageMedia(triples);
  }

  stageRoutes(ids: Int32Array): void {
    this.held().stageRoutes(ids);
  }

  lastRouteMismatch(): CoreRouteMismatch | null {
    return this.held().lastRouteMismatch();
  }

  fullTokens(call: number): Int32Array {
    return this.held().fullTokens(call);
  }

  lastMediaMismatch(): boolean {
    return this.held().lastMediaMismatch();
  }

  lastPrefixBreak(): CoreBreak | null {
    return this.held().lastPrefixBreak();
  }

  commit(prompt: number, generated: number, agent: number, link: boolean): number {
    return this.held().commit(prompt, generated, agent, link);
  }

  commitArrays(
    prompt: Int32Array,
    generation: Int32Array,
    logprobs: Float32Array,
    agent: number,
    link: boolean,
  ): number {
    return this.held().commitArrays(prompt, generation, logprobs, agent, link);
  }

  lastBadIndex(): number {
    return this.held().lastBadIndex();
  }

  ambiguousCandidates(): [number, number] {
    return this.held().ambiguousCandidates();
  }

  finish(packs?: readonly PackRequest[]): CoreForest {
    return this.held().finish(packs);
  }

  release(reusable = true): void {
    const core = this.core;
    this.core = null;
    if (core !== null && reusable) this.giveBack(core);
  }
}

/**
 * Recycles TS cores like WasmCorePool recycles instances, so a batch of small rollouts does not
 * re-grow every array from scratch for each plan (both backends keep capacity across plans).
 * Each plan gets its own lease, as each gets its own WasmCore.
 */
export class TsCorePool {
  private readonly idle: TsCore[] = [];

  /**
   * `maxBytes`: each core's budget (init's maxMemory, at most 4 GiB as for a WASM core);
   * `keepBytes`: the most a released core may hold (TsCore.heldBytes) and still be pooled.
   */
  constructor(
    private readonly maxBytes = WASM_MEMORY_MAX_BYTES,
    private readonly keepBytes = KEPT_MEMORY_MAX_BYTES,
    /** Off only in the bench (see TsCore's breaksOn). */
    private readonly breaksOn = true,
  ) {}

  acquire(): ForestCore {
    return new TsCoreLease(this.idle.pop() ?? new TsCore(this.maxBytes, this.breaksOn), (core) => {
      core.release(); // an idle core keeps no plan's data alive
      if (core.heldBytes() <= this.keepBytes && this.idle.length < MAX_IDLE_CORES) this.idle.push(core);
    });
  }
}
