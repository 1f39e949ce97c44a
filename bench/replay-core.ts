// A core that links nothing: it replays the forest and rows the TS core computed for the same
// rollout beforehand. plan() on it costs only what a WebAssembly backend does besides linking and
// making rows — checking the rollout, copying the caller's arrays into the core (which the TS core
// skips for typed arrays, reading them in place), the row objects, the report — and reading its
// rows costs what reading any backend's rows costs. So ts time ÷ this time bounds what an
// infinitely fast WebAssembly core could gain over the TS backend.
import { NOT_LINKED, type CoreForest, type ForestCore, type SizeHints, type StagedCall } from "../src/core/types.js";
import { TsCorePool } from "../src/core/ts-core.js";
import { planRollout } from "../src/plan/plan-rollout.js";
import type { Rollout } from "../src/types.js";

export class ReplayCore implements ForestCore {
  private staging: StagedCall = { tokens: new Int32Array(1 << 16), logprobs: new Float32Array(1 << 16) };
  private next = 0;

  /** `forests`: one per rollout, in the order the rollouts will be planned (then again from the start). */
  constructor(private readonly forests: readonly CoreForest[]) {}

  readonly memoryLimit = 2 ** 32;

  minimumBytes(): number {
    return 0;
  }

  begin(): void {}

  stage(prompt: number, generated: number): StagedCall {
    if (this.staging.tokens.length < prompt + generated || this.staging.logprobs.length < generated) {
      const size = 2 * (prompt + generated);
      this.staging = { tokens: new Int32Array(size), logprobs: new Float32Array(size) };
    }
    return this.staging;
  }

  staged(): StagedCall {
    return this.staging;
  }

  checkStagedTokens(): number {
    return -1;
  }

  stageMedia(): void {}

  lastMediaMismatch(): boolean {
    return false;
  }

  stageRoutes(): void {}

  lastRouteMismatch(): null {
    return null;
  }

  fullTokens(): Int32Array {
    throw new Error("the replay core lays out no packed records");
  }

  lastPrefixBreak(): null {
    return null;
  }

  commit(_prompt: number, _generated: number, _agent: number, link: boolean): number {
    return link ? -1 : NOT_LINKED; // the parents come with the recorded forest
  }

  lastBadIndex(): number {
    return -1;
  }

  ambiguousCandidates(): [number, number] {
    return [-1, -1];
  }

  finish(): CoreForest {
    const forest = this.forests[this.next];
    this.next = (this.next + 1) % this.forests.length;
    return forest;
  }

  release(): void {}
}

/** Each rollout's forest from the TS core, with its own copies of the arrays (the core reuses its). */
export function recordForests(rollouts: readonly Rollout[]): CoreForest[] {
  const pool = new TsCorePool();
  return rollouts.map((rollout) => {
    let recorded: CoreForest | null = null;
    const plan = planRollout(() => {
      const core = pool.acquire();
      return {
        memoryLimit: core.memoryLimit,
        minimumBytes: (hints: SizeHints) => core.minimumBytes(hints),
        begin: (agentParents: Int32Array, hints: SizeHints) => core.begin(agentParents, hints),
        stage: (prompt: number, generated: number) => core.stage(prompt, generated),
        staged: () => core.staged(),
        checkStagedTokens: (count: number) => core.checkStagedTokens(count),
        stageMedia: (triples: Int32Array) => core.stageMedia(triples),
        lastMediaMismatch: () => core.lastMediaMismatch(),
        stageRoutes: (ids: Int32Array) => core.stageRoutes(ids),
        lastRouteMismatch: () => core.lastRouteMismatch(),
        fullTokens: (call: number) => core.fullTokens(call),
        lastPrefixBreak: () => core.lastPrefixBreak(),
        commit: (prompt: number, generated: number, agent: number, link: boolean) =>
          core.commit(prompt, generated, agent, link),
        lastBadIndex: () => core.lastBadIndex(),
        ambiguousCandidates: () => core.ambiguousCandidates(),
        release: (reusable?: boolean) => core.release(reusable),
        finish: () => {
          const forest = core.finish();
          recorded = {
            parents: Array.from(forest.parents),
            ownerRows: Array.from(forest.ownerRows),
            paths: Array.from(forest.paths),
            rows: forest.rows.map((row) => ({
              ...row,
              tokenIds: row.tokenIds.slice(),
              logprobs: row.logprobs.slice(),
              lossMask: row.lossMask.slice(),
            })),
            packed: [],
          };
          return forest;
        },
      };
    }, rollout);
    if (plan.report.status !== "ok" || recorded === null)
      throw new Error(`${rollout.rollout_id}: not planned (${plan.report.detail})`);
    plan.release();
    return recorded;
  });
}
