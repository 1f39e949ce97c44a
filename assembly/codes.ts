// commit() results below -1 (a result >= -1 is the parent call's index, -1 a root). The host's
// copy is src/core/types.ts; test/core/checks.test.ts checks the exported globals against it.
export const AMBIGUOUS_PARENT: i32 = -2;
export const INVALID_TOKEN: i32 = -3;
export const INVALID_LOGPROB: i32 = -4;
export const NOT_LINKED: i32 = -5;
