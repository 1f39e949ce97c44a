// planBatch's output: every row's arrays copied, as each rollout is planned, into buffers that grow
// by doubling, so the rollout's core goes back to the pool at once and the next rollout reuses it.
// Fresh buffers of a batch's size cost more to page in than planning it, so a released result's
// buffers are kept (one set, BatchBufferPool) for the next batch, as cores are kept for plans.
// Row objects are not kept: a thousand rollouts' rows alive until the batch ends outlive the young
// generation and cost more in the GC than planning them; rows(r) plans rollout r again (the same
// rows: planning is deterministic) and points its rows' arrays at these buffers.
import { KEPT_MEMORY_MAX_BYTES } from "../core/types.js";
import type { BatchPlan, Plan, Report, Row } from "../types.js";

type Numbers = Int32Array | Float32Array | Uint8Array;

class Growing<T extends Numbers> {
  length = 0;
  constructor(
    public data: T,
    private readonly make: (n: number) => T,
  ) {}
  /** Room for `more` after `length`; returns where they go. */
  reserve(more: number): number {
    const at = this.length;
    if (at + more > this.data.length) {
      const grown = this.make(Math.max(2 * this.data.length, at + more));
      grown.set(this.data.subarray(0, at) as never);
      this.data = grown;
    }
    this.length = at + more;
    return at;
  }
  push(value: number): void {
    const at = this.reserve(1); // before reading `data`, which reserve may replace
    this.data[at] = value;
  }
  /** Appends a copy of `values`. */
  append(values: T): void {
    const at = this.reserve(values.length);
    this.data.set(values as never, at);
  }
  get used(): T {
    return this.data.subarray(0, this.length) as T;
  }
}

/** A batch result's arrays, whole (not the used part): what a released result gives back. */
interface Buffers {
  rowStarts: Int32Array;
  tokenStarts: Int32Array;
  maskStarts: Int32Array;
  tokens: Int32Array;
  logprobs: Float32Array;
  masks: Uint8Array;
}

/** The one set of buffers kept idle between batches (none past KEPT_MEMORY_MAX_BYTES). */
export class BatchBufferPool {
  private idle: Buffers | null = null;
  take(): Buffers | null {
    const buffers = this.idle;
    this.idle = null;
    return buffers;
  }
  give(buffers: Buffers): void {
    const bytes = Object.values(buffers).reduce((n: number, a: Numbers) => n + a.byteLength, 0);
    if (bytes <= KEPT_MEMORY_MAX_BYTES) this.idle = buffers;
  }
}

const ints = (n: number) => new Int32Array(n);

/** A planned rollout as the batch takes it (a Plan is one): its report, and rows until release(). */
export interface PlannedRows {
  report: Report;
  rows: readonly { tokenIds: Int32Array; logprobs: Float32Array; lossMask: Uint8Array }[];
  release(): void;
}

export class BatchRows {
  private readonly reports: Report[] = [];
  private rowCount = 0;
  private readonly rowStarts: Growing<Int32Array>;
  private readonly tokenStarts: Growing<Int32Array>;
  private readonly maskStarts: Growing<Int32Array>;
  private readonly tokens: Growing<Int32Array>;
  private readonly logprobs: Growing<Float32Array>;
  private readonly masks: Growing<Uint8Array>;

  constructor(
    private readonly pool: BatchBufferPool,
    tokenHint: number,
  ) {
    const size = Math.max(1024, tokenHint);
    const b = pool.take();
    this.rowStarts = new Growing(b?.rowStarts ?? ints(64), ints);
    this.tokenStarts = new Growing(b?.tokenStarts ?? ints(256), ints);
    this.maskStarts = new Growing(b?.maskStarts ?? ints(256), ints);
    this.tokens = new Growing(b?.tokens ?? ints(size), ints);
    this.logprobs = new Growing(b?.logprobs ?? new Float32Array(size), (n) => new Float32Array(n));
    this.masks = new Growing(b?.masks ?? new Uint8Array(size >> 3), (n) => new Uint8Array(n));
    this.rowStarts.push(0);
    this.tokenStarts.push(0);
    this.maskStarts.push(0);
  }

  /** Copies the plan's rows out (whole: reused buffers are not zeroed) and keeps its report; the caller releases the plan. */
  add(plan: PlannedRows): void {
    this.reports.push(plan.report);
    for (const row of plan.rows) {
      this.tokens.append(row.tokenIds);
      this.logprobs.append(row.logprobs);
      this.masks.append(row.lossMask);
      this.tokenStarts.push(this.tokens.length);
      this.maskStarts.push(this.masks.length);
    }
    this.rowCount += plan.rows.length;
    this.rowStarts.push(this.rowCount);
  }

  /** The result; `replan(r)` plans rollout r again, for its rows' fields. */
  result(replan: (rollout: number) => Plan): BatchPlan {
    const whole: Buffers = {
      rowStarts: this.rowStarts.data,
      tokenStarts: this.tokenStarts.data,
      maskStarts: this.maskStarts.data,
      tokens: this.tokens.data,
      logprobs: this.logprobs.data,
      masks: this.masks.data,
    };
    const release = () => this.pool.give(whole);
    return new PlannedBatch(
      this.reports,
      this.rowStarts.used,
      this.tokenStarts.used,
      this.maskStarts.used,
      this.tokens.used,
      this.logprobs.used,
      this.masks.used,
      replan,
      release,
    );
  }
}

const NO_TOKENS = new Int32Array(0);
const NO_LOGPROBS = new Float32Array(0);
const NO_MASK = new Uint8Array(0);

class PlannedBatch implements BatchPlan {
  // #private: not enumerable, so inspecting the result shows the buffers, not every row object.
  readonly #replan: (rollout: number) => Plan;
  #giveBack: (() => void) | null;

  constructor(
    readonly reports: Report[],
    public rowStarts: Int32Array,
    public tokenStarts: Int32Array,
    public maskStarts: Int32Array,
    public tokenIds: Int32Array,
    public logprobs: Float32Array,
    public lossMask: Uint8Array,
    replan: (rollout: number) => Plan,
    giveBack: () => void,
  ) {
    this.#replan = replan;
    this.#giveBack = giveBack;
  }

  rows(rollout: number): Row[] {
    if (!Number.isInteger(rollout) || rollout < 0 || rollout >= this.reports.length)
      throw new RangeError(`rows(${rollout}): the batch has ${this.reports.length} rollouts`);
    const from = this.rowStarts[rollout];
    const plan = this.#replan(rollout);
    const rows = plan.rows;
    plan.release(); // (it empties the rows' arrays, which are pointed at the copies below)
    if (rows.length !== this.rowStarts[rollout + 1] - from) throw new Error(`rows(${rollout}): planned differently`);
    rows.forEach((row, i) => {
      const k = from + i;
      row.tokenIds = this.tokenIds.subarray(this.tokenStarts[k], this.tokenStarts[k + 1]);
      row.logprobs = this.logprobs.subarray(this.tokenStarts[k], this.tokenStarts[k + 1]);
      row.lossMask = this.lossMask.subarray(this.maskStarts[k], this.maskStarts[k + 1]);
    });
    return rows;
  }

  release(): void {
    if (this.#giveBack === null) return;
    this.#giveBack();
    this.#giveBack = null;
    // As plan.release(): what is read after shows nothing rather than the next batch's rows.
    this.tokenIds = NO_TOKENS;
    this.logprobs = NO_LOGPROBS;
    this.lossMask = NO_MASK;
  }
}
