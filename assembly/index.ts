// callforest's WebAssembly core: the host stages one call at a time into linear memory, commits
// it (checks + linking), then asks for the rows. One instance serves one plan at a time; `begin`
// resets its heap. See src/core/wasm-core.ts for the host side of this protocol.
import { Vec, heapReset, pastReserveBudget, vecAt, vecGrow, vecReserve, vecRestart } from "./vec";
import { setPageLimit } from "./pages";
import { childrenBytes } from "./children";
import { firstNegative, firstNonFinite } from "./compare";
import {
  AGENT_PARENTS, ambiguousFirst, ambiguousSecond, invalidTokenAt, linkCall, mediaMismatch, treeReset,
  routeAt, routeNear, copyFull, callField, C_FULL,
  breakAt, breakExpectedLength, breakFoundLength, breakNear, breakTokens,
} from "./tree";
export { setBreaksOn } from "./tree";
import { buildRows, links, pathBuffer, rowTable } from "./rows";
export { pack, packLayoutAddress } from "./packed";
import { INVALID_LOGPROB, INVALID_TOKEN, NOT_LINKED } from "./codes";
import { batchReset, batchTable, goesOn, storeResult, tableField } from "./batch";
export { batchResults, B_CALL, B_RESULT } from "./batch";
export { B_RESULT_CODE, B_MEDIA_MISMATCH, B_NEAR, B_AT, B_EXPECTED_LENGTH, B_FOUND_LENGTH, B_QUOTES } from "./batch";
export { AMBIGUOUS_PARENT, INVALID_TOKEN, INVALID_LOGPROB, NOT_LINKED } from "./codes";
// The record layouts the host reads (for test/core/record-layout.test.ts).
export { R_SHIFT, R_LEAF, R_PATH_OFF, R_PATH_LEN, R_TOKENS, R_TOKEN_PTR, R_LOGPROB_PTR, R_MASK_PTR } from "./rows";
export { P_SHIFT, P_TOKEN_PTR, P_POSITION_PTR, P_LOGPROB_PTR, P_MASK_PTR } from "./packed";

const STAGE_TOKENS = changetype<Vec>(memory.data(offsetof<Vec>()));
const STAGE_LOGPROBS = changetype<Vec>(memory.data(offsetof<Vec>()));
/** The next commit's media triples (item, offset, length); emptied by every commit. */
const STAGE_MEDIA = changetype<Vec>(memory.data(offsetof<Vec>()));
/** The next commit's route ids (SPEC v4), when stageRoutes was called; emptied by every commit. */
const STAGE_ROUTES = changetype<Vec>(memory.data(offsetof<Vec>()));
let routesStaged: bool = false;

/** Caps this instance's linear memory (64 KiB pages); past it a plan aborts (rollout_too_large). */
export function setMemoryLimit(pages: i32): void {
  setPageLimit(pages);
}

/** Index of the offending token or logprob after INVALID_TOKEN / INVALID_LOGPROB. */
let badIndex: i32 = -1;

/**
 * Starts a plan: resets the heap and sizes the staging area and the forest from hints (0 =
 * unknown; a hint too large for memory is ignored). Returns the address of an i32 table of
 * `agents` entries that the host fills with each agent's parent agent.
 */
export function begin(agents: i32, callsHint: i32, generatedHint: i32, longestHint: i32): usize {
  heapReset();
  // Reserved up front from the hints (sized once for the longest call, as regrowing a huge
  // staging area or token store would copy it and leave the old block behind); hints that would
  // take more than half the memory limit are dropped, so whether a rollout fits depends on the
  // rollout alone — as does everything else: nothing is carried over from earlier plans.
  callsHint = max(callsHint, 0);
  generatedHint = max(generatedHint, 0);
  longestHint = max(longestHint, 0);
  if (pastReserveBudget(hintedBytes(callsHint, generatedHint, longestHint))) {
    callsHint = generatedHint = longestHint = 0;
  }
  vecRestart(STAGE_TOKENS, 2, longestHint);
  vecRestart(STAGE_LOGPROBS, 2, min(longestHint, generatedHint));
  vecRestart(STAGE_MEDIA, 2, 0);
  vecRestart(STAGE_ROUTES, 2, 0);
  routesStaged = false;
  batchReset();
  treeReset(agents, callsHint, generatedHint, longestHint);
  return vecAt(AGENT_PARENTS, 0);
}

