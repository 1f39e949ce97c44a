// Linking (SPEC "Linking"): a prefix tree over the full sequences of the eligible calls, walked
// once per call. Each token of each call is compared once (SIMD), so linking is linear in the
// total number of tokens; edges point into a store that keeps every distinct token once.
//
// Prefix breaks (SPEC "Prefix breaks") come from the same tree. Every prompt ends at a node, and
// each node keeps, for the calls whose *generation* runs through it, the latest such call per
// child (the two latest from different children). A near parent p of c parts from c's prompt
// inside p's generation, at a node n on c's path (after c is inserted, every place where c parts
// from an earlier sequence is a node): the latest call through a child of n other than c's with
// len(prompt(p)) <= depth(n). Walking up c's prompt path from its end to its parent's depth finds
// the deepest such node, O(1) a node; so the diagnostic stays linear in the total tokens.
import { Vec, vecAt, vecGrow, vecRestart } from "./vec";
import { commonPrefix, firstNegative } from "./compare";
import { childGet, childSet, childrenReset } from "./children";
import { AMBIGUOUS_PARENT, INVALID_TOKEN } from "./codes";

// Call record (32 bytes), one per committed eligible call, in ledger order.
export const C_FULL: i32 = 0; // len(full(c))
export const C_PROMPT: i32 = 4; // len(prompt(c))
export const C_AGENT: i32 = 8; // agent index
export const C_LP: i32 = 12; // offset of its logprobs in LOGPROBS
export const C_PARENT: i32 = 16; // parent call, -1 for a root
export const C_END_NODE: i32 = 20; // tree node where full(c) ends
export const C_END_NEXT: i32 = 24; // next call ending at the same node, -1 at the end
export const C_MEDIA: i32 = 28; // offset of its media triples in MEDIA (they run to the next call's)

// Node record (32 bytes). The edge into a node holds tokens [depth - edgeLen, depth) of every
// sequence through it; they are stored at TOKENS[edgeOff .. edgeOff + edgeLen).
export const N_EDGE_OFF: i32 = 0;
export const N_EDGE_LEN: i32 = 4;
export const N_DEPTH: i32 = 8;
export const N_PARENT: i32 = 12;
export const N_END_HEAD: i32 = 16; // first call whose full sequence ends here, -1 if none

// Cover record (16 bytes), one per node, beside NODES: who could be a near parent through it.
// A call p "covers" the edge into node v when full(p) runs through v and len(prompt(p)) <=
// depth(parent(v)) (the edge lies in p's generation). Calls are added in ledger order, so the
// latest is the one added last.
const K_EDGE: i32 = 0; // the latest call covering the edge into this node, -1 if none
const K_FIRST: i32 = 4; // the latest call covering an edge out of this node, -1 if none
const K_FIRST_CHILD: i32 = 8; // the child whose edge that call covers
const K_SECOND: i32 = 12; // the latest covering an edge out of this node to a child other than K_FIRST_CHILD

// Extra call fields, beside CALLS (4 bytes each): where the call's generation tokens lie,
// contiguous, in TOKENS (a near parent's expected tokens are read there).

export const CALLS = changetype<Vec>(memory.data(offsetof<Vec>()));
export const NODES = changetype<Vec>(memory.data(offsetof<Vec>()));
export const TOKENS = changetype<Vec>(memory.data(offsetof<Vec>()));
export const LOGPROBS = changetype<Vec>(memory.data(offsetof<Vec>()));
export const AGENT_PARENTS = changetype<Vec>(memory.data(offsetof<Vec>()));
/** Every linked call's media occurrences, in ledger order: (item, offset, length) triples of i32. */
export const MEDIA = changetype<Vec>(memory.data(offsetof<Vec>()));
const COVER = changetype<Vec>(memory.data(offsetof<Vec>()));
const CALL_GEN = changetype<Vec>(memory.data(offsetof<Vec>()));
/**
 * SPEC v4's routes: every linked call's route ids (the host numbers each distinct L × K block) for
 * tokens [0, full − 1) — its last token's route is none — and where each call's start (-1: none).
 */
