// Host side of the WebAssembly core (assembly/index.ts). One instance serves one plan at a time:
// the plan holds it until release(), so no other plan can grow its memory and detach the views
// the plan has handed out. Released instances go back to a small pool for the next plan.
import { CoreMemoryError, CoreUnavailableError } from "./errors.js";
import { errorLine } from "../messages.js";
import {
  BREAK_QUOTE,
  type CoreBreak,
  type CoreForest,
  type CorePacked,
  type CoreRow,
  type PackRequest,
  type CoreRouteMismatch,
  SEGMENT_INTS,
  type ForestCore,
  WASM_MEMORY_MAX_BYTES,
  KEPT_MEMORY_MAX_BYTES,
  MAX_IDLE_CORES,
  type SizeHints,
  type StagedCall,
  type StagedCalls,
  STAGED_CALL_INTS,
  STAGED_RESULT,
  STAGED_RESULT_INTS,
} from "./types.js";
import { MAX_PAGES, PAGE_BYTES, memoryLimitPages } from "./memory.js";

interface CoreExports {
  memory: WebAssembly.Memory;
  begin(agents: number, callsHint: number, generatedHint: number, longestHint: number): number;
  stage(prompt: number, generated: number): void;
  stagedTokens(): number;
  stagedLogprobs(): number;
  stagedTokenCapacity(): number;
  stagedLogprobCapacity(): number;
  checkStagedTokens(count: number): number;
  stageMedia(count: number): number;
  lastMediaMismatch(): number;
  stageRoutes(count: number): number;
  lastRouteNear(): number;
  lastRouteAt(): number;
  fullTokens(call: number): number;
  fullLength(call: number): number;
  lastBreakNear(): number;
  lastBreakAt(): number;
  lastBreakQuoteLength(found: number): number;
  breakTokensAddress(): number;
  commit(prompt: number, generated: number, agent: number, link: number): number;
  lastBadIndex(): number;
  ambiguousCandidates(second: number): number;
  finish(): number;
  packLayoutAddress(segments: number, records: number): number;
  pack(): number;
  linksAddress(): number;
  rowTableAddress(): number;
  pathBufferAddress(): number;
  stageCalls(count: number, tokens: number, logprobs: number): number;
  commitStaged(count: number): number;
  batchResults(): number;
  setMemoryLimit(pages: number): void;
  setBreaksOn(on: number): void;
}

// Row record layout shared with assembly/rows.ts (R_*, there in bytes), here in i32 units;
// test/core/record-layout.test.ts fails when the two disagree (it reads RECORD_LAYOUTS below).
const ROW_RECORD = 8;
const ROW_LEAF = 0;
const ROW_PATH_OFF = 1;
const ROW_PATH_LEN = 2;
const ROW_TOKENS = 3;
const ROW_TOKEN_PTR = 4;
const ROW_LOGPROB_PTR = 5;
const ROW_MASK_PTR = 6;

// Packed record table layout shared with assembly/packed.ts (P_*, there in bytes), in i32 units;
// checked the same way.
const PACK_RECORD = 4;
const PACK_TOKEN_PTR = 0;
const PACK_POSITION_PTR = 1;
const PACK_LOGPROB_PTR = 2;
const PACK_MASK_PTR = 3;

/** The layouts above by assembly's names, in bytes, as the WebAssembly builds export them. */
export const RECORD_LAYOUTS: Readonly<Record<string, number>> = {
  // (assembly/batch.ts: in i32s)
  B_CALL: STAGED_CALL_INTS,
  B_RESULT: STAGED_RESULT_INTS,
  B_RESULT_CODE: STAGED_RESULT.code,
  B_MEDIA_MISMATCH: STAGED_RESULT.mediaMismatch,
  B_NEAR: STAGED_RESULT.near,
  B_AT: STAGED_RESULT.at,
  B_EXPECTED_LENGTH: STAGED_RESULT.expectedLength,
  B_FOUND_LENGTH: STAGED_RESULT.foundLength,
  B_QUOTES: STAGED_RESULT.quotes,
  R_SHIFT: Math.log2(ROW_RECORD * 4),
  R_LEAF: ROW_LEAF * 4,
  R_PATH_OFF: ROW_PATH_OFF * 4,
  R_PATH_LEN: ROW_PATH_LEN * 4,
  R_TOKENS: ROW_TOKENS * 4,
  R_TOKEN_PTR: ROW_TOKEN_PTR * 4,
  R_LOGPROB_PTR: ROW_LOGPROB_PTR * 4,
  R_MASK_PTR: ROW_MASK_PTR * 4,
  P_SHIFT: Math.log2(PACK_RECORD * 4),
  P_TOKEN_PTR: PACK_TOKEN_PTR * 4,
  P_POSITION_PTR: PACK_POSITION_PTR * 4,
  P_LOGPROB_PTR: PACK_LOGPROB_PTR * 4,
  P_MASK_PTR: PACK_MASK_PTR * 4,
};

