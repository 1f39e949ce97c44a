// The builder: a rollout assembled in place. The caller asks for views over the core's memory
// (linear memory on the WASM backend), writes one call's arrays straight into them, and commits
// the call: a pipeline that holds typed arrays pays one copy, a byte parser none.
import { Rejection, callName, describeValue } from "./rejection.js";
import { callIdentityProblem, checkHeader, checkPlanOptions, rolloutIdOf } from "./validate.js";
import { RolloutAssembler, isOutOfMemory, rejectedPlan, tooLargeRejection } from "./assembler.js";
import type { CoreFactory } from "./core/types.js";
import type { AgentInput, Plan, PlanOptions } from "./types.js";

export interface BuilderHeader {
  rollout_id: string;
  reward: number;
  agents?: AgentInput[];
}

/** One call's arrays, to fill before commit(). Valid until the next stage(), commit() or finish(). */
export interface CallSlot {
  promptTokenIds: Int32Array;
  generationTokenIds: Int32Array;
  logprobs: Float32Array;
}

export interface CallMeta {
  id: string;
  agent?: string;
  kept?: boolean;
}

export interface RolloutBuilder {
  /** Views for the next call: prompt and generation token IDs, and the generation's logprobs. */
  stage(promptLength: number, generationLength: number): CallSlot;
  /** Checks and links the staged call. False once the rollout is rejected (later calls are ignored). */
  commit(meta: CallMeta): boolean;
  /** The plan (rows and report, or the rejection). Ends the builder. */
  finish(options?: PlanOptions): Plan;
}

/** Token positions are i32 in the cores. */
const MAX_CALL_TOKENS = 2 ** 31 - 1;

export function createBuilder(makeCore: CoreFactory, header: BuilderHeader, callsHint = 0): RolloutBuilder {
  const checked = checkHeader({ ...header, calls: [] });
  let calls = 0;
  let assembler: RolloutAssembler | null = null;
  let failure: Rejection | null = checked instanceof Rejection ? checked : null;
  let staged: [number, number] | null = null;
  let finished = false;
  if (!(checked instanceof Rejection)) {
    const core = makeCore();
    try {
      assembler = new RolloutAssembler(core, checked, { calls: callsHint, generated: 0, longestCall: 0 });
    } catch (error) {
      if (!isOutOfMemory(error)) throw error;
      core.release(false);
      failure = tooLargeRejection(error);
    }
  }

  /** Runs `work` on the live assembler; once the rollout failed, answers `fallback()` instead. */
  const guard = <T>(work: () => T, fallback: () => T): T => {
    if (failure || !assembler) return fallback();
    try {
      return work();
    } catch (error) {
      if (!isOutOfMemory(error)) throw error;
      assembler.abandon();
      failure = tooLargeRejection(error);
      return fallback();
    }
  };
  const open = (what: string) => {
    if (finished) throw new Error(`${what}() after finish(): this builder is done (its plan holds the core)`);
  };
  const scratch = (p: number, g: number): CallSlot => ({
    promptTokenIds: new Int32Array(p),
    generationTokenIds: new Int32Array(g),
    logprobs: new Float32Array(g),
  });

  return {
    stage(promptLength, generationLength) {
      open("stage");
      for (const [name, n] of [["promptLength", promptLength], ["generationLength", generationLength]] as const) {
        if (!Number.isInteger(n) || n < 0) throw new RangeError(`${name} must be a non-negative integer, got ${n}`);
      }
      if (promptLength + generationLength > MAX_CALL_TOKENS) {
        throw new RangeError(`a call holds at most 2^31-1 tokens, got ${promptLength} + ${generationLength}`);
      }
      staged = [promptLength, generationLength];
      // After a rejection the caller may still fill slots; give it scratch arrays to write into
      // (the core is left alone: the first problem stays the one reported).
      const scratchSlot = () => scratch(promptLength, generationLength);
      if (assembler?.rejected) return scratchSlot();
      return guard(() => {
        const views = assembler!.stage(promptLength, generationLength);
        return {
          promptTokenIds: views.tokens.subarray(0, promptLength),
          generationTokenIds: views.tokens.subarray(promptLength, promptLength + generationLength),
          logprobs: views.logprobs.subarray(0, generationLength),
        };
      }, scratchSlot);
    },
    commit(meta) {
      open("commit");
      if (!staged) throw new Error("commit() needs a stage() first");
      if (typeof meta !== "object" || meta === null) throw new TypeError(`commit() takes the call's { id, agent?, kept? }, got ${describeValue(meta)}`);
      const index = calls++;
      staged = null;
      return guard(() => {
        const problem = callIdentityProblem(meta.id, meta.agent, meta.kept);
        if (problem !== null) {
          assembler!.reject(new Rejection("invalid_rollout", `${callName(meta.id, index)}: ${problem}`));
          return false;
        }
        const agentName = meta.agent ?? "";
        const agent = assembler!.identify(meta.id, agentName);
        if (agent === null) return false;
        return assembler!.commit({ id: meta.id, agent: agentName, kept: meta.kept !== false }, agent);
      }, () => false);
    },
    finish(options = {}) {
      open("finish");
      options = checkPlanOptions(options, "finish()");
      finished = true;
      const agents = checked instanceof Rejection ? [] : checked.agents ?? [];
      if (failure || !assembler) return rejectedPlan(rolloutIdOf(header), calls, failure!, agents, options);
      return guard(() => assembler!.finish(calls, options), () => null) ?? rejectedPlan(header.rollout_id, calls, failure!, agents, options);
    },
  };
}
