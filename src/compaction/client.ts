// Model client over fetch. Each endpoint has its own body type and its own builder that names
// every key it sets; the plain builder has no way to add `required_prefix_token_ids`, and the
// sender refuses any key outside its endpoint's list before anything goes on the wire.
import { CompactionError, ModelHttpError } from "./errors.js";
import { isTokenId } from "./token-rules.js";
import {
  DEFAULT_MAX_RESPONSE_BYTES,
  DEFAULT_TIMEOUT_MS,
  checkHttpOptions,
  parseAnswer,
  postJson,
  type FetchLike,
} from "./http.js";
export type { FetchLike } from "./http.js";
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
  /** Other Responses create params (a Gym run body's `responses_create_params`), sent as given after the keys above. */
  params?: Readonly<Record<string, unknown>>;
}

/** The body a plain agent sends to `POST /v1/responses`: only keys that have a value. */
export function plainBody(parts: RequestParts): PlainResponsesBody {
  const body: PlainResponsesBody = { model: parts.model, input: parts.input };
  if (parts.instructions !== undefined) body.instructions = parts.instructions;
  if (parts.tools !== undefined && parts.tools.length > 0) body.tools = parts.tools;
  if (parts.maxOutputTokens !== undefined) body.max_output_tokens = parts.maxOutputTokens;
  if (parts.temperature !== undefined) body.temperature = parts.temperature;
  for (const [key, value] of Object.entries(parts.params ?? {}))
    if (!(key in body) && value !== undefined) body[key] = value;
  return body;
}

/** The body of `POST /v1/responses/context-compaction`; the prefix key is present only with a prefix. */
export function compactionBody(parts: RequestParts, requiredPrefix: readonly number[] | null): CompactionResponsesBody {
  const body: CompactionResponsesBody = plainBody(parts);
  if (requiredPrefix !== null) body.required_prefix_token_ids = [...requiredPrefix];
  return body;
}

/** The body of the `/tokenize` preflight for a request: Gym's adapter takes the same body as the generation. */
export function tokenizeBody(parts: RequestParts, requiredPrefix: readonly number[] | null): TokenizeBody {
  return compactionBody(parts, requiredPrefix);
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
    if (!allowed.includes(key))
      throw new CompactionError(`model client: key "${key}" is not allowed in a ${ENDPOINT_PATHS[endpoint]} body`);
    if (value === null || value === undefined)
      throw new CompactionError(`model client: key "${key}" is ${value} in a ${ENDPOINT_PATHS[endpoint]} body`);
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
  /**
   * Sends the call. `cookies`, when given, is the episode's cookie jar: sent with the request and
   * updated from the answer's Set-Cookie, so a model server's session cookie travels between the
   * calls of an episode (as with Gym's client) and never between episodes.
   */
  respond(call: ModelCall, cookies?: Map<string, string>): Promise<ResponsesResponse>;
  /** Prompt token count the server would build for this request (the `/tokenize` preflight). */
  countTokens(body: TokenizeBody, cookies?: Map<string, string>): Promise<number>;
}

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
   * Bytes an answer may have (default 64 MiB). A longer one is aborted as it arrives: a
   * ResponseTooLargeError, not retried.
   */
  maxResponseBytes?: number;
  /** Follow HTTP redirects (default false: a 3xx answer is a ModelHttpError naming its Location). */
  followRedirects?: boolean;
  /**
   * The token the model's chat template repeats for each image (Qwen2-VL's `<|image_pad|>`, the
   * test bed's `server.imagePlaceholderToken`). With it the rollout says where each image stands
   * in each prompt, so callforest never links a call under an image it did not see; without it
   * the rollout gives no media and links by tokens alone.
   */
  imagePlaceholderToken?: number;
}

/**
 * The prompt length in a `/tokenize` answer: Gym's adapter answers `{tokens}`, vLLM answers
 * `{count, max_model_len, tokens}` (its count must then be the tokens' length).
 */
export function tokenCountOf(url: string, answer: unknown): number {
  const refuse = (why: string) =>
    new ModelHttpError(`POST ${url}: ${why}, expected {tokens} or {count, max_model_len, tokens}`, 200, false);
  if (typeof answer !== "object" || answer === null || Array.isArray(answer))
    throw refuse(`the answer is ${JSON.stringify(answer)?.slice(0, 80)}`);
  const { tokens, count } = answer as { tokens?: unknown; count?: unknown };
  if (!Array.isArray(tokens) || !tokens.every(isTokenId))
    throw refuse(`the answer's tokens is ${JSON.stringify(tokens)?.slice(0, 80) ?? "missing"}`);
  if (count !== undefined && count !== tokens.length)
    throw refuse(`the answer's count ${JSON.stringify(count)} is not its ${tokens.length} tokens`);
  return tokens.length;
}

export function createModelClient(options: ModelClientOptions): ModelClient {
  const root = options.baseUrl.replace(/\/+$/, "");
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  try {
    checkHttpOptions("model client", timeoutMs, maxResponseBytes);
  } catch (error) {
    throw new CompactionError((error as Error).message);
  }
  const placeholder = options.imagePlaceholderToken;
  if (placeholder !== undefined && !isTokenId(placeholder)) {
    throw new CompactionError(
      `model client: imagePlaceholderToken must be a token id (an integer in [0, 2^31-1]), got ${placeholder}`,
    );
  }
  const http = {
    fetch: options.fetch ?? (globalThis.fetch as unknown as FetchLike),
    headers: options.headers,
    timeoutMs,
    maxResponseBytes,
    followRedirects: options.followRedirects === true,
  };
  async function post(
    endpoint: keyof typeof ALLOWED_KEYS,
    body: object,
    cookies: Map<string, string> | undefined,
  ): Promise<unknown> {
    assertBodyKeys(endpoint, body);
    const url = root + ENDPOINT_PATHS[endpoint];
    const extra: Record<string, string> = cookies?.size
      ? { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join("; ") }
      : {};
    const answer = await postJson(url, body, http, ModelHttpError, extra);
    if (cookies)
      for (const c of answer.cookies) {
        const at = c.indexOf("=");
        cookies.set(c.slice(0, at), c.slice(at + 1));
      }
    return parseAnswer(url, answer, ModelHttpError);
  }
  return {
    model: options.model,
    ...(placeholder !== undefined ? { imagePlaceholderToken: placeholder } : {}),
    async respond(call, cookies) {
      return (await post(call.endpoint, call.body, cookies)) as ResponsesResponse;
    },
    async countTokens(body, cookies) {
      return tokenCountOf(root + ENDPOINT_PATHS.tokenize, await post("tokenize", body, cookies));
    },
  };
}