const ROUTES = changetype<Vec>(memory.data(offsetof<Vec>()));
const CALL_ROUTES = changetype<Vec>(memory.data(offsetof<Vec>()));

/**
 * Whether linking finds prefix breaks (and keeps what it needs for them: prompt nodes, covers,
 * contiguous generations). Always on but in the bench, which measures what they cost.
 */
export let breaksOn: bool = true;
export function setBreaksOn(on: bool): void {
  breaksOn = on;
}

/** Tokens a prefix_break quotes on each side (SPEC: "up to 8 tokens each"). */
export const BREAK_QUOTE: i32 = 8;
/** After linkCall: c's near parent (SPEC's prefix_break), -1 if none; then breakAt and the quotes. */
export let breakNear: i32 = -1;
export let breakAt: i32 = -1;
export let breakExpectedLength: i32 = 0;
export let breakFoundLength: i32 = 0;
/** expected (BREAK_QUOTE i32s), then found (BREAK_QUOTE i32s). */
export const breakTokens: usize = memory.data(64, 16); // 2 × BREAK_QUOTE i32s

/** Two of the tied candidates when linking reports an ambiguous parent. */
export let ambiguousFirst: i32 = -1;
export let ambiguousSecond: i32 = -1;
/** After linkCall returned INVALID_TOKEN: index of the first negative token of the call. */
export let invalidTokenAt: i32 = -1;
/**
 * After linkCall: true when no candidate of the longest token-prefix length agreed on media
 * (SPEC's media_mismatch), so the call was linked to a shorter one or became a root.
 */
export let mediaMismatch: bool = false;
/**
 * After linkCall: SPEC's route_mismatch — the latest of the longest candidates by tokens and media
 * when none of them agreed on routes (-1: none), and the first token where their routes differ.
 */
export let routeNear: i32 = -1;
export let routeAt: i32 = -1;

// @ts-ignore: decorator
@inline export function callField(c: i32, field: i32): i32 {
  return load<i32>(vecAt(CALLS, c) + <usize>field);
}
// @ts-ignore: decorator
@inline export function setCallField(c: i32, field: i32, value: i32): void {
  store<i32>(vecAt(CALLS, c) + <usize>field, value);
}
// @ts-ignore: decorator
@inline export function nodeField(n: i32, field: i32): i32 {
  return load<i32>(vecAt(NODES, n) + <usize>field);
}
// @ts-ignore: decorator
@inline function setNodeField(n: i32, field: i32, value: i32): void {
  store<i32>(vecAt(NODES, n) + <usize>field, value);
}
// @ts-ignore: decorator
@inline function cover(n: i32, field: i32): i32 {
  return load<i32>(vecAt(COVER, n) + <usize>field);
}
// @ts-ignore: decorator
@inline function setCover(n: i32, field: i32, value: i32): void {
  store<i32>(vecAt(COVER, n) + <usize>field, value);
}

/**
 * Empties the forest (after a heap reset), sized by the caller's hints: calls, generated tokens,
 * and the longest call (prompt + generation), which the token store must hold at least.
 */
export function treeReset(agents: i32, callsHint: i32, generatedHint: i32, longestHint: i32): void {
  vecRestart(CALLS, 5, callsHint);
  vecRestart(CALL_GEN, 2, callsHint);
  // Up to three nodes a call: where it leaves the tree, where its prompt ends, where it ends.
  vecRestart(NODES, 5, callsHint * 3 + 1);
  vecRestart(COVER, 4, callsHint * 3 + 1);
  vecRestart(TOKENS, 2, longestHint); // distinct tokens: at least the longest call's
  vecRestart(LOGPROBS, 2, generatedHint);
  vecRestart(AGENT_PARENTS, 2, agents);
  vecGrow(AGENT_PARENTS, agents);
  vecRestart(MEDIA, 2, 0);
  vecRestart(ROUTES, 2, 0);
  vecRestart(CALL_ROUTES, 2, callsHint);
  routeNear = -1;
  childrenReset(callsHint * 3 + 1);
  newNode(0, 0, 0, -1); // the root: the empty sequence
}

