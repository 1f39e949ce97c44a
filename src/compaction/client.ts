// Model client over fetch. Each endpoint has its own body type and its own builder that names
// every key it sets; the plain builder has no way to add `required_prefix_token_ids`, and the
// sender refuses any key outside its endpoint's list before anything goes on the wire.
import { CompactionError, ModelHttpError } from "./errors.js";
import { isTokenId } from "./evidence.js";
import {
  COMPACTION_BODY_KEYS,
  TOKENIZE_BODY_KEYS,
  PLAIN_BODY_KEYS,
  type CompactionResponsesBody,
  type FunctionTool,
  type InputItem,
  type PlainResponsesBody,
  type ResponsesResponse,
  type TokenizeBody,
} from "./responses.js";

export interface RequestParts {
  model: string;
  input: InputItem[];
  instructions?: string;
  tools?: FunctionTool[];
  maxOutputTokens?: number;
  temperature?: number;
}

/** The body a plain agent sends to `POST /v1/responses`: only keys that have a value. */
export function plainBody(parts: RequestParts): PlainResponsesBody {
  const body: PlainResponsesBody = { model: parts.model, input: parts.input };
  if (parts.instructions !== undefined) body.instructions = parts.instructions;
  if (parts.tools !== undefined && parts.tools.length > 0) body.tools = parts.tools;
  if (parts.maxOutputTokens !== undefined) body.max_output_tokens = parts.maxOutputTokens;
  if (parts.temperature !== undefined) body.temperature = parts.temperature;
  return body;
}

/** The body of `POST /v1/responses/context-compaction`; the prefix key is present only with a prefix. */
export function compactionBody(parts: RequestParts, requiredPrefix: readonly number[] | null): CompactionResponsesBody {
  const body: CompactionResponsesBody = plainBody(parts);
  if (requiredPrefix !== null) body.required_prefix_token_ids = [...requiredPrefix];
  return body;
}

/** The body of the `/tokenize` preflight for a request (same input, same prefix). */
export function tokenizeBody(parts: RequestParts, requiredPrefix: readonly number[] | null): TokenizeBody {
  const body: TokenizeBody = { model: parts.model, input: parts.input };
  if (parts.instructions !== undefined) body.instructions = parts.instructions;
  if (parts.tools !== undefined && parts.tools.length > 0) body.tools = parts.tools;
  if (requiredPrefix !== null) body.required_prefix_token_ids = [...requiredPrefix];
  return body;
}

export type ModelCall =
  | { endpoint: "responses"; body: PlainResponsesBody }
  | { endpoint: "context_compaction"; body: CompactionResponsesBody };

export const ENDPOINT_PATHS = {
  responses: "/v1/responses",
  context_compaction: "/v1/responses/context-compaction",
  tokenize: "/tokenize",
} as const;

const ALLOWED_KEYS: Record<ModelCall["endpoint"] | "tokenize", readonly string[]> = {
  responses: PLAIN_BODY_KEYS,
  context_compaction: COMPACTION_BODY_KEYS,
  tokenize: TOKENIZE_BODY_KEYS,
};

/** Throws if the body carries a key its endpoint does not accept, or any key set to null/undefined. */
export function assertBodyKeys(endpoint: keyof typeof ALLOWED_KEYS, body: object): void {
  const allowed = ALLOWED_KEYS[endpoint];
  for (const [key, value] of Object.entries(body)) {
    if (!allowed.includes(key)) throw new CompactionError(`model client: key "${key}" is not allowed in a ${ENDPOINT_PATHS[endpoint]} body`);
    if (value === null || value === undefined) throw new CompactionError(`model client: key "${key}" is ${value} in a ${ENDPOINT_PATHS[endpoint]} body`);
    // JSON.stringify would send NaN or Infinity as null: the same silent default, by another
    // road — at any depth (a tool schema's `maximum: Infinity` included).
    const bad = nonFinite(value);
    if (bad !== null) {
      const what = typeof value === "number" ? `is ${bad}` : `holds ${bad}`;
      throw new CompactionError(`model client: key "${key}" ${what} in a ${ENDPOINT_PATHS[endpoint]} body`);
    }
  }
}

/** The first NaN or ±Infinity in a JSON-like value (as text), or null. */
function nonFinite(value: unknown): string | null {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === "number" && !Number.isFinite(v)) return String(v);
    // One push per value: spreading a 100k-token prefix into push() would overflow the stack.
    if (typeof v === "object" && v !== null) for (const x of Object.values(v)) stack.push(x);
  }
  return null;
}

export interface ModelClient {
  readonly model: string;
  /** See ModelClientOptions.imagePlaceholderToken. */
  readonly imagePlaceholderToken?: number;
  respond(call: ModelCall): Promise<ResponsesResponse>;
  /** Prompt token count the server would build for this request (the `/tokenize` preflight). */
  countTokens(body: TokenizeBody): Promise<number>;
}

