// One JSON POST over fetch, bounded: a deadline for the whole exchange, a size limit on the answer
// (the body is aborted when it passes it), and no redirects unless asked. Shared by the model
// client and the resources-server client, each with its own error class.
import { type HttpError, ResponseTooLargeError } from "./errors.js";

/** A body stream as fetch gives it (only what the reader uses). */
export interface BodyStreamLike {
  getReader(): { read(): Promise<{ done: boolean; value?: Uint8Array }>; cancel(reason?: unknown): Promise<void> };
}

/** The part of a fetch Response the clients read; `headers` and `body` are optional for a fetch of one's own. */
export interface FetchResponseLike {
  ok: boolean;
  status: number;
  text(): Promise<string>;
  headers?: { get(name: string): string | null; getSetCookie?(): string[] };
  body?: BodyStreamLike | null;
}

/**
 * The part of `fetch` the clients use; global `fetch` is one. Declared here so the package's types
 * need neither the DOM's nor Node's globals. The clients also pass `signal`, an AbortSignal for
 * their deadline and size limit, left out of the type for the same reason: a fetch of your own
 * should honour `init.signal` (the client stops waiting at the deadline either way, but only the
 * fetch can close its connection).
 */
export type FetchLike = (
  url: string,
  init: { method: string; headers: Record<string, string>; body: string; redirect?: "manual" | "follow" },
) => Promise<FetchResponseLike>;

export interface HttpOptions {
  fetch: FetchLike;
  headers?: Record<string, string>;
  timeoutMs: number;
  maxResponseBytes: number;
  followRedirects: boolean;
}

export interface HttpAnswer {
  status: number;
  text: string;
  /** `name=value` of each Set-Cookie the answer carried. */
  cookies: string[];
}

export const DEFAULT_TIMEOUT_MS = 600_000;
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/** Checks the options every client shares; `who` names the client in the message. */
export function checkHttpOptions(who: string, timeoutMs: number, maxResponseBytes: number): void {
  // What a timer can wait (AbortSignal.timeout turns more into 1 ms, and refuses a fraction).
  if (!(Number.isInteger(timeoutMs) && timeoutMs > 0 && timeoutMs <= 2 ** 31 - 1)) {
    throw new RangeError(`${who}: timeoutMs must be a whole number of milliseconds from 1 to 2^31-1, got ${timeoutMs}`);
  }
  if (!(Number.isSafeInteger(maxResponseBytes) && maxResponseBytes > 0)) {
    throw new RangeError(`${who}: maxResponseBytes must be a positive whole number of bytes, got ${maxResponseBytes}`);
  }
}

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
  if (cause instanceof AggregateError && cause.errors.length > 0)
    return [...new Set(cause.errors.map(causeText))].filter((t) => t !== "").join("; ");
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

function tooLarge(url: string, status: number, limit: number, seen: string): ResponseTooLargeError {
  return new ResponseTooLargeError(
    `POST ${url}: the answer is larger than maxResponseBytes (${limit} bytes; ${seen})`,
    status,
    limit,
  );
}

/** The body as text, read chunk by chunk; stops (the caller aborts the request) as soon as it passes `limit` bytes. */
async function readBounded(url: string, answer: FetchResponseLike, limit: number): Promise<string> {
  const declared = Number(answer.headers?.get("content-length") ?? Number.NaN);
  if (declared > limit) throw tooLarge(url, answer.status, limit, `content-length ${declared}`);
  const body = answer.body;
  if (!body || typeof body.getReader !== "function") {
    // A fetch without a body stream: its text is already in memory, so only the size can be checked.
    const text = await answer.text();
    if (text.length > limit || new TextEncoder().encode(text).length > limit)
      throw tooLarge(url, answer.status, limit, "read whole");
    return text;
  }
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (!value) continue;
    total += value.byteLength;
    if (total > limit) {
      void reader.cancel().catch(() => {});
      throw tooLarge(url, answer.status, limit, `aborted after ${total} bytes`);
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes);
}

function setCookies(answer: FetchResponseLike): string[] {
  const headers = answer.headers;
  if (!headers) return [];
  const all =
    typeof headers.getSetCookie === "function"
      ? headers.getSetCookie()
      : (headers.get("set-cookie") ?? "").split(/,(?=\s*[^;,=\s]+=)/);
  return all.map((c) => c.split(";")[0].trim()).filter((c) => c.includes("="));
}

type ErrorClass = new (message: string, status: number, retryable: boolean) => HttpError;

/**
 * POSTs `body` as JSON and returns the answer's status and text. Transport failures, the deadline
 * and 5xx answers are retryable `errorClass` errors; 3xx (unless following redirects) and other
 * answers outside `okStatus` (default 2xx) are not; a too-large answer is a ResponseTooLargeError.
 */
export async function postJson(
  url: string,
  body: unknown,
  options: HttpOptions,
  errorClass: ErrorClass,
  extraHeaders: Record<string, string> = {},
  okStatus: (status: number) => boolean = (status) => status >= 200 && status < 300,
): Promise<HttpAnswer> {
  const deadline = AbortSignal.timeout(options.timeoutMs);
  const own = new AbortController();
  const signal = AbortSignal.any([deadline, own.signal]);
  const init = {
    method: "POST",
    headers: { "content-type": "application/json", ...options.headers, ...extraHeaders },
    body: JSON.stringify(body),
    redirect: options.followRedirects ? ("follow" as const) : ("manual" as const),
    signal,
  };
  let answer: FetchResponseLike;
  let text: string;
  try {
    // One deadline for the whole exchange: a server that sends headers and then stalls is as
    // lost as one that never answers (and a connection cut mid-body is a lost connection too).
    [answer, text] = await beforeAbort(
      (async () => {
        const a = await options.fetch(url, init);
        if (a.status >= 300 && a.status < 400 && !options.followRedirects) return [a, ""] as const;
        return [a, await readBounded(url, a, options.maxResponseBytes)] as const;
      })(),
      signal,
    );
  } catch (error) {
    if (error instanceof ResponseTooLargeError) {
      own.abort(error); // closes the connection: the rest of the body is never downloaded
      throw error;
    }
    throw new errorClass(`POST ${url}: ${failureText(error)}`, 0, true);
  }
  if (answer.status >= 300 && answer.status < 400 && !options.followRedirects) {
    const location = answer.headers?.get("location") ?? "?";
    throw new errorClass(
      `POST ${url}: HTTP ${answer.status} redirect to ${location} refused (followRedirects is off)`,
      answer.status,
      false,
    );
  }
  if (!okStatus(answer.status))
    throw new errorClass(
      `POST ${url}: HTTP ${answer.status}: ${text.slice(0, 300)}`,
      answer.status,
      answer.status >= 500,
    );
  return { status: answer.status, text, cookies: setCookies(answer) };
}

/** The answer's JSON; a non-JSON answer is a non-retryable `errorClass` error. */
export function parseAnswer(url: string, answer: HttpAnswer, errorClass: ErrorClass): unknown {
  try {
    return JSON.parse(answer.text);
  } catch {
    throw new errorClass(`POST ${url}: response is not JSON: ${answer.text.slice(0, 100)}`, answer.status, false);
  }
}
