// The builder: a rollout assembled in place. The caller asks for views over the core's memory
// (linear memory on the WASM backend), writes one call's arrays straight into them, and commits
// the call: a pipeline that holds typed arrays pays one copy, a byte parser none.
import { callName, describeValue } from "../messages.js";
import { Rejection } from "./rejection.js";
import { callIdentityProblem, checkHeader, checkPlanOptions, rolloutIdOf, type RolloutHeader } from "./validate.js";
import { RolloutAssembler, isOutOfMemory, planOfRejection, tooLargeRejection } from "./assembler.js";
import { MAX_CALL_TOKENS, type CoreFactory } from "../core/types.js";
import type { BuilderHeader, CallMeta, CallSlot, Plan, PlanOptions, RolloutBuilder } from "../types.js";

export function createBuilder(makeCore: CoreFactory, header: BuilderHeader, callsHint = 0): RolloutBuilder {
  // Three plain functions: they work detached (`const { stage } = builder`), and the state, the
  // core included, stays out of sight of JSON.stringify and console.log.
  const builder = new InPlaceBuilder(makeCore, header, callsHint);
  return {
    stage: (promptLength, generationLength) => builder.stage(promptLength, generationLength),
    commit: (meta) => builder.commit(meta),
    finish: (options) => builder.finish(options),
  };
}

class InPlaceBuilder implements RolloutBuilder {
  private readonly checked: RolloutHeader | Rejection;
  private assembler: RolloutAssembler | null = null;
  /** The rollout's first problem: a bad header, or a core out of memory. */
  private failure: Rejection | null = null;
  private calls = 0;
  private staged = false;
  private finished = false;

  constructor(
    makeCore: CoreFactory,
    private readonly header: BuilderHeader,
    callsHint: number,
  ) {
    this.checked = checkHeader({ ...header, calls: [] });
    if (this.checked instanceof Rejection) {
      this.failure = this.checked;
      return;
    }
    const core = makeCore();
    try {
      this.assembler = new RolloutAssembler(core, this.checked, { calls: callsHint, generated: 0, longestCall: 0 });
    } catch (error) {
      if (!isOutOfMemory(error)) throw error;
      core.release(false);
      this.failure = tooLargeRejection(error);
    }
  }

  stage(promptLength: number, generationLength: number): CallSlot {
    this.ensureOpen("stage");
    checkStageLengths(promptLength, generationLength);
    this.staged = true;
    // After a rejection the caller may still fill slots; give it scratch arrays to write into
    // (the core is left alone: the first problem stays the one reported).
    const scratchSlot = () => ({
      promptTokenIds: new Int32Array(promptLength),
      generationTokenIds: new Int32Array(generationLength),
      logprobs: new Float32Array(generationLength),
    });
    if (this.assembler?.rejected) return scratchSlot();
    return this.guard((assembler) => {
      const views = assembler.stage(promptLength, generationLength);
      return {
        promptTokenIds: views.tokens.subarray(0, promptLength),
        generationTokenIds: views.tokens.subarray(promptLength, promptLength + generationLength),
        logprobs: views.logprobs.subarray(0, generationLength),
      };
    }, scratchSlot);
  }

  commit(meta: CallMeta): boolean {
    this.ensureOpen("commit");
    if (!this.staged) throw new Error("commit() needs a stage() first");
    if (typeof meta !== "object" || meta === null)
      throw new TypeError(
        `commit() takes the call's { id, agent?, kept?, media?, routed_experts?, weight_version? }, got ${describeValue(meta)}`,
      );
    // Read once, before anything changes: a getter that throws leaves the builder as it was.
    const { id, agent, kept, media: mediaValue, routed_experts: expertsValue, weight_version: versionValue } = meta;
    const index = this.calls++;
    this.staged = false;
    return this.guard(
      (assembler) => {
        const problem = callIdentityProblem(id, agent, kept);
        if (problem !== null) {
          assembler.reject(new Rejection("invalid_rollout", `${callName(id, index)}: ${problem}`));
          return false;
        }
        const agentName = agent ?? "";
        const agentIndex = assembler.identify(id, agentName);
        if (agentIndex === null) return false;
        const extras = assembler.readExtras(
          mediaValue,
          expertsValue,
          versionValue,
          kept !== false,
          assembler.stagedPromptLength,
          assembler.stagedGenerationLength,
        );
        if (extras.problem !== null) {
          assembler.rejectAfterValues(id, extras.problem.code, extras.problem.detail);
          return false;
        }
        return assembler.commit(
          {
            id,
            agent: agentName,
            kept: kept !== false,
            media: extras.media,
            routedExperts: extras.routedExperts,
            weightVersion: extras.weightVersion,
          },
          agentIndex,
        );
      },
      () => false,
    );
  }

  finish(options: PlanOptions = {}): Plan {
    this.ensureOpen("finish");
    options = checkPlanOptions(options, "finish()");
    this.finished = true;
    const agents = this.checked instanceof Rejection ? [] : (this.checked.agents ?? []);
    const plan = this.guard(
      (assembler) => assembler.finish(this.calls, options),
      () => null,
    );
    return plan ?? planOfRejection(rolloutIdOf(this.header), this.calls, this.failure!, agents, options);
  }

  /** Runs `work` on the live assembler; once the rollout failed, answers `fallback()` instead. */
  private guard<T>(work: (assembler: RolloutAssembler) => T, fallback: () => T): T {
    if (this.failure || !this.assembler) return fallback();
    try {
      return work(this.assembler);
    } catch (error) {
      if (!isOutOfMemory(error)) throw error;
      this.assembler.abandon();
      this.failure = tooLargeRejection(error);
      return fallback();
    }
  }

  private ensureOpen(what: string): void {
    if (this.finished) throw new Error(`${what}() after finish(): this builder is done (its plan holds the core)`);
  }
}

function checkStageLengths(promptLength: number, generationLength: number): void {
  for (const [name, n] of [
    ["promptLength", promptLength],
    ["generationLength", generationLength],
  ] as const) {
    if (!Number.isInteger(n) || n < 0)
      throw new RangeError(`${name} must be a non-negative integer, got ${describeValue(n)}`);
  }
  if (promptLength + generationLength > MAX_CALL_TOKENS) {
    throw new RangeError(`a call holds at most 2^31-1 tokens, got ${promptLength} + ${generationLength}`);
  }
}
