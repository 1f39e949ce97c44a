// Errors of the compaction runtime. Each names what failed and where (call id, field, counts).

/** Bad configuration or misuse of the runtime (a policy knob out of range, an unknown tool). */
export class CompactionError extends Error {
  override readonly name: string = "CompactionError";
}

/** A `context_history` block (Gym's agent configuration) that Gym would refuse; `path` names the key. */
export class ConfigError extends CompactionError {
  override readonly name = "ConfigError";
  constructor(
    readonly path: string,
    what: string,
  ) {
    super(`context_history config: ${path}: ${what}`);
  }
}

/**
 * A context guard refused a model call that no recompaction could admit. As in Gym's agent the
 * sample fails (the partial run is on the error, see partialRunOf); `onGuardReject: "end_episode"`
 * keeps the episode instead, marked partial.
 */
export class GuardRejectedError extends CompactionError {
  override readonly name = "GuardRejectedError";
  constructor(
    readonly callId: string,
    readonly step: number,
    readonly guards: readonly string[],
  ) {
    super(
      `context guard rejected model call ${callId} at complete action boundary: step=${step} guards=${guards.join(",")}`,
    );
  }
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

/** An HTTP exchange that failed. `retryable` is true for transport errors and 5xx answers. */
export class HttpError extends Error {
  override readonly name: string = "HttpError";
  constructor(
    message: string,
    readonly status: number,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

/** A model-server HTTP failure (`/v1/responses`, `/v1/responses/context-compaction`, `/tokenize`). */
export class ModelHttpError extends HttpError {
  override readonly name: string = "ModelHttpError";
}

/**
 * A resources-server failure (`/seed_session`, a tool, `/verify`, `/aggregate_metrics`), or an
 * answer of the wrong shape.
 */
export class ResourcesServerError extends HttpError {
  override readonly name = "ResourcesServerError";
}

/** An answer longer than the client's `maxResponseBytes`: the body was aborted, and it is not retried. */
export class ResponseTooLargeError extends ModelHttpError {
  override readonly name = "ResponseTooLargeError";
  constructor(
    message: string,
    status: number,
    readonly limit: number,
  ) {
    super(message, status, false);
  }
}