/**
 * The part of `fetch` the client uses; global `fetch` is one. Declared here so the package's types
 * need neither the DOM's nor Node's globals. The client also passes `signal`, an AbortSignal for
 * its deadline (`timeoutMs`), left out of the type for the same reason: a fetch of your own should
 * honour `init.signal` (the client stops waiting at the deadline either way, but only the fetch
 * can close its connection).
 */
export type FetchLike = (
  url: string,
  init: { method: string; headers: Record<string, string>; body: string },
) => Promise<{ ok: boolean; status: number; text(): Promise<string> }>;

export interface ModelClientOptions {
  /** Server root, e.g. `http://127.0.0.1:8000` (no trailing `/v1`). */
  baseUrl: string;
  model: string;
  fetch?: FetchLike;
  headers?: Record<string, string>;
  /**
   * Milliseconds a request may take, answer included (default 600,000: ten minutes). Past it the
   * request is aborted and fails as a retryable ModelHttpError (status 0), like a lost connection.
   */
  timeoutMs?: number;
  /**
   * The token the model's chat template repeats for each image (Qwen2-VL's `<|image_pad|>`, the
   * test bed's `server.imagePlaceholderToken`). With it the rollout says where each image stands
   * in each prompt, so callforest never links a call under an image it did not see; without it
   * the rollout gives no media and links by tokens alone.
   */
  imagePlaceholderToken?: number;
}

const DEFAULT_TIMEOUT_MS = 600_000;

/**
 * An error's message with its cause's (Node's fetch says only "fetch failed"; the cause says why:
 * an error with a code, or, for a name with several addresses, an AggregateError of one each).
 */
function failureText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const why = causeText(error.cause);
  return why === "" || error.message.includes(why) ? error.message : `${error.message}: ${why}`;
}

function causeText(cause: unknown): string {
  if (!(cause instanceof Error)) return "";
  if (cause instanceof AggregateError && cause.errors.length > 0) return [...new Set(cause.errors.map(causeText))].filter((t) => t !== "").join("; ");
  return cause.message !== "" ? cause.message : String((cause as { code?: unknown }).code ?? "");
}

/** `work`, unless `signal` aborts first: the deadline holds even for a fetch that ignores its signal. */
function beforeAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    void work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

export function createModelClient(options: ModelClientOptions): ModelClient {
  const doFetch: FetchLike = options.fetch ?? globalThis.fetch;
  const root = options.baseUrl.replace(/\/+$/, "");
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  // What a timer can wait (AbortSignal.timeout turns more into 1 ms, and refuses a fraction).
  if (!(Number.isInteger(timeoutMs) && timeoutMs > 0 && timeoutMs <= 2 ** 31 - 1)) {
    throw new CompactionError(`model client: timeoutMs must be a whole number of milliseconds from 1 to 2^31-1, got ${options.timeoutMs}`);
  }
  const placeholder = options.imagePlaceholderToken;
  if (placeholder !== undefined && !isTokenId(placeholder)) {
    throw new CompactionError(`model client: imagePlaceholderToken must be a token id (an integer in [0, 2^31-1]), got ${placeholder}`);
  }
  async function post(endpoint: keyof typeof ALLOWED_KEYS, body: object): Promise<unknown> {
    assertBodyKeys(endpoint, body);
    const url = root + ENDPOINT_PATHS[endpoint];
    const lost = (error: unknown) => new ModelHttpError(`POST ${url}: ${failureText(error)}`, 0, true);
    // One deadline for the whole exchange: a server that sends headers and then stalls is as
    // lost as one that never answers.
    const signal = AbortSignal.timeout(timeoutMs);
    let response: Awaited<ReturnType<FetchLike>>;
    let text: string;
    try {
      const init = { method: "POST", headers: { "content-type": "application/json", ...options.headers }, body: JSON.stringify(body), signal };
      // (a connection cut mid-body is a lost connection too)
      [response, text] = await beforeAbort(
        (async () => {
          const answer = await doFetch(url, init);
          return [answer, await answer.text()] as const;
        })(),
        signal,
      );
    } catch (error) {
      throw lost(error);
    }
    if (!response.ok) {
      throw new ModelHttpError(`POST ${url}: HTTP ${response.status}: ${text.slice(0, 300)}`, response.status, response.status >= 500);
    }
    try {
      return JSON.parse(text);
    } catch {
      throw new ModelHttpError(`POST ${url}: response is not JSON: ${text.slice(0, 100)}`, response.status, false);
    }
  }
  return {
    model: options.model,
    ...(placeholder !== undefined ? { imagePlaceholderToken: placeholder } : {}),
    async respond(call) {
      return (await post(call.endpoint, call.body)) as ResponsesResponse;
    },
    async countTokens(body) {
      const answer = (await post("tokenize", body)) as { count?: unknown } | null;
      const count = typeof answer === "object" && answer !== null ? answer.count : undefined;
      if (typeof count !== "number" || !Number.isSafeInteger(count) || count < 0) {
        throw new ModelHttpError(`POST ${root}/tokenize: the answer's count is ${JSON.stringify(count)}, expected a token count`, 200, false);
      }
      return count;
    },
  };
}
