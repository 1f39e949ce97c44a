// What finding prefix breaks (SPEC's prefix_break) costs: plan() plus reading every row, with the
// diagnostic on and off (the cores' switch, which only the bench turns off), on the deep rollout
// (no breaks) and on rollouts where every call breaks, at growing sizes (linear: the time per
// token stays flat). On and off runs alternate, so load from other processes falls on both alike.
// Alone: `npm run prebench && node build/bench-out/bench/breaks.js`.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { performance } from "node:perf_hooks";
import { WasmCorePool } from "../src/core/wasm-core.js";
import { TsCorePool } from "../src/core/ts-core.js";
import { planRollout } from "../src/plan/plan-rollout.js";
import type { CoreFactory } from "../src/core/types.js";
import type { Rollout } from "../src/types.js";
import { eligibleTokens, generateBrokenRollout, generateDeepRollout } from "./generate.js";
import { median } from "./rows-process.js";

const WASM = (simd: boolean) => new URL(`../../../build/core-${simd ? "simd" : "scalar"}.wasm`, import.meta.url);

function wasmFactory(breaksOn: boolean): CoreFactory {
  const pool = new WasmCorePool(new WebAssembly.Module(readFileSync(WASM(true))), undefined, undefined, breaksOn);
  return () => pool.acquire();
}

function tsFactory(breaksOn: boolean): CoreFactory {
  const pool = new TsCorePool(undefined, undefined, breaksOn);
  return () => pool.acquire();
}

/**
 * plan() and a copy of every row's arrays (as the core bench reads them): wall and CPU ms (this
 * process's CPU time, which other processes' load on a shared machine disturbs less), and the
 * prefix breaks found.
 */
function planAndRead(factory: CoreFactory, rollout: Rollout, sink: Int32Array) {
  const start = performance.now();
  const cpuStart = process.cpuUsage();
  let breaks = 0;
  // A few plans a sample: a sample of tens of milliseconds is less at the mercy of the scheduler.
  for (let i = 0; i < PLANS_PER_SAMPLE; i++) {
    const plan = planRollout(factory, rollout);
    if (plan.report.status !== "ok") throw new Error(`${rollout.rollout_id}: ${plan.report.detail}`);
    for (const row of plan.rows) sink.set(row.tokenIds);
    breaks = plan.report.diagnostics.filter((d) => d.code === "prefix_break").length;
    plan.release();
  }
  const cpu = process.cpuUsage(cpuStart);
  const ms = (performance.now() - start) / PLANS_PER_SAMPLE;
  return { ms, cpuMs: (cpu.user + cpu.system) / 1000 / PLANS_PER_SAMPLE, breaks };
}

const PLANS_PER_SAMPLE = 3;

function longestCall(rollout: Rollout): number {
  let n = 0;
  for (const c of rollout.calls) n = Math.max(n, c.prompt_token_ids.length + c.generation_token_ids.length);
  return n;
}

export interface BreaksRow {
  rollout: string;
  backend: string;
  tokens: number;
  calls: number;
  breaks: number;
  /** Median ms of plan() + rows with the diagnostic on, and off: wall time, and CPU time. */
  on: number;
  off: number;
  cpuOn: number;
  cpuOff: number;
}

/** On and off, alternating (each first half the time, so neither always follows the other's garbage). */
function measure(name: string, rollout: Rollout, make: (on: boolean) => CoreFactory, rounds: number, backend: string) {
  const on = make(true);
  const off = make(false);
  const sink = new Int32Array(longestCall(rollout));
  for (let i = 0; i < 2; i++) planAndRead(on, rollout, sink), planAndRead(off, rollout, sink); // warm up
  const times = { on: [] as number[], off: [] as number[] };
  const cpu = { on: [] as number[], off: [] as number[] };
  let breaks = 0;
  for (let i = 0; i < rounds; i++) {
    const order: ("on" | "off")[] = i % 2 === 0 ? ["on", "off"] : ["off", "on"];
    for (const which of order) {
      const run = planAndRead(which === "on" ? on : off, rollout, sink);
      times[which].push(run.ms);
      cpu[which].push(run.cpuMs);
      if (which === "on") breaks = run.breaks;
    }
  }
  const row: BreaksRow = {
    rollout: name,
    backend,
    tokens: eligibleTokens(rollout),
    calls: rollout.calls.length,
    breaks,
    on: median(times.on),
    off: median(times.off),
    cpuOn: median(cpu.on),
    cpuOff: median(cpu.off),
  };
  return row;
}

export function runBreaksBench(log: (line: string) => void = console.log, rounds = 21): BreaksRow[] {
  const backends: [string, (on: boolean) => CoreFactory][] = [
    ["wasm", wasmFactory],
    ["ts", tsFactory],
  ];
  const workloads: [string, () => Rollout][] = [
    ["deep (no breaks)", () => generateDeepRollout({ targetTokens: 10_000_000 })],
    ...[5_000_000, 10_000_000, 20_000_000].map((target): [string, () => Rollout] => [
      "every call breaks",
      () => generateBrokenRollout({ targetTokens: target }),
    ]),
  ];
  const rows: BreaksRow[] = [];
  for (const [name, generate] of workloads) {
    const rollout = generate();
    for (const [backend, make] of backends) rows.push(measure(name, rollout, make, rounds, backend));
    log(`breaks: ${name}, ${eligibleTokens(rollout).toLocaleString("en-US")} tokens done`);
  }
  return rows;
}

export function breaksTable(rows: BreaksRow[]): string {
  const out = [
    "| rollout | backend | tokens | calls | prefix breaks | plan() + rows, diagnostic on | off | on ÷ off | " +
      "CPU on | CPU off | CPU on ÷ off | on, per million tokens |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const r of rows) {
    out.push(
      `| ${r.rollout} | ${r.backend} | ${r.tokens.toLocaleString("en-US")} | ${r.calls.toLocaleString("en-US")} | ` +
        `${r.breaks.toLocaleString("en-US")} | ${r.on.toFixed(1)} ms | ${r.off.toFixed(1)} ms | ` +
        `${(r.on / r.off).toFixed(3)}× | ${r.cpuOn.toFixed(1)} ms | ${r.cpuOff.toFixed(1)} ms | ` +
        `${(r.cpuOn / r.cpuOff).toFixed(3)}× | ${((r.on / r.tokens) * 1e6).toFixed(2)} ms |`,
    );
  }
  return out.join("\n");
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const rows = runBreaksBench((line) => process.stderr.write(`${line}\n`));
  process.stdout.write(breaksTable(rows) + "\n");
}