/** Views of a request's records, from the table at i32 index `table`. */
function packedViews(heap: Int32Array, request: PackRequest, table: number): CorePacked[] {
  const out: CorePacked[] = [];
  request.recordTokens.forEach((tokens, r) => {
    const at = table + r * PACK_RECORD;
    out.push({
      tokenIds: new Int32Array(heap.buffer, heap[at + PACK_TOKEN_PTR] >>> 0, tokens),
      positionIds: new Int32Array(heap.buffer, heap[at + PACK_POSITION_PTR] >>> 0, tokens),
      logprobs: new Float32Array(heap.buffer, heap[at + PACK_LOGPROB_PTR] >>> 0, tokens),
      lossMask: new Uint8Array(heap.buffer, heap[at + PACK_MASK_PTR] >>> 0, (tokens + 7) >> 3),
    });
  });
  return out;
}

/** `bytes` (a whole number of KiB) in the largest binary unit that divides it. */
function binarySize(bytes: number): string {
  for (const [unit, size] of [
    ["GiB", 2 ** 30],
    ["MiB", 2 ** 20],
  ] as const)
    if (bytes % size === 0) return `${bytes / size} ${unit}`;
  return `${bytes / 1024} KiB`;
}

/** The module's one import: `abort`, called when its memory cannot grow within `limitPages`. */
function importsFor(limitPages: number): WebAssembly.Imports {
  const limit =
    limitPages === MAX_PAGES
      ? "4 GiB, the most a WebAssembly memory holds"
      : `init's maxMemory of ${binarySize(limitPages * PAGE_BYTES)}`;
  return {
    env: {
      abort(): never {
        throw new CoreMemoryError(`the WebAssembly core ran out of memory at ${limit}`);
      },
    },
  };
}

/**
 * One instance and the views the host keeps over its memory from plan to plan (a batch of small
 * rollouts would otherwise spend much of its time making views). Growth detaches them; they are
 * rebuilt then.
 */
class CoreInstance {
  staging: StagedCall | null = null;
  private heap = new Int32Array(0);

  constructor(readonly exports: CoreExports) {}

  /** All of linear memory as i32s (index = address >>> 2). */
  heap32(): Int32Array {
    const buffer = this.exports.memory.buffer;
    if (this.heap.buffer !== buffer) this.heap = new Int32Array(buffer);
    return this.heap;
  }

  /** Views spanning the staging area's capacity (see stage()). */
  stagingViews(): StagedCall {
    const core = this.exports;
    const buffer = core.memory.buffer;
    return (this.staging = {
      tokens: new Int32Array(buffer, core.stagedTokens() >>> 0, core.stagedTokenCapacity()),
      logprobs: new Float32Array(buffer, core.stagedLogprobs() >>> 0, core.stagedLogprobCapacity()),
    });
  }
}

export class WasmCorePool {
  private readonly idle: CoreInstance[] = [];
  /** Instances held by plans (and builders) not released yet. */
  private live = 0;

  private readonly limitPages: number;
  private readonly imports: WebAssembly.Imports;

  /**
   * `maxMemory`: bytes of linear memory one instance may use (see InitOptions.maxMemory);
   * `keepBytes`: the most memory a released instance may hold and still be pooled.
   */
  constructor(
    private readonly module: WebAssembly.Module,
    maxMemory = WASM_MEMORY_MAX_BYTES,
    private readonly keepBytes = KEPT_MEMORY_MAX_BYTES,
    /** Off only in the bench, which measures what finding prefix breaks costs. */
    private readonly breaksOn = true,
  ) {
    this.limitPages = memoryLimitPages(maxMemory);
    this.imports = importsFor(this.limitPages);
  }

