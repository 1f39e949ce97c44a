// Many calls staged at once and linked in one call from the host (a small rollout's calls cost
// more in crossings and host bookkeeping than in linking). The host writes a table of
// (prompt, generated, agent, link) per call and the calls' tokens and logprobs back to back, then
// `commitStaged` links them in order and leaves, per call, what the host asks after each commit
// in the one-call protocol: the result and the prefix break.
import { Vec, vecGrow, vecRestart } from "./vec";
import {
  BREAK_QUOTE, breakAt, breakExpectedLength, breakFoundLength, breakNear, breakTokens, mediaMismatch,
} from "./tree";
import { NOT_LINKED } from "./codes";

/** i32s a call takes in the table: prompt, generated, agent, link (0/1). */
export const B_CALL: i32 = 4;
/**
 * i32s a call's result takes: commit's result, media_mismatch (0/1), the break's near call (-1:
 * none), at, the quotes' lengths (expected, found), then BREAK_QUOTE i32s of each quote. The
 * fields' offsets, in i32s, follow (src/core/types.ts STAGED_RESULT reads them by these names).
 */
export const B_RESULT: i32 = 6 + 2 * BREAK_QUOTE;
export const B_RESULT_CODE: i32 = 0;
export const B_MEDIA_MISMATCH: i32 = 1;
export const B_NEAR: i32 = 2;
export const B_AT: i32 = 3;
export const B_EXPECTED_LENGTH: i32 = 4;
export const B_FOUND_LENGTH: i32 = 5;
export const B_QUOTES: i32 = 6;

const TABLE = changetype<Vec>(memory.data(offsetof<Vec>()));
const RESULTS = changetype<Vec>(memory.data(offsetof<Vec>()));

/** After a heap reset (begin). */
export function batchReset(): void {
  vecRestart(TABLE, 2, 0);
  vecRestart(RESULTS, 2, 0);
}

/** Room for `count` calls' table entries and results; returns the table's address. */
export function batchTable(count: i32): usize {
  TABLE.len = 0;
  vecGrow(TABLE, count * B_CALL);
  RESULTS.len = 0;
  vecGrow(RESULTS, count * B_RESULT);
  return TABLE.ptr;
}

export function batchResults(): usize {
  return RESULTS.ptr;
}

/** The table's entry `i`, field `f`. */
// @ts-ignore: decorator
@inline
export function tableField(i: i32, f: i32): i32 {
  return load<i32>(TABLE.ptr + ((<usize>(i * B_CALL + f)) << 2));
}

/** Records call `i`'s result and, when it linked, its prefix break. */
export function storeResult(i: i32, result: i32): void {
  const at = RESULTS.ptr + ((<usize>(i * B_RESULT)) << 2);
  store<i32>(resultField(at, B_RESULT_CODE), result);
  const linked = result >= -1;
  store<i32>(resultField(at, B_MEDIA_MISMATCH), linked && mediaMismatch ? 1 : 0);
  const near = linked ? breakNear : -1;
  store<i32>(resultField(at, B_NEAR), near);
  if (near < 0) return;
  store<i32>(resultField(at, B_AT), breakAt);
  store<i32>(resultField(at, B_EXPECTED_LENGTH), breakExpectedLength);
  store<i32>(resultField(at, B_FOUND_LENGTH), breakFoundLength);
  memory.copy(resultField(at, B_QUOTES), breakTokens, (<usize>(2 * BREAK_QUOTE)) << 2);
}

// @ts-ignore: decorator
@inline
function resultField(result: usize, field: i32): usize {
  return result + ((<usize>field) << 2);
}

/** Whether a result lets the batch go on (a link, or a call not linked). */
export function goesOn(result: i32): bool {
  return result >= -1 || result == NOT_LINKED;
}