function newNode(edgeOff: i32, edgeLen: i32, depth: i32, parent: i32): i32 {
  const n = vecGrow(NODES, 1);
  setNodeField(n, N_EDGE_OFF, edgeOff);
  setNodeField(n, N_EDGE_LEN, edgeLen);
  setNodeField(n, N_DEPTH, depth);
  setNodeField(n, N_PARENT, parent);
  setNodeField(n, N_END_HEAD, -1);
  vecGrow(COVER, 1);
  setCover(n, K_EDGE, -1);
  setCover(n, K_FIRST, -1);
  setCover(n, K_FIRST_CHILD, -1);
  setCover(n, K_SECOND, -1);
  return n;
}

/**
 * Splits the edge into `child` (a child of `node` by `token`) after `same` of its tokens; returns
 * the new node between them. What covers the edge covers both halves (no prompt ends inside an
 * edge), so the cover records carry over.
 */
function splitEdge(node: i32, token: i32, child: i32, same: i32): i32 {
  const edgeOff = nodeField(child, N_EDGE_OFF);
  const mid = newNode(edgeOff, same, nodeField(node, N_DEPTH) + same, node);
  childSet(node, token, mid);
  setNodeField(child, N_EDGE_OFF, edgeOff + same);
  setNodeField(child, N_EDGE_LEN, nodeField(child, N_EDGE_LEN) - same);
  setNodeField(child, N_PARENT, mid);
  childSet(mid, load<i32>(vecAt(TOKENS, edgeOff + same)), child);
  const covering = cover(child, K_EDGE);
  setCover(mid, K_EDGE, covering);
  setCover(mid, K_FIRST, covering);
  setCover(mid, K_FIRST_CHILD, child);
  if (cover(node, K_FIRST_CHILD) == child) setCover(node, K_FIRST_CHILD, mid);
  return mid;
}

/** Records that call c (the latest so far) covers the edge into `child` (see K_EDGE). */
function addCover(child: i32, c: i32): void {
  setCover(child, K_EDGE, c);
  const node = nodeField(child, N_PARENT);
  if (cover(node, K_FIRST_CHILD) != child) {
    setCover(node, K_SECOND, cover(node, K_FIRST));
    setCover(node, K_FIRST_CHILD, child);
  }
  setCover(node, K_FIRST, c);
}

/** Writes full(c) at `into` (room for C_FULL i32s), from the tree edges between its end node and the root. */
export function copyFull(c: i32, into: usize): void {
  for (let node = callField(c, C_END_NODE); node > 0; node = nodeField(node, N_PARENT)) {
    const depth = nodeField(node, N_DEPTH);
    const edgeLen = nodeField(node, N_EDGE_LEN);
    memory.copy(into + ((<usize>(depth - edgeLen)) << 2), vecAt(TOKENS, nodeField(node, N_EDGE_OFF)), (<usize>edgeLen) << 2);
  }
}

/** Copies tokens [from, to) of the staged call into the token store; returns their offset. */
function storeTokens(staged: usize, from: i32, to: i32): i32 {
  const at = vecGrow(TOKENS, to - from);
  memory.copy(vecAt(TOKENS, at), staged + ((<usize>from) << 2), (<usize>(to - from)) << 2);
  return at;
}

/** The node where the prompt of the call being inserted ends (set by insert). */
let promptNode: i32 = 0;

/**
 * Inserts full(c) (staged at `staged`, `full` tokens, the first `prompt` of them the prompt) and
 * returns the deepest tree node at depth <= prompt where an earlier full sequence ends (-1: none).
 * Makes a node where the prompt ends (promptNode) and records where the generation lies in TOKENS.
 *
 * It also checks the call's tokens, for free: tokens that match the tree equal tokens checked
 * before, so only the tokens it stores can be out of range. Sets invalidTokenAt (-1: all valid).
 */