  private instantiate(): CoreInstance {
    let instance: WebAssembly.Instance;
    try {
      instance = new WebAssembly.Instance(this.module, this.imports);
    } catch (error) {
      // Each unreleased plan holds an instance, and each reserves address space for its memory:
      // too many live plans, or a process limit (ulimit -v) — not the rollout (rollout_too_large).
      throw new CoreUnavailableError(
        `cannot create another WebAssembly core instance (each reserves address space; ` +
          `${this.live} plans of this init() are not released, ` +
          `and a limit such as ulimit -v counts every instance): ${errorLine(error)}`,
      );
    }
    const exports = instance.exports as unknown as CoreExports;
    exports.setMemoryLimit(this.limitPages);
    if (!this.breaksOn) exports.setBreaksOn(0);
    return new CoreInstance(exports);
  }

  acquire(): ForestCore {
    const instance = this.idle.pop() ?? this.instantiate();
    this.live++;
    return new WasmCore(instance, this.limitPages * PAGE_BYTES, this.giveBack);
  }

  /** Takes an instance back from a released core (one function for all of them, not a closure a plan). */
  private readonly giveBack = (done: CoreInstance, reusable: boolean): void => {
    this.live--;
    const small = done.exports.memory.buffer.byteLength <= this.keepBytes;
    if (reusable && small && this.idle.length < MAX_IDLE_CORES) this.idle.push(done);
  };
}

class WasmCore implements ForestCore {
  private readonly core: CoreExports;
  /** Eligible calls linked so far (commit results >= -1). */
  private linked = 0;
  private released = false;

  constructor(
    private readonly instance: CoreInstance,
    readonly memoryLimit: number,
    private readonly giveBack: (instance: CoreInstance, reusable: boolean) => void,
  ) {
    this.core = instance.exports;
  }

  /**
   * The longest call is staged (4 bytes a token) and stored (4), and some row holds it with its
   * logprobs (8): 16 bytes a token of it, whatever the rest of the rollout.
   */
  minimumBytes(hints: SizeHints): number {
    // (An unkept or empty call is only staged, for its checks: 4 bytes a token.)
    return Math.max(4 * hints.longestCall, 16 * (hints.longestLinked ?? 0));
  }

  begin(agentParents: Int32Array, hints: SizeHints): void {
    const table = this.core.begin(agentParents.length, hints.calls, hints.generated, hints.longestCall);
    this.instance.heap32().set(agentParents, table >>> 2);
    this.linked = 0;
    // The heap was reset: the staging area is normally where it was, with the same room, but
    // check both (a plan may start with less room than the last one had: see begin in assembly).
    const staging = this.instance.staging;
    const core = this.core;
    if (
      staging !== null &&
      (staging.tokens.byteOffset !== core.stagedTokens() >>> 0 ||
        staging.tokens.length !== core.stagedTokenCapacity() ||
        staging.logprobs.byteOffset !== core.stagedLogprobs() >>> 0 ||
        staging.logprobs.length !== core.stagedLogprobCapacity())
    ) {
      this.instance.staging = null;
    }
  }

  stage(prompt: number, generated: number): StagedCall {
    // Fast path, no call into the core: the staging area is big enough and its views are live
    // (views detached by memory growth read as empty, so this also catches growth).
    const s = this.instance.staging;
    if (s !== null && s.tokens.length >= prompt + generated && s.logprobs.length >= generated) return s;
    this.core.stage(prompt, generated);
    return this.instance.stagingViews();
  }

  staged(): StagedCall {
    const s = this.instance.staging!;
    // Memory grew while the call was linked: fresh views over the same (unmoved) staging area.
    return s.tokens.buffer === this.core.memory.buffer ? s : this.instance.stagingViews();
  }

  checkStagedTokens(count: number): number {
    return this.core.checkStagedTokens(count);
  }

  stageCalls(count: number, tokens: number, logprobs: number): StagedCalls {
    const core = this.core;
    const table = core.stageCalls(count, tokens, logprobs) >>> 2;
    // The staging area may have moved or grown: the one-call views are rebuilt when next needed.
    this.instance.staging = null;
    const heap = this.instance.heap32();
    const at = core.stagedTokens() >>> 2;
    return {
      table: heap.subarray(table, table + STAGED_CALL_INTS * count),
      tokens: heap.subarray(at, at + tokens),
      logprobs: new Float32Array(heap.buffer, core.stagedLogprobs() >>> 0, logprobs),
    };
  }

  commitStaged(count: number): { failed: number; results: Int32Array } {
    const failed = this.core.commitStaged(count);
    const done = failed < 0 ? count : failed + 1;
    const at = this.core.batchResults() >>> 2;
    const heap = this.instance.heap32(); // (after the call: linking may have grown memory)
    for (let i = 0; i < done; i++) if (heap[at + i * STAGED_RESULT_INTS + STAGED_RESULT.code] >= -1) this.linked++;
    return { failed, results: heap.subarray(at, at + STAGED_RESULT_INTS * done) };
  }

