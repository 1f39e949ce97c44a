// What packing saves on a real model (issue 27): the forward FLOPs of a transformer's attention
// and MLP over rows, packed trees and bins of the bench's deep and fork-heavy rollouts, counted
// from shapes and from the mask's visible keys (nothing is timed). The rollouts are generated
// with contexts compacted to fit the trainer's sequence length C (a row longer than C cannot be
// trained at C), for C = 8K and 32K.
//   npm run bench:flops
import { pathToFileURL } from "node:url";
import { init, type Callforest } from "callforest";
import type { PackedSegment, Rollout } from "../src/types.js";
import { generateDeepRollout, generateForkHeavyRollout } from "./generate.js";

/** A dense decoder's shapes; FLOPs scale with these. Qwen3-8B's, from its config.json. */
export interface ModelShape {
  name: string;
  layers: number;
  hidden: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
}

export const QWEN3_8B: ModelShape = {
  name: "Qwen3-8B",
  layers: 36,
  hidden: 4096,
  heads: 32,
  kvHeads: 8,
  headDim: 128,
  intermediate: 12288,
};

/** FlexAttention's default block: it computes every 128×128 block that holds a visible key. */
const BLOCK = 128;

/** Token and query–key counts of a set of records. */
export interface Counts {
  records: number;
  tokens: number;
  /** Σ over queries of the keys each may attend to (the attention rule). */
  visiblePairs: number;
  /** Query–key pairs in the 128×128 blocks that hold at least one visible pair. */
  blockPairs: number;
}

/** Counts for one record from its segments (a row is one segment ending at n). */
export function countRecord(n: number, segments: readonly Pick<PackedSegment, "start" | "length" | "end">[]): Counts {
  const end = new Int32Array(n);
  for (const s of segments) end.fill(s.end, s.start, s.start + s.length);
  let visiblePairs = 0;
  const blocks = Math.ceil(n / BLOCK);
  const blockEnd = new Int32Array(blocks); // the furthest query any key of the block reaches
  for (let k = 0; k < n; k++) {
    visiblePairs += end[k] - k; // k is seen by queries k .. end[k] - 1
    const b = Math.floor(k / BLOCK);
    if (end[k] > blockEnd[b]) blockEnd[b] = end[k];
  }
  // Block (qb, kb) holds a visible pair iff kb == qb (the diagonal) or some key of kb reaches qb.
  let blockPairs = 0;
  const size = (b: number) => Math.min(BLOCK, n - b * BLOCK);
  for (let qb = 0; qb < blocks; qb++) {
    for (let kb = 0; kb <= qb; kb++) {
      if (kb === qb || blockEnd[kb] > qb * BLOCK) blockPairs += size(qb) * size(kb);
    }
  }
  return { records: 1, tokens: n, visiblePairs, blockPairs };
}

function add(a: Counts, b: Counts): Counts {
  return {
    records: a.records + b.records,
    tokens: a.tokens + b.tokens,
    visiblePairs: a.visiblePairs + b.visiblePairs,
    blockPairs: a.blockPairs + b.blockPairs,
  };
}

const ZERO: Counts = { records: 0, tokens: 0, visiblePairs: 0, blockPairs: 0 };

/** Forward FLOPs (a multiply-add is 2), summed over layers; embeddings and the LM head left out. */
export function flops(m: ModelShape, c: Counts, pairs: "visiblePairs" | "blockPairs" = "visiblePairs") {
  const q = m.heads * m.headDim;
  const kv = m.kvHeads * m.headDim;
  const projections = 2 * m.hidden * (2 * q + 2 * kv) * c.tokens; // q, k, v, o
  const scores = 4 * q * c[pairs]; // QKᵀ and AV: 2 FLOPs per pair per dimension each
  const mlp = 2 * 3 * m.hidden * m.intermediate * c.tokens; // gate, up, down (SwiGLU)
  return { attention: m.layers * (projections + scores), mlp: m.layers * mlp };
}

export interface FlopsRow {
  workload: string;
  /** The trainer's sequence length; null for the bench's own contexts (no bins). */
  capacity: number | null;
  rows: Counts;
  trees: Counts;
  bins: Counts;
}