/** Bytes the hints would reserve (see treeReset; the children table is sized like NODES). */
function hintedBytes(calls: i32, generated: i32, longest: i32): i64 {
  const nodes = <i64>calls * 3 + 1;
  return (
    ((<i64>calls + nodes) << 5) +
    (nodes << 4) + // cover records
    (<i64>calls << 2) + // where each call's generation is
    childrenBytes(nodes) +
    ((<i64>longest * 2 + <i64>generated + <i64>min(longest, generated)) << 2)
  );
}

/** Makes room to stage a call; the host then writes prompt ++ generation and the logprobs. */
export function stage(prompt: i32, generated: i32): void {
  STAGE_TOKENS.len = 0;
  STAGE_LOGPROBS.len = 0;
  vecReserve(STAGE_TOKENS, prompt + generated);
  vecReserve(STAGE_LOGPROBS, generated);
}

export function stagedTokens(): usize {
  return STAGE_TOKENS.ptr;
}

export function stagedLogprobs(): usize {
  return STAGE_LOGPROBS.ptr;
}

/** Tokens the staging area holds before it must move (the host keeps views this long). */
export function stagedTokenCapacity(): i32 {
  return STAGE_TOKENS.cap;
}

export function stagedLogprobCapacity(): i32 {
  return STAGE_LOGPROBS.cap;
}

/**
 * Room for the next commit's `count` media occurrences; the host writes their (item, offset,
 * length) triples at the address returned. Without it a call has none.
 */
export function stageMedia(count: i32): usize {
  STAGE_MEDIA.len = 0;
  vecGrow(STAGE_MEDIA, count * 3);
  return STAGE_MEDIA.ptr;
}

/**
 * Room for the next commit's route ids, one per token but the last (SPEC v4: a call's last token
 * has no route of its own); the host writes them at the address returned. Without it a call has
 * none.
 */
export function stageRoutes(count: i32): usize {
  STAGE_ROUTES.len = 0;
  vecGrow(STAGE_ROUTES, count);
  routesStaged = true;
  return STAGE_ROUTES.ptr;
}

/** Index of the first staged token outside [0, 2^31-1], or -1. */
export function checkStagedTokens(count: i32): i32 {
  return firstNegative(STAGE_TOKENS.ptr, count);
}

/**
 * Checks the staged call and, when `link` is set (the call is eligible), links it as the next
 * eligible call. Returns the parent (>= -1) or one of the codes above.
 */
export function commit(prompt: i32, generated: i32, agent: i32, link: bool): i32 {
  const result = check(prompt, generated, agent, link);
  STAGE_MEDIA.len = 0;
  STAGE_ROUTES.len = 0;
  routesStaged = false;
  return result;
}

function check(prompt: i32, generated: i32, agent: i32, link: bool): i32 {
  return checkAt(STAGE_TOKENS.ptr, STAGE_LOGPROBS.ptr, prompt, generated, agent, link);
}

/** check() for a call staged at `tokens` (prompt ++ generation) and `logprobs`. */
function checkAt(tokens: usize, logprobs: usize, prompt: i32, generated: i32, agent: i32, link: bool): i32 {
  if (!link) {
    badIndex = firstNegative(tokens, prompt + generated);
    if (badIndex >= 0) return INVALID_TOKEN;
    badIndex = firstNonFinite(logprobs, generated);
    return badIndex >= 0 ? INVALID_LOGPROB : NOT_LINKED;
  }
  // Linking checks the tokens as it goes (see tree.ts insert), so the tokens are read once.
  const logprobAt = firstNonFinite(logprobs, generated);
  const parent = linkCall(
    tokens,
    logprobs,
    prompt,
    generated,
    agent,
    STAGE_MEDIA,
    STAGE_ROUTES,
    routesStaged,
  );
  if (parent == INVALID_TOKEN) {
    badIndex = invalidTokenAt;
    return INVALID_TOKEN;
  }
  if (logprobAt >= 0) {
    badIndex = logprobAt;
    return INVALID_LOGPROB;
  }
  return parent;
}