  stageMedia(triples: Int32Array): void {
    const at = this.core.stageMedia(triples.length / 3);
    // After the call: staging may have grown memory.
    this.instance.heap32().set(triples, at >>> 2);
  }

  lastMediaMismatch(): boolean {
    return this.core.lastMediaMismatch() !== 0;
  }

  stageRoutes(ids: Int32Array): void {
    const at = this.core.stageRoutes(ids.length);
    this.instance.heap32().set(ids, at >>> 2);
  }

  lastRouteMismatch(): CoreRouteMismatch | null {
    const near = this.core.lastRouteNear();
    return near < 0 ? null : { near, at: this.core.lastRouteAt() };
  }

  fullTokens(call: number): Int32Array {
    const at = this.core.fullTokens(call) >>> 2;
    // It wrote in the staging area, which may have moved: the next stage() makes fresh views.
    this.instance.staging = null;
    const heap = this.instance.heap32();
    return heap.slice(at, at + this.core.fullLength(call));
  }

  lastPrefixBreak(): CoreBreak | null {
    const core = this.core;
    const near = core.lastBreakNear();
    if (near < 0) return null;
    const heap = this.instance.heap32();
    const at = core.breakTokensAddress() >>> 2;
    return {
      near,
      at: core.lastBreakAt(),
      expected: Array.from(heap.subarray(at, at + core.lastBreakQuoteLength(0))),
      found: Array.from(heap.subarray(at + BREAK_QUOTE, at + BREAK_QUOTE + core.lastBreakQuoteLength(1))),
    };
  }

  commit(prompt: number, generated: number, agent: number, link: boolean): number {
    const result = this.core.commit(prompt, generated, agent, link ? 1 : 0);
    if (result >= -1) this.linked++;
    return result;
  }

  lastBadIndex(): number {
    return this.core.lastBadIndex();
  }

  ambiguousCandidates(): [number, number] {
    return [this.core.ambiguousCandidates(0), this.core.ambiguousCandidates(1)];
  }

  finish(packs: readonly PackRequest[] = []): CoreForest {
    const rowCount = this.core.finish();
    // Packing may grow memory: every pack runs before any view is made.
    const packTables = packs.map((request) => {
      const at =
        this.core.packLayoutAddress(request.segments.length / SEGMENT_INTS, request.recordStarts.length - 1) >>> 2;
      const heap = this.instance.heap32();
      heap.set(request.segments, at);
      heap.set(request.recordStarts, at + request.segments.length);
      return this.core.pack() >>> 2;
    });
    // Memory does not grow after this, so these views stay valid until release().
    const heap = this.instance.heap32();
    const buffer = heap.buffer;
    const n = this.linked;
    const linksAt = this.core.linksAddress() >>> 2;
    // A copy: plan.forest reads it lazily, possibly after release() hands the memory on. Plain
    // arrays: a typed array this small costs a buffer of its own, and at one plan a small rollout
    // those kept the GC busy.
    const parents = new Array<number>(n);
    const ownerRows = new Array<number>(n);
    for (let e = 0; e < n; e++) {
      parents[e] = heap[linksAt + e];
      ownerRows[e] = heap[linksAt + n + e];
    }
    const table = this.core.rowTableAddress() >>> 2;
    const pathBase = this.core.pathBufferAddress() >>> 2;
    const rows: CoreRow[] = [];
    for (let r = 0; r < rowCount; r++) {
      const at = table + r * ROW_RECORD;
      const tokens = heap[at + ROW_TOKENS];
      rows.push({
        leaf: heap[at + ROW_LEAF],
        pathStart: pathBase + heap[at + ROW_PATH_OFF],
        pathLength: heap[at + ROW_PATH_LEN],
        tokenIds: new Int32Array(buffer, heap[at + ROW_TOKEN_PTR] >>> 0, tokens),
        logprobs: new Float32Array(buffer, heap[at + ROW_LOGPROB_PTR] >>> 0, tokens),
        lossMask: new Uint8Array(buffer, heap[at + ROW_MASK_PTR] >>> 0, (tokens + 7) >> 3),
      });
    }
    const packed = packs.map((request, i) => packedViews(heap, request, packTables[i]));
    return { parents, ownerRows, paths: heap, rows, packed };
  }

  release(reusable = true): void {
    if (this.released) return;
    this.released = true;
    this.giveBack(this.instance, reusable);
  }
}
