// Host side of the WebAssembly core (assembly/index.ts). One instance serves one plan at a time:
// the plan holds it until release(), so no other plan can grow its memory and detach the views
// the plan has handed out. Released instances go back to a small pool for the next plan.
import {
  type CoreForest,
  type CoreRow,
  type ForestCore,
  type StagedCall,
} from "./types.js";

interface CoreExports {
  memory: WebAssembly.Memory;
  begin(agents: number, callsHint: number, generatedHint: number): number;
  stage(prompt: number, generated: number): void;
  stagedTokens(): number;
  stagedLogprobs(): number;
  stagedTokenCapacity(): number;
  stagedLogprobCapacity(): number;
  checkStagedTokens(count: number): number;
  commit(prompt: number, generated: number, agent: number, link: number): number;
  lastBadIndex(): number;
  ambiguousCandidates(second: number): number;
  finish(): number;
  callTable(): number;
  rowTableAddress(): number;
  pathBufferAddress(): number;
  ownerRowsAddress(): number;
  setMemoryLimit(pages: number): void;
}

// Record layouts shared with assembly/tree.ts and assembly/rows.ts (in i32 units).
const CALL_RECORD = 8;
const CALL_PARENT = 4;
const ROW_RECORD = 8;
const ROW_LEAF = 0;
const ROW_PATH_OFF = 1;
const ROW_PATH_LEN = 2;
const ROW_TOKENS = 3;
const ROW_TOKEN_PTR = 4;
const ROW_LOGPROB_PTR = 5;
const ROW_MASK_PTR = 6;

/** The instance traps with this when linear memory cannot grow. */
export class CoreMemoryError extends Error {}

const imports = {
  env: {
    abort(): never {
      throw new CoreMemoryError("the WebAssembly core ran out of memory");
    },
  },
};

const MAX_IDLE_INSTANCES = 2;

export class WasmCorePool {
  private readonly idle: CoreExports[] = [];

  /** `maxMemory`: bytes of linear memory one instance may use (see InitOptions.maxMemory). */
  constructor(
    private readonly module: WebAssembly.Module,
    private readonly maxMemory = 2 ** 32,
  ) {}

  private instantiate(): CoreExports {
    const exports = new WebAssembly.Instance(this.module, imports).exports as unknown as CoreExports;
    exports.setMemoryLimit(Math.max(1, Math.floor(this.maxMemory / 65536)));
    return exports;
  }

  acquire(): ForestCore {
    const exports = this.idle.pop() ?? this.instantiate();
    return new WasmCore(exports, (done) => {
      if (this.idle.length < MAX_IDLE_INSTANCES) this.idle.push(done);
    });
  }
}

class WasmCore implements ForestCore {
  private calls = 0;
  private released = false;
  private views: StagedCall | null = null;

  constructor(
    private readonly core: CoreExports,
    private readonly giveBack: (core: CoreExports) => void,
  ) {}

  begin(agentParents: Int32Array, callsHint: number, generatedHint: number): void {
    const table = this.core.begin(agentParents.length, callsHint, generatedHint);
    new Int32Array(this.core.memory.buffer, table >>> 0, agentParents.length).set(agentParents);
    this.calls = 0;
    this.views = null;
  }

  stage(prompt: number, generated: number): StagedCall {
    this.core.stage(prompt, generated);
    // Views span the staging area's capacity and are reused until it moves (it grows rarely).
    const buffer = this.core.memory.buffer;
    const tokensAt = this.core.stagedTokens() >>> 0;
    const logprobsAt = this.core.stagedLogprobs() >>> 0;
    const s = this.views;
    if (
      s === null ||
      s.tokens.buffer !== buffer ||
      s.tokens.byteOffset !== tokensAt ||
      s.logprobs.byteOffset !== logprobsAt ||
      s.tokens.length < prompt + generated ||
      s.logprobs.length < generated
    ) {
      this.views = {
        tokens: new Int32Array(buffer, tokensAt, this.core.stagedTokenCapacity()),
        logprobs: new Float32Array(buffer, logprobsAt, this.core.stagedLogprobCapacity()),
      };
    }
    return this.views!;
  }

  staged(): StagedCall {
    const s = this.views!;
    if (s.tokens.buffer === this.core.memory.buffer) return s;
    // Memory grew while the call was linked: fresh views over the same (unmoved) staging area
    // (a detached view reads as empty, so its length cannot be reused).
    const buffer = this.core.memory.buffer;
    this.views = {
      tokens: new Int32Array(buffer, this.core.stagedTokens() >>> 0, this.core.stagedTokenCapacity()),
      logprobs: new Float32Array(buffer, this.core.stagedLogprobs() >>> 0, this.core.stagedLogprobCapacity()),
    };
    return this.views;
  }

  checkStagedTokens(count: number): number {
    return this.core.checkStagedTokens(count);
  }

  commit(prompt: number, generated: number, agent: number, link: boolean): number {
    const result = this.core.commit(prompt, generated, agent, link ? 1 : 0);
    if (result >= -1) this.calls++;
    return result;
  }

  lastBadIndex(): number {
    return this.core.lastBadIndex();
  }

  ambiguousCandidates(): [number, number] {
    return [this.core.ambiguousCandidates(0), this.core.ambiguousCandidates(1)];
  }

  finish(): CoreForest {
    const rowCount = this.core.finish();
    // Memory does not grow after finish(), so these views stay valid until release().
    const buffer = this.core.memory.buffer;
    const n = this.calls;
    const callTable = new Int32Array(buffer, this.core.callTable() >>> 0, n * CALL_RECORD);
    const parents = new Int32Array(n);
    for (let c = 0; c < n; c++) parents[c] = callTable[c * CALL_RECORD + CALL_PARENT];
    // A copy: plan.forest reads it lazily, possibly after release() hands the memory on.
    const ownerRows = new Int32Array(buffer, this.core.ownerRowsAddress() >>> 0, n).slice();
    const table = new Int32Array(buffer, this.core.rowTableAddress() >>> 0, rowCount * ROW_RECORD);
    const pathBase = this.core.pathBufferAddress() >>> 0;
    const rows: CoreRow[] = [];
    for (let r = 0; r < rowCount; r++) {
      const at = r * ROW_RECORD;
      const tokens = table[at + ROW_TOKENS];
      rows.push({
        leaf: table[at + ROW_LEAF],
        path: new Int32Array(buffer, pathBase + table[at + ROW_PATH_OFF] * 4, table[at + ROW_PATH_LEN]),
        tokenIds: new Int32Array(buffer, table[at + ROW_TOKEN_PTR] >>> 0, tokens),
        logprobs: new Float32Array(buffer, table[at + ROW_LOGPROB_PTR] >>> 0, tokens),
        lossMask: new Uint8Array(buffer, table[at + ROW_MASK_PTR] >>> 0, (tokens + 7) >> 3),
      });
    }
    return { parents, ownerRows, rows };
  }

  release(reusable = true): void {
    if (this.released) return;
    this.released = true;
    if (reusable) this.giveBack(this.core);
  }
}
