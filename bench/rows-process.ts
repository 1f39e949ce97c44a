// What the benches that run `callforest rows` as a process share: the checkout's root, an older
// commit's build beside it, one run measured from inside the child (wall, CPU, peak RSS), and medians.
import { execFileSync, spawn } from "node:child_process";
import { statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export interface Run {
  seconds: number;
  cpu: number;
  /** Peak resident memory of the process (all its threads), in MiB. */
  rssMb: number;
  /** Minor page faults: pages of fresh memory touched for the first time, mostly (all threads). */
  faults: number;
}

export const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** The callforest checkout this bench runs from (the folder with bin/callforest.js). */
export function root(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++, dir = dirname(dir)) {
    try {
      statSync(join(dir, "bin", "callforest.js"));
      return dir;
    } catch {
      // up
    }
  }
  throw new Error("cannot find the callforest package root");
}

/** An older commit's build beside this checkout (scripts/build-baseline.sh: built once, then cached). */
export function baselineBuild(commit: string, log: (s: string) => void): string {
  log(`building ${commit} beside this checkout (once; cached under build/baselines/) ...`);
  return execFileSync("bash", [join(root(), "scripts", "build-baseline.sh"), commit], {
    cwd: root(),
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  }).trim();
}

// Printed by the child as it exits: its own CPU time and peak RSS (worker threads included).
const MEASURE =
  'data:text/javascript,process.on("exit",()=>{const u=process.resourceUsage();' +
  "process.stderr.write(`\\nBENCH ${(u.userCPUTime+u.systemCPUTime)/1e6} ${u.maxRSS} ${u.minorPageFault}\\n`)})";

/** One `callforest rows` run of the CLI at `bin` as its own process. */
export function runRows(bin: string, argv: string[]): Promise<Run> {
  return runNode(bin, ["rows", ...argv]);
}

/** One run of a Node script as its own process, measured (stdout ignored). */
export function runNode(script: string, argv: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(process.execPath, ["--import", MEASURE, script, ...argv], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("error", reject);
    child.on("close", (code) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const measured = /BENCH (\S+) (\d+) (\d+)/.exec(stderr);
      if (code !== 0 || measured === null)
        return reject(new Error(`${script} ${argv.join(" ")}: exit ${code}: ${stderr}`));
      resolve({ seconds, cpu: Number(measured[1]), rssMb: Number(measured[2]) / 1024, faults: Number(measured[3]) });
    });
  });
}
