// A core that links nothing and builds no rows: plan() on it costs only what every backend shares
// (checking the rollout, copying the caller's arrays into the core, the report). Its time is the
// floor under any core: ts time ÷ this time is the most an infinitely fast WASM core could gain.
import { NOT_LINKED, type CoreForest, type ForestCore, type StagedCall } from "../src/core/types.js";

export class NoopCore implements ForestCore {
  private staging: StagedCall = { tokens: new Int32Array(1 << 16), logprobs: new Float32Array(1 << 16) };
  private linked = 0;

  begin(): void {
    this.linked = 0;
  }

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

  commit(_prompt: number, _generated: number, _agent: number, link: boolean): number {
    if (!link) return NOT_LINKED;
    this.linked++;
    return -1; // every call a root
  }

  lastBadIndex(): number {
    return -1;
  }

  ambiguousCandidates(): [number, number] {
    return [-1, -1];
  }

  finish(): CoreForest {
    const n = this.linked;
    return { parents: new Int32Array(n).fill(-1), ownerRows: new Int32Array(n), paths: [], rows: [] };
  }

  release(): void {}
}