function insert(c: i32, staged: usize, prompt: i32, full: i32): i32 {
  invalidTokenAt = -1;
  let node = 0;
  let pos = 0;
  let best = -1;
  let generation = -1;
  promptNode = 0;
  while (pos < full) {
    let token = load<i32>(staged + ((<usize>pos) << 2));
    const child = childGet(node, token);
    if (child < 0) {
      const bad = firstNegative(staged + ((<usize>pos) << 2), full - pos);
      if (bad >= 0) invalidTokenAt = pos + bad;
      // The generation is stored whole, even where it runs along the tree (prompt < pos).
      const from = breaksOn ? min(pos, prompt) : pos;
      const at = storeTokens(staged, from, full);
      generation = at + prompt - from;
      if (breaksOn && pos < prompt) {
        // A node where the prompt ends, then the generation.
        const mid = newNode(at, prompt - pos, prompt, node);
        childSet(node, token, mid);
        node = mid;
        pos = prompt;
        token = load<i32>(staged + ((<usize>pos) << 2));
      }
      const leaf = newNode(at + pos - from, full - pos, full, node);
      childSet(node, token, leaf);
      if (pos == prompt) promptNode = node;
      node = leaf;
      break;
    }
    const edgeLen = nodeField(child, N_EDGE_LEN);
    const room = min(edgeLen, full - pos);
    let same = commonPrefix(vecAt(TOKENS, nodeField(child, N_EDGE_OFF)), staged + ((<usize>pos) << 2), room);
    if (breaksOn && pos < prompt && prompt - pos < same) {
      // The prompt ends inside the edge, which goes on along the call: a node there.
      const cut = prompt - pos;
      node = splitEdge(node, token, child, cut);
      promptNode = node;
      pos = prompt;
      same -= cut;
      token = load<i32>(staged + ((<usize>pos) << 2));
      if (same == edgeLen - cut) {
        node = child;
        pos += same;
        continue;
      }
    } else if (same == edgeLen) {
      node = child;
      pos += edgeLen;
      if (pos <= prompt && nodeField(node, N_END_HEAD) >= 0) best = node;
      if (pos == prompt) promptNode = node;
      continue;
    }
    // The sequence leaves (or ends inside) the edge: split it after `same` tokens.
    node = splitEdge(node, token, child, same);
    pos += same;
    if (pos == prompt) promptNode = node;
  }
  if (generation < 0 && breaksOn) generation = storeTokens(staged, prompt, full);
  store<i32>(vecAt(CALL_GEN, vecGrow(CALL_GEN, 1)), generation);
  setCallField(c, C_END_NODE, node);
  setCallField(c, C_END_NEXT, nodeField(node, N_END_HEAD));
  setNodeField(node, N_END_HEAD, c);
  return best;
}

/**
 * SPEC's prefix_break for c (just inserted, parent `parent`): sets breakNear (-1: none), breakAt
 * and the quotes. Walks up c's prompt path from its end while deeper than the parent's sequence.
 */
function findBreak(c: i32, staged: usize, parent: i32): void {
  breakNear = -1;
  const floor = parent >= 0 ? callField(parent, C_FULL) : 0;
  let below = promptNode;
  for (let node = nodeField(below, N_PARENT); node >= 0; node = nodeField(node, N_PARENT)) {
    const depth = nodeField(node, N_DEPTH);
    if (depth <= floor) return;
    const near = cover(node, K_FIRST_CHILD) != below ? cover(node, K_FIRST) : cover(node, K_SECOND);
    if (near >= 0) {
      breakNear = near;
      breakAt = depth;
      breakExpectedLength = min(BREAK_QUOTE, callField(near, C_FULL) - depth);
      breakFoundLength = min(BREAK_QUOTE, callField(c, C_PROMPT) - depth);
      const expected = vecAt(TOKENS, load<i32>(vecAt(CALL_GEN, near)) + depth - callField(near, C_PROMPT));
      memory.copy(breakTokens, expected, (<usize>breakExpectedLength) << 2);
      memory.copy(breakTokens + ((<usize>BREAK_QUOTE) << 2), staged + ((<usize>depth) << 2), (<usize>breakFoundLength) << 2);
      return;
    }
    below = node;
  }
}

/** Records that c covers the edges of its generation (for the calls after it). */
function coverGeneration(c: i32): void {
  const prompt = callField(c, C_PROMPT);
  for (let v = callField(c, C_END_NODE); nodeField(v, N_DEPTH) > prompt; v = nodeField(v, N_PARENT)) addCover(v, c);
}