/**
 * Stages `count` calls at once (see batch.ts): room for their table (returned) and for `tokens`
 * tokens and `logprobs` logprobs, back to back in call order at stagedTokens() and
 * stagedLogprobs(). No media or routes: calls that have them go one at a time.
 */
export function stageCalls(count: i32, tokens: i32, logprobs: i32): usize {
  STAGE_TOKENS.len = 0;
  STAGE_LOGPROBS.len = 0;
  vecReserve(STAGE_TOKENS, tokens);
  vecReserve(STAGE_LOGPROBS, logprobs);
  return batchTable(count);
}

/**
 * Commits the `count` staged calls in order, each as commit() would, leaving each one's result at
 * batchResults(). Returns -1 when every call linked or was not to be linked, else the index of
 * the first call that failed (its result says why; lastBadIndex() and ambiguousCandidates() are
 * its). The calls after it are not committed.
 */
export function commitStaged(count: i32): i32 {
  let tokens = STAGE_TOKENS.ptr;
  let logprobs = STAGE_LOGPROBS.ptr;
  for (let i = 0; i < count; i++) {
    const prompt = tableField(i, 0);
    const generated = tableField(i, 1);
    const result = checkAt(tokens, logprobs, prompt, generated, tableField(i, 2), tableField(i, 3) != 0);
    storeResult(i, result);
    if (!goesOn(result)) return i;
    tokens += (<usize>(prompt + generated)) << 2;
    logprobs += (<usize>generated) << 2;
  }
  return -1;
}

export function lastBadIndex(): i32 {
  return badIndex;
}

/** After a commit that linked: 1 when SPEC's media_mismatch holds for the call. */
export function lastMediaMismatch(): bool {
  return mediaMismatch;
}

/** After a commit that linked: SPEC v4's route_mismatch near call, -1 if none. */
export function lastRouteNear(): i32 {
  return routeNear;
}

/** After lastRouteNear() >= 0: the first token where the routes differ. */
export function lastRouteAt(): i32 {
  return routeAt;
}

/** len(full(c)) of linked call c. */
export function fullLength(c: i32): i32 {
  return callField(c, C_FULL);
}

/**
 * Writes full(c) of linked call c in the staging area (after the last commit: it is free then) and
 * returns its address; the host copies it out before anything else runs.
 */
export function fullTokens(c: i32): usize {
  const full = callField(c, C_FULL);
  STAGE_TOKENS.len = 0;
  vecReserve(STAGE_TOKENS, full);
  copyFull(c, STAGE_TOKENS.ptr);
  return STAGE_TOKENS.ptr;
}

/** After a commit that linked: the call's near parent (SPEC's prefix_break), -1 if none. */
export function lastBreakNear(): i32 {
  return breakNear;
}

/** After lastBreakNear() >= 0: the break's `at`. */
export function lastBreakAt(): i32 {
  return breakAt;
}

/** After lastBreakNear() >= 0: how many tokens `expected` (second: `found`) holds, at most 8. */
export function lastBreakQuoteLength(found: bool): i32 {
  return found ? breakFoundLength : breakExpectedLength;
}

/** Where the quotes are: 8 i32s of `expected`, then 8 of `found`. */
export function breakTokensAddress(): usize {
  return breakTokens;
}

export function ambiguousCandidates(second: bool): i32 {
  return second ? ambiguousSecond : ambiguousFirst;
}

/** Builds the rows; afterwards the tables below are valid until the next `begin`. */
export function finish(): i32 {
  return buildRows();
}

export function rowTableAddress(): usize {
  return rowTable;
}

export function pathBufferAddress(): usize {
  return pathBuffer;
}

/** Each call's parent, then each call's owner row (i32[2n]). */
export function linksAddress(): usize {
  return links;
}
