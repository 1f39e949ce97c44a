// How soon V8 recompiles a WebAssembly module's functions with its optimising compiler. A
// function runs first as Liftoff's quickly made code, and is compiled again by TurboFan, on a
// background thread, once it has run for a budget (`--wasm-tiering-budget`, roughly bytes
// executed). The budget is taken when a module is compiled, so it can be given to one module:
// set the flag, compile, set it back. The flag is the process's: a module another thread
// compiles meanwhile takes the budget too, so callers compile when no other thread does.
//
// Why: parquet-wasm is 5 MB of Rust. At V8 11's budget about 80 of its functions reach TurboFan
// while the first row group is encoded, half a second of compiling (measured) on the core the
// planning thread shares; about 20 of them are the hot ones. Later V8 raised the default budget
// sevenfold for the same reason.
import { setFlagsFromString } from "node:v8";

/** V8's budget up to V8 11 (Node 20: see `node --v8-options`); later versions start higher. */
const V8_11_BUDGET = 1_800_000;

/** Whether node was started with a budget of its own (then it is left alone). */
function budgetGiven(): boolean {
  return process.execArgv.some((arg) => /^--wasm[-_]tiering[-_]budget(=|$)/.test(arg));
}

/**
 * Runs `compile` (a synchronous WebAssembly compile) with V8's tiering budget at `budget`, and
 * sets it back to V8's default after. Only on V8 11 and earlier, whose default is known, and only
 * when node was not given a budget: otherwise `compile` runs as it is.
 */
export function compileWithTieringBudget<T>(budget: number, compile: () => T): T {
  const v8Major = Number.parseInt(process.versions.v8, 10);
  if (!(v8Major <= 11) || budgetGiven()) return compile();
  setFlagsFromString(`--wasm-tiering-budget=${budget}`);
  try {
    return compile();
  } finally {
    setFlagsFromString(`--wasm-tiering-budget=${V8_11_BUDGET}`);
  }
}