/** Media triples (i32s) of linked call `x`: they run from its C_MEDIA to the next call's. */
function mediaInts(x: i32): i32 {
  const end = x + 1 < CALLS.len ? callField(x + 1, C_MEDIA) : MEDIA.len;
  return end - callField(x, C_MEDIA);
}

/**
 * SPEC's media clause: media(p) == media(c) before len(full(p)). p's occurrences all lie in its
 * prompt, so they must be c's first ones exactly, and c's next one must start at or past full(p).
 */
function mediaAgree(p: i32, c: i32): bool {
  const pInts = mediaInts(p);
  const cInts = mediaInts(c);
  if (pInts > cInts) return false;
  const pAt = vecAt(MEDIA, callField(p, C_MEDIA));
  const cAt = vecAt(MEDIA, callField(c, C_MEDIA));
  if (pInts > 0 && memory.compare(pAt, cAt, (<usize>pInts) << 2) != 0) return false;
  // The next occurrence's offset (the middle i32 of its triple).
  return pInts == cInts || load<i32>(cAt + ((<usize>(pInts + 1)) << 2)) >= callField(p, C_FULL);
}

/** SPEC v4's routes clause: route(c, i) equals p's route for every i < len(full(p)) − 1. */
function routesAgree(p: i32, c: i32): bool {
  return firstRouteDifference(p, c) < 0;
}

/** The first token before p's last where p's and c's route ids differ, or -1 (also when either has none). */
function firstRouteDifference(p: i32, c: i32): i32 {
  const pAt = load<i32>(vecAt(CALL_ROUTES, p));
  const cAt = load<i32>(vecAt(CALL_ROUTES, c));
  if (pAt < 0 || cAt < 0) return -1;
  const count = callField(p, C_FULL) - 1;
  const same = commonPrefix(vecAt(ROUTES, pAt), vecAt(ROUTES, cAt), count);
  return same < count ? same : -1;
}

// @ts-ignore: decorator
@inline function agrees(x: i32, c: i32): bool {
  return mediaAgree(x, c) && routesAgree(x, c);
}

/** chooseParent's answer when no candidate agrees with c (the walk up goes on). */
const NONE_AGREES: i32 = -100;

/**
 * SPEC's tie-break among calls with identical full sequences (a list through C_END_NEXT), among
 * those that agree with c on media and routes when `filtered` (NONE_AGREES when none does);
 * AMBIGUOUS_PARENT when it stays ambiguous.
 */
function chooseParent(c: i32, candidates: i32, filtered: bool): i32 {
  if (!filtered && callField(candidates, C_END_NEXT) < 0) return candidates;
  let first = -1;
  let second = -1;
  let agreeing = 0;
  for (let x = candidates; x >= 0; x = callField(x, C_END_NEXT)) {
    if (filtered && !agrees(x, c)) continue;
    if (first < 0) first = x;
    else if (second < 0) second = x;
    agreeing++;
  }
  if (agreeing == 1) return first;
  if (agreeing == 0) return NONE_AGREES;
  const agent = callField(c, C_AGENT);
  let pick = -1;
  let count = 0;
  for (let x = candidates; x >= 0; x = callField(x, C_END_NEXT)) {
    if (callField(x, C_AGENT) == agent && (!filtered || agrees(x, c))) {
      pick = x;
      count++;
    }
  }
  if (count == 0) {
    // Agents past the table (unlisted ones) have no parent agent.
    const parentAgent = agent < AGENT_PARENTS.len ? load<i32>(vecAt(AGENT_PARENTS, agent)) : -1;
    if (parentAgent >= 0) {
      for (let x = candidates; x >= 0; x = callField(x, C_END_NEXT)) {
        if (callField(x, C_AGENT) == parentAgent && (!filtered || agrees(x, c))) {
          pick = x;
          count++;
        }
      }
    }
  }
  if (count == 1) return pick;
  ambiguousFirst = first;
  ambiguousSecond = second;
  return AMBIGUOUS_PARENT;
}

