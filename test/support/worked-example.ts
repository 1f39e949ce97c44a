// SPEC's worked example and the five rows SPEC's table gives for it, written out by hand.
import { readFileSync } from "node:fs";
import type { Callforest } from "../../src/index.js";
import type { Plan, Rollout } from "../../src/types.js";
import { typedRollout } from "../../bench/generate.js";

export const EXAMPLE_PATH = new URL("../../examples/login-bug.json", import.meta.url).pathname;

export function loadExample(): Rollout {
  return JSON.parse(readFileSync(EXAMPLE_PATH, "utf8")) as Rollout;
}

export interface ExpectedRow {
  leaf: string;
  agent: string;
  calls: string[];
  trained: string[];
  context: string[];
  tokenIds: number[];
  /** One character per token: 1 = trained. */
  mask: string;
  /** Logprob per token (before float32 rounding). */
  logprobs: number[];
}

const L = [100, 101, 102, 110, 111, 200, 201, 120, 210, 211, 130, 131, 220, 221];

export const EXPECTED_ROWS: ExpectedRow[] = [
  {
    leaf: "C4",
    agent: "B",
    calls: ["C2", "C4"],
    trained: ["C2", "C4"],
    context: [],
    tokenIds: [300, 301, 302, 310, 311, 320, 321, 330],
    mask: "00011001",
    logprobs: [0, 0, 0, -0.21, -0.22, 0, 0, -0.41],
  },
  {
    leaf: "C6",
    agent: "A",
    calls: ["C5", "C6"],
    trained: ["C5", "C6"],
    context: [],
    tokenIds: [400, 401, 402, 410, 411, 420, 430, 431],
    mask: "00011011",
    logprobs: [0, 0, 0, -0.51, -0.52, 0, -0.61, -0.62],
  },
  {
    leaf: "C9",
    agent: "F",
    calls: ["C1", "C3", "C7", "C8", "C9"],
    trained: ["C8", "C9"],
    context: ["C1", "C3", "C7"],
    tokenIds: [...L, 500, 510, 511, 520, 530],
    mask: "0000000000000001101",
    logprobs: [0, 0, 0, 0, 0, -0.11, -0.12, 0, -0.31, -0.32, 0, 0, -0.71, -0.72, 0, -0.81, -0.82, 0, -0.91],
  },
  {
    leaf: "C10",
    agent: "L",
    calls: ["C1", "C3", "C7", "C10"],
    trained: ["C1", "C3", "C7", "C10"],
    context: [],
    tokenIds: [...L, 140, 150, 230, 231, 232],
    mask: "0000011011001100111",
    logprobs: [0, 0, 0, 0, 0, -0.11, -0.12, 0, -0.31, -0.32, 0, 0, -0.71, -0.72, 0, 0, -1.01, -1.02, -1.03],
  },
  {
    leaf: "C12",
    agent: "L",
    calls: ["C11", "C12"],
    trained: ["C11", "C12"],
    context: [],
    tokenIds: [100, 101, 102, 160, 161, 162, 240, 170, 250],
    mask: "000000101",
    logprobs: [0, 0, 0, 0, 0, 0, -1.11, 0, -1.21],
  },
];

/**
 * SPEC's table of the packed tree 0 (SPEC v4, "Worked example"): each segment's call, parent,
 * start, length and end.
 */
export const TREE0_SEGMENTS: readonly (readonly [string, number, number, number, number])[] = [
  ["C1", -1, 0, 3, 30],
  ["C1", 0, 3, 4, 24],
  ["C3", 1, 7, 3, 24],
  ["C7", 2, 10, 4, 24],
  ["C8", 3, 14, 3, 19],
  ["C9", 4, 17, 2, 19],
  ["C10", 3, 19, 5, 24],
  ["C11", 0, 24, 4, 30],
  ["C12", 7, 28, 2, 30],
];

/** The same as text, "call parent start length end" a segment. */
export const TREE0_LINES: readonly string[] = TREE0_SEGMENTS.map((s) => s.join(" "));

export const EXPECTED_COUNTS = {
  calls: 12,
  eligible: 12,
  roots: 4,
  leaves: 5,
  rows: 5,
  captured_tokens: 21,
  trained_tokens: 21,
  row_tokens: 63,
  unique_tokens: 49,
};

/** Packs a "0101..." string into SPEC's bitset (bit i = bit i%8 of byte i/8), independently of src/. */
export function packMask(bits: string): Uint8Array {
  const out = new Uint8Array(Math.ceil(bits.length / 8));
  for (let i = 0; i < bits.length; i++) if (bits[i] === "1") out[Math.floor(i / 8)] += 2 ** (i % 8);
  return out;
}

/** The example with its arrays as Int32Array/Float32Array. */
export function typedExample(): Rollout {
  return typedRollout(loadExample());
}

/** Plans a canonical rollout through the builder (each call written into its slot, then committed). */
export function buildFrom(cf: Callforest, rollout: Rollout, options: { callsHint?: number } = {}): Plan {
  const b = cf.builder({ rollout_id: rollout.rollout_id, reward: rollout.reward, agents: rollout.agents }, options);
  for (const call of rollout.calls) {
    const slot = b.stage(call.prompt_token_ids.length, call.generation_token_ids.length);
    slot.promptTokenIds.set(call.prompt_token_ids);
    slot.generationTokenIds.set(call.generation_token_ids);
    slot.logprobs.set(call.generation_log_probs);
    b.commit({ id: call.id, agent: call.agent, kept: call.kept, media: call.media });
  }
  return b.finish();
}
