// Errors of the compaction runtime. Each names what failed and where (call id, field, counts).

/** Bad configuration or misuse of the runtime (a policy knob out of range, an unknown tool). */
export class CompactionError extends Error {
  override readonly name = "CompactionError";
}

/** Generation evidence that cannot be trusted: missing token ids, a logprob count mismatch, a bad record. */
export class EvidenceError extends Error {
  override readonly name = "EvidenceError";
}

/** The server's observed prompt does not start with the exact prefix the session required. */
export class PrefixMismatchError extends Error {
  override readonly name = "PrefixMismatchError";
  constructor(
    message: string,
    readonly requiredLength: number,
    readonly observedLength: number,
  ) {
    super(message);
  }
}

/** A model-server HTTP failure. `retryable` is true for transport errors and 5xx answers. */
export class ModelHttpError extends Error {
  override readonly name = "ModelHttpError";
  constructor(
    message: string,
    readonly status: number,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}