/** The latest call of the list through C_END_NEXT (latest first) whose media agree with c's, or -1. */
function latestMediaAgreeing(candidates: i32, c: i32): i32 {
  for (let x = candidates; x >= 0; x = callField(x, C_END_NEXT)) if (mediaAgree(x, c)) return x;
  return -1;
}

/**
 * Linking with the media and routes clauses: from `best` (the deepest node where an earlier full
 * sequence ends inside c's prompt) up, the first node with a call that agrees on both holds the
 * candidates. The first node with a call whose media agree is where tokens and media alone would
 * have linked c: if none agrees on routes there, that is SPEC's route_mismatch. Cost: media and
 * route ids compared, never tokens (the walk up passes only nodes already on c's path).
 */
function linkByAgreement(c: i32, best: i32): i32 {
  let nearPending = true; // no node with a media-agreeing candidate seen yet
  for (let node = best; node > 0; node = nodeField(node, N_PARENT)) {
    const head = nodeField(node, N_END_HEAD);
    if (head < 0) continue;
    // (Each candidate's routes are compared once here, in chooseParent's first pass.)
    const parent = chooseParent(c, head, true);
    if (parent != NONE_AGREES) return parent;
    const near = latestMediaAgreeing(head, c);
    if (near < 0) {
      if (node == best) mediaMismatch = true;
    } else if (nearPending) {
      nearPending = false;
      routeNear = near;
      routeAt = firstRouteDifference(near, c);
    }
  }
  return -1;
}

/**
 * Records the staged call as the next eligible call and links it. Returns its parent, -1 for a
 * root, INVALID_TOKEN (see invalidTokenAt; the forest is then unusable, the rollout is
 * rejected), or AMBIGUOUS_PARENT when the parent is ambiguous (see ambiguousFirst/ambiguousSecond).
 * `media` holds the call's media triples (see MEDIA), `routes` its route ids when `givesRoutes`
 * (see ROUTES); linking compares them (see mediaMismatch, routeNear). Logprobs
 * are not looked at here: the caller checks them (commit in index.ts, which rejects the call
 * after linking when one is not finite).
 */
export function linkCall(
  staged: usize,
  stagedLogprobs: usize,
  prompt: i32,
  generated: i32,
  agent: i32,
  media: Vec,
  routes: Vec,
  givesRoutes: bool,
): i32 {
  const c = vecGrow(CALLS, 1);
  const full = prompt + generated;
  setCallField(c, C_FULL, full);
  setCallField(c, C_PROMPT, prompt);
  setCallField(c, C_AGENT, agent);
  const lp = vecGrow(LOGPROBS, generated);
  memory.copy(vecAt(LOGPROBS, lp), stagedLogprobs, (<usize>generated) << 2);
  setCallField(c, C_LP, lp);
  const mediaAt = vecGrow(MEDIA, media.len);
  memory.copy(vecAt(MEDIA, mediaAt), media.ptr, (<usize>media.len) << 2);
  setCallField(c, C_MEDIA, mediaAt);
  const routesAt = givesRoutes ? vecGrow(ROUTES, full - 1) : -1;
  if (givesRoutes) memory.copy(vecAt(ROUTES, routesAt), routes.ptr, (<usize>(full - 1)) << 2);
  store<i32>(vecAt(CALL_ROUTES, vecGrow(CALL_ROUTES, 1)), routesAt);
  const best = insert(c, staged, prompt, full);
  breakNear = -1;
  if (invalidTokenAt >= 0) return INVALID_TOKEN;
  mediaMismatch = false;
  routeNear = -1;
  // A rollout with no media and no routes so far (c's included) links by tokens alone, as in SPEC v1.
  const parent =
    best < 0
      ? -1
      : MEDIA.len == 0 && !givesRoutes
        ? chooseParent(c, nodeField(best, N_END_HEAD), false)
        : linkByAgreement(c, best);
  setCallField(c, C_PARENT, parent);
  if (!breaksOn) return parent;
  if (parent >= -1) findBreak(c, staged, parent);
  coverGeneration(c);
  return parent;
}
