// compileWithTieringBudget: a module compiled inside it keeps the budget it was given, modules
// compiled after it get V8's own again, and a budget node was started with is left alone. Seen
// through V8's %IsLiftoffFunction, in a node started with --allow-natives-syntax.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { expect, test } from "vitest";
import { ROOT } from "../support/fixtures.js";

const TIERING = pathToFileURL(join(ROOT, "dist", "columnar", "wasm-tiering.js")).href;

/**
 * A script that compiles two modules of `f(n)`, a loop of n turns: the first inside
 * compileWithTieringBudget(`budget`), the second after it. It runs each hot, and prints whether
 * each is still Liftoff's code. Tier-up happens on a background thread, so the script keeps
 * calling a function that should tier up until it has, up to a number of calls far more than
 * V8's budget needs and far less than the high budget; the one that should not is called as
 * many times.
 */
const script = (budget: number) => `
import { compileWithTieringBudget } from ${JSON.stringify(TIERING)};
// (func $f (param i32) (result i32) (local i32) (loop ... local1 += local0; local0 -= STEP ...) local1),
// called only with n a multiple of STEP (1 or 2), so that the loop reaches 0.
const moduleBytes = (step) => new Uint8Array([0,97,115,109,1,0,0,0,1,6,1,96,1,127,1,127,3,2,1,0,7,5,1,1,102,0,0,
  10,27,1,25,1,1,127,3,64,32,1,32,0,106,33,1,32,0,65,step,107,34,0,13,0,11,32,1,11]);
const inside = compileWithTieringBudget(${budget}, () => new WebAssembly.Module(moduleBytes(1)));
const after = new WebAssembly.Module(moduleBytes(2)); // other bytes: not V8's cached module
// About 4e8 units of budget (V8 counts about the loop's 16 bytes a turn), in a run and then in
// small calls while the background thread compiles: V8's own budget is 1.8e6, the high one 2e9.
const stillLiftoff = (module) => {
  const f = new WebAssembly.Instance(module).exports.f;
  for (let call = 0; call < 1000; call++) f(10000);
  for (let call = 0; call < 1000000; call++) {
    if (!%IsLiftoffFunction(f)) return false;
    f(10);
  }
  return true;
};
console.log(JSON.stringify({ inside: stillLiftoff(inside), after: stillLiftoff(after) }));
`;

function run(budget: number, nodeFlags: string[] = []): { inside: boolean; after: boolean } {
  const result = spawnSync(
    process.execPath,
    ["--allow-natives-syntax", ...nodeFlags, "--input-type=module", "-e", script(budget)],
    { encoding: "utf8" },
  );
  expect(result.stderr).toBe("");
  expect(result.status).toBe(0);
  return JSON.parse(result.stdout) as { inside: boolean; after: boolean };
}

/** compileWithTieringBudget acts on V8 11 and earlier only (whose default budget is known). */
const acts = Number.parseInt(process.versions.v8, 10) <= 11;

test("a module compiled inside keeps its budget; one compiled after gets V8's again", () => {
  // 2e9 is never spent by the calls above; V8's own budget is, many times over.
  expect(run(2_000_000_000)).toEqual({ inside: acts, after: false });
});

test("a budget node was started with is left as it is", () => {
  // A budget of 1 would tier the first module up at once, were it set.
  expect(run(1, ["--wasm-tiering-budget=2000000000"])).toEqual({ inside: true, after: true });
});
