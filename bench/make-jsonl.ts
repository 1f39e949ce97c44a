// Writes the ingest benchmark's input once: ~1 GB of canonical rollouts as JSONL, a few huge
// rollouts (deep forests of millions of tokens) spread among many small ones. Logprobs are
// written as vLLM/Gym do (a float32 widened to double, e.g. -0.12345679104328156). The file and a
// `.meta.json` beside it (bytes, tokens, rollouts) are reused while size, seed and generator match.
import { createHash } from "node:crypto";
import { createWriteStream, existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Rollout } from "../src/types.js";
import { generateDeepRollout, generateSmallRollouts } from "./generate.js";

export interface JsonlInput {
  path: string;
  bytes: number;
  /** Token IDs in the file (prompt + generation of every call). */
  tokens: number;
  rollouts: number;
  huge: number;
}

/**
 * What makes the file: this module, the generator and its random numbers, as compiled. A change
 * to any of them makes a new file rather than silently reusing one written by older code.
 */
function generatorVersion(): string {
  const hash = createHash("sha256");
  for (const module of ["./make-jsonl.js", "./generate.js", "../src/random.js"])
    hash.update(readFileSync(new URL(module, import.meta.url)));
  return hash.digest("hex").slice(0, 12);
}

function numbers(values: ArrayLike<number>): string {
  return "[" + Array.prototype.join.call(values, ",") + "]";
}

/** One rollout as a JSONL line (SPEC field names; arrays written directly, no replacer). */
function line(rollout: Rollout): { text: string; tokens: number } {
  let tokens = 0;
  const calls = rollout.calls.map((call) => {
    tokens += call.prompt_token_ids.length + call.generation_token_ids.length;
    const kept = call.kept === false ? ',"kept":false' : "";
    return (
      `{"id":${JSON.stringify(call.id)},"agent":${JSON.stringify(call.agent ?? "")}${kept},` +
      `"prompt_token_ids":${numbers(call.prompt_token_ids)},` +
      `"generation_token_ids":${numbers(call.generation_token_ids)},` +
      `"generation_log_probs":${numbers(call.generation_log_probs)}}`
    );
  });
  const agents = rollout.agents === undefined ? "" : `,"agents":${JSON.stringify(rollout.agents)}`;
  const text =
    `{"rollout_id":${JSON.stringify(rollout.rollout_id)},"reward":${rollout.reward}${agents},` +
    `"calls":[${calls.join(",")}]}\n`;
  return { text, tokens };
}

/**
 * The benchmark file for `targetBytes` and `seed` in os.tmpdir(), written unless already there
 * (from this version of the generator).
 * `huge` rollouts of about `hugeTokens` tokens each are spread evenly among small ones.
 */
export async function makeJsonl(
  options: { targetBytes?: number; seed?: number; huge?: number; hugeTokens?: number; log?: (s: string) => void } = {},
): Promise<JsonlInput> {
  const targetBytes = options.targetBytes ?? 1 << 30;
  const seed = options.seed ?? 1;
  const huge = options.huge ?? 4;
  const hugeTokens = options.hugeTokens ?? 12_000_000;
  const log = options.log ?? (() => {});
  const path = join(
    tmpdir(),
    `callforest-ingest-${generatorVersion()}-${targetBytes}-${seed}-${huge}x${hugeTokens}.jsonl`,
  );
  const metaPath = path + ".meta.json";
  if (existsSync(path) && existsSync(metaPath)) {
    const meta = JSON.parse(readFileSync(metaPath, "utf8")) as JsonlInput;
    if (meta.bytes === statSync(path).size) return meta;
  }
  log(`writing ${path} (~${(targetBytes / 2 ** 20).toFixed(0)} MB, once)`);
  const out = createWriteStream(path);
  const write = (text: string) =>
    out.write(text) ? Promise.resolve() : new Promise<void>((r) => out.once("drain", () => r()));
  let bytes = 0;
  let tokens = 0;
  let rollouts = 0;
  const emit = async (rollout: Rollout) => {
    const { text, tokens: n } = line(rollout);
    await write(text);
    bytes += Buffer.byteLength(text);
    tokens += n;
    rollouts++;
  };
  // Huge rollouts go in at even byte intervals, starting a little into the file.
  let hugeDone = 0;
  let batch = 0;
  while (bytes < targetBytes) {
    if (hugeDone < huge && bytes >= ((hugeDone + 0.25) * targetBytes) / huge) {
      const rollout = generateDeepRollout({ targetTokens: hugeTokens, seed: seed * 1000 + hugeDone });
      rollout.rollout_id = `huge-${hugeDone}`;
      await emit(rollout);
      hugeDone++;
      continue;
    }
    for (const rollout of generateSmallRollouts(200, seed * 100_000 + batch++, { arrays: "typed" }))
      await emit(rollout);
  }
  await new Promise<void>((resolve, reject) => out.end((error?: Error | null) => (error ? reject(error) : resolve())));
  const meta: JsonlInput = { path, bytes, tokens, rollouts, huge: hugeDone };
  writeFileSync(metaPath, JSON.stringify(meta));
  return meta;
}

/**
 * The mix of the end-to-end benches (bench/columnar.ts, versus.ts, floor.ts): small rollouts and
 * two deep ones of ~90 MB, ~300 MB in all, scaled with the big file's `megabytes` (1024: as measured).
 */
export function makeMixJsonl(megabytes: number, log?: (s: string) => void): Promise<JsonlInput> {
  return makeJsonl({
    targetBytes: Math.round((megabytes * 2 ** 20 * 296) / 1024),
    huge: 2,
    hugeTokens: Math.round((13_500_000 * megabytes) / 1024),
    log,
  });
}