function countLayouts(
  cf: Callforest,
  rollout: Rollout,
  capacity: number | null,
): Omit<FlopsRow, "workload" | "capacity"> | null {
  const plan = cf.plan(rollout, capacity === null ? { trees: true } : { trees: true, capacity });
  if (plan.report.status !== "ok") {
    plan.release();
    return null;
  }
  let rows = ZERO;
  for (const row of plan.rows)
    rows = add(rows, countRecord(row.numTokens, [{ start: 0, length: row.numTokens, end: row.numTokens }]));
  let trees = ZERO;
  for (const tree of plan.trees) trees = add(trees, countRecord(tree.numTokens, tree.segments));
  let bins = ZERO;
  for (const bin of plan.bins) bins = add(bins, countRecord(bin.numTokens, bin.segments));
  plan.release();
  return { rows, trees, bins };
}

/**
 * The workload generated with the largest context limit (a fraction of C) at which every leaf
 * fits C: agents compact past it, and a step or two more must still fit.
 */
function fitted(cf: Callforest, make: (maxContext: number) => Rollout, capacity: number) {
  for (const fraction of [0.75, 0.6, 0.5, 0.4, 0.3, 0.2]) {
    const counts = countLayouts(cf, make(Math.floor(capacity * fraction)), capacity);
    if (counts !== null) return { fraction, ...counts };
  }
  throw new Error(`no context limit fits ${capacity}`);
}

export async function runFlopsBench(log: (line: string) => void = console.log): Promise<FlopsRow[]> {
  const cf = await init();
  const workloads: [string, (maxContext?: number) => Rollout][] = [
    ["deep rollout", (maxContext) => generateDeepRollout({ targetTokens: 10_000_000, maxContext })],
    ["fork-heavy rollout", (maxContext) => generateForkHeavyRollout({ maxContext })],
  ];
  const out: FlopsRow[] = [];
  for (const [name, make] of workloads) {
    out.push({ workload: `${name}, the bench's contexts`, capacity: null, ...countLayouts(cf, make(), null)! });
  }
  for (const capacity of [8192, 32768]) {
    for (const [name, make] of workloads) {
      const { fraction, ...counts } = fitted(cf, make, capacity);
      const workload = `${name}, compacted past ${Math.round(fraction * 100)}% of C`;
      out.push({ workload, capacity, ...counts });
      log(`${workload} at ${capacity}: done`);
    }
  }
  return out;
}

const tera = (n: number) => (n / 1e12).toFixed(0);
const times = (a: number, b: number) => `${(a / b).toFixed(2)}×`;

export function flopsTable(rows: FlopsRow[], model: ModelShape = QWEN3_8B): string {
  const head =
    "| workload | C | tokens: rows / trees / bins | attention TFLOP: rows / trees / bins | MLP TFLOP: rows / trees / bins | " +
    "total: rows ÷ bins | total: rows ÷ trees | attention TFLOP in 128×128 blocks: rows / bins |";
  const out = [head, `|---|---:|---:|---:|---:|---:|---:|---:|`];
  for (const r of rows) {
    const hasBins = r.capacity !== null;
    const [rows_, trees, bins] = [r.rows, r.trees, r.bins].map((c) => flops(model, c));
    const total = (f: { attention: number; mlp: number }) => f.attention + f.mlp;
    const blockRows = flops(model, r.rows, "blockPairs").attention;
    const blockBins = flops(model, r.bins, "blockPairs").attention;
    const three = (f: (c: Counts, i: number) => string) =>
      [r.rows, r.trees, r.bins].map((c, i) => (i === 2 && !hasBins ? "—" : f(c, i))).join(" / ");
    const all = [rows_, trees, bins];
    const cells = [
      r.workload,
      hasBins ? `${r.capacity! / 1024}K` : "—",
      three((c) => c.tokens.toLocaleString("en-US")),
      three((_, i) => tera(all[i].attention)),
      three((_, i) => tera(all[i].mlp)),
      hasBins ? times(total(rows_), total(bins)) : "—",
      times(total(rows_), total(trees)),
      `${tera(blockRows)} / ${hasBins ? tera(blockBins) : "—"}`,
    ];
    out.push(`| ${cells.join(" | ")} |`);
  }
  return out.join("\n");
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const rows = await runFlopsBench((line) => process.stderr.write(`${line}\n`));
  process.stdout.write(`${flopsTable(rows)}\n`);
}
