// A Gym resources server (§4.6 of the Gym formats reference): `/seed_session` opens the episode,
// each tool is `POST /<name>`, `/verify` scores the episode, `/aggregate_metrics` a batch. One
// session keeps the server's cookies from the seed on, as Gym's agent does.
import { CompactionError, ResourcesServerError } from "./errors.js";
import type { Environment, Observation, ObservationImage } from "./environment.js";
import {
  DEFAULT_MAX_RESPONSE_BYTES,
  DEFAULT_TIMEOUT_MS,
  checkHttpOptions,
  parseAnswer,
  postJson,
  type FetchLike,
  type HttpOptions,
} from "./http.js";
import { dataUrlBytes } from "./media.js";
import type { FunctionTool } from "./responses.js";
import { taskInputItems } from "./task-input.js";

/** A Gym run body: `responses_create_params` (the request: input, tools, …) plus the task's own fields. */
export interface GymRunBody {
  responses_create_params: {
    input: string | unknown[];
    tools?: FunctionTool[];
    instructions?: string;
    [param: string]: unknown;
  };
  [field: string]: unknown;
}

/** What `/verify` answers: the request's fields plus `reward` (and anything the environment adds). */
export interface VerifyResponse {
  reward: number;
  [field: string]: unknown;
}

/** What `/aggregate_metrics` answers (Gym's AggregateMetrics). */
export interface AggregateMetrics {
  group_level_metrics: Record<string, unknown>[];
  agent_metrics: Record<string, unknown>;
  key_metrics: Record<string, unknown>;
}

export interface ResourcesServerOptions {
  /** Server root, e.g. `http://127.0.0.1:8001`. */
  baseUrl: string;
  fetch?: FetchLike;
  headers?: Record<string, string>;
  /** Milliseconds a request may take (default 600,000). */
  timeoutMs?: number;
  /** Bytes an answer may have (default 64 MiB). */
  maxResponseBytes?: number;
  followRedirects?: boolean;
}

/** One episode's exchanges with the server: the cookies `/seed_session` set travel with every later request. */
export interface ResourcesSession {
  seed(runBody: GymRunBody): Promise<unknown>;
  /** Runs a tool; its answer's text is the observation, whatever the status (Gym: a tool's error is a valid output). */
  callTool(name: string, args: unknown): Promise<string>;
  /**
   * Scores the episode. `modelCookies` (the model server's jar of the episode) go with the
   * session's: Gym's agent sends `/verify` the cookies its `/v1/responses` answer set, the
   * resources server's and then the model server's, so a model cookie wins a shared name.
   */
  verify(body: Record<string, unknown>, modelCookies?: ReadonlyMap<string, string>): Promise<VerifyResponse>;
}

export interface ResourcesServer {
  readonly baseUrl: string;
  session(): ResourcesSession;
  /** Gym's `/aggregate_metrics`; rows of skipped verification give Gym's empty AggregateMetrics. */
  aggregateMetrics(verifyResponses: readonly Record<string, unknown>[]): Promise<AggregateMetrics>;
}

const TOOL_NAME = /^[A-Za-z0-9_-]+$/;

export function createResourcesServer(options: ResourcesServerOptions): ResourcesServer {
  const root = options.baseUrl.replace(/\/+$/, "");
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  try {
    checkHttpOptions("resources server", timeoutMs, maxResponseBytes);
  } catch (error) {
    throw new CompactionError((error as Error).message);
  }
  const http: HttpOptions = {
    fetch: options.fetch ?? (globalThis.fetch as unknown as FetchLike),
    headers: options.headers,
    timeoutMs,
    maxResponseBytes,
    followRedirects: options.followRedirects === true,
  };
  const post = (path: string, body: unknown, cookies: Map<string, string>, okStatus?: (status: number) => boolean) => {
    const extra: Record<string, string> = cookies.size
      ? { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join("; ") }
      : {};
    return postJson(root + path, body, http, ResourcesServerError, extra, okStatus).then((answer) => {
      for (const c of answer.cookies) {
        const at = c.indexOf("=");
        cookies.set(c.slice(0, at), c.slice(at + 1));
      }
      return answer;
    });
  };
  return {
    baseUrl: root,
    session() {
      const cookies = new Map<string, string>();
      return {
        async seed(runBody) {
          const url = `${root}/seed_session`;
          return parseAnswer(url, await post("/seed_session", runBody, cookies), ResourcesServerError);
        },
        async callTool(name, args) {
          if (!TOOL_NAME.test(name))
            throw new CompactionError(`resources server: tool name ${JSON.stringify(name)} is not a path segment`);
          // 4xx answers are the tool's own errors, shown to the model; 5xx and lost connections are retried.
          return (await post(`/${name}`, args, cookies, (status) => status < 500)).text;
        },
        async verify(body, modelCookies) {
          const url = `${root}/verify`;
          const jar = new Map([...cookies, ...(modelCookies ?? [])]);
          const answer = parseAnswer(url, await post("/verify", body, jar), ResourcesServerError) as Record<
            string,
            unknown
          > | null;
          if (typeof answer !== "object" || answer === null || Array.isArray(answer))
            throw new ResourcesServerError(`POST ${url}: the answer is not an object`, 200, false);
          if (typeof answer.reward !== "number" || !Number.isFinite(answer.reward)) {
            throw new ResourcesServerError(
              `POST ${url}: the answer's reward is ${JSON.stringify(answer.reward) ?? "missing"}, ` +
                `expected a finite number`,
              200,
              false,
            );
          }
          return answer as VerifyResponse;
        },
      };
    },
    async aggregateMetrics(verifyResponses) {
      // Gym's agent with skip_verification answers an empty AggregateMetrics (with a warning)
      // instead of asking the resources server to aggregate rewards nothing verified.
      if (verifyResponses.length > 0 && verifyResponses.every((r) => r.verification_skipped === true))
        return { group_level_metrics: [], agent_metrics: {}, key_metrics: {} };
      const url = `${root}/aggregate_metrics`;
      const answer = parseAnswer(
        url,
        await post("/aggregate_metrics", { verify_responses: verifyResponses.map(metricsRow) }, new Map()),
        ResourcesServerError,
      ) as Record<string, unknown> | null;
      const bad = (field: string) =>
        new ResourcesServerError(
          `POST ${url}: the answer's ${field} is missing or of the wrong type (expected Gym's AggregateMetrics)`,
          200,
          false,
        );
      if (typeof answer !== "object" || answer === null) throw bad("body");
      if (!Array.isArray(answer.group_level_metrics)) throw bad("group_level_metrics");
      for (const key of ["agent_metrics", "key_metrics"]) {
        if (typeof answer[key] !== "object" || answer[key] === null || Array.isArray(answer[key])) throw bad(key);
      }
      return answer as unknown as AggregateMetrics;
    },
  };
}

/** A verify response as Gym's collector sends it to `/aggregate_metrics`: payloads stripped, the usage kept. */
export function metricsRow(row: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const {
    response,
    responses_create_params: _params,
    ng_agent_observations: _o,
    ng_model_call_capture: _c,
    ng_trajectory: _t,
    ...rest
  } = row;
  const usage = (response as { usage?: unknown } | null | undefined)?.usage;
  return usage === undefined || usage === null ? rest : { ...rest, response: { usage } };
}

function imageOf(where: string, url: unknown): ObservationImage {
  const image = typeof url === "string" ? dataUrlBytes(url) : null;
  if (!image)
    throw new ResourcesServerError(
      `${where}: ${JSON.stringify(url)?.slice(0, 60)} is not a base64 PNG, JPEG or WebP data URL`,
      200,
      false,
    );
  return image;
}

/**
 * A tool answer as an observation: the JSON `{"output": text, "images": [data URLs], "done": bool}`
 * (the test bed's grid world answers so), or any other text as it is (Gym's default).
 */
export function jsonObservation(text: string, tool: string): Observation {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { text };
  }
  const v = value as { output?: unknown; images?: unknown; done?: unknown } | null;
  if (!v || typeof v !== "object" || Array.isArray(v) || typeof v.output !== "string") return { text };
  const images =
    v.images === undefined
      ? []
      : Array.isArray(v.images)
        ? v.images.map((u, i) => imageOf(`tool ${tool}: images[${i}]`, u))
        : null;
  if (images === null) throw new ResourcesServerError(`tool ${tool}: images must be an array of data URLs`, 200, false);
  return { text: v.output, ...(images.length ? { images } : {}), ...(v.done === true ? { done: true } : {}) };
}

/**
 * The episode's environment through a resources server: the run body's input (every item) is the
 * initial context,
 * `/seed_session` is called first, and each function call goes to `POST /<name>`. Its reward is
 * not used: `/verify` scores the episode.
 */
export function resourcesEnvironment(
  session: ResourcesSession,
  runBody: GymRunBody,
  observe: (text: string, tool: string) => Observation | Promise<Observation> = (text) => ({ text }),
): Environment {
  const params = runBody?.responses_create_params;
  if (!params || typeof params !== "object")
    throw new CompactionError("resources run body: responses_create_params is missing");
  return {
    instructions: typeof params.instructions === "string" ? params.instructions : undefined,
    tools: Array.isArray(params.tools) ? params.tools : [],
    start() {
      throw new CompactionError("resources environment: the task is its startContext()");
    },
    async startContext() {
      // Checked before the seed: a body Gym's agent would refuse opens no session.
      const context = taskInputItems(params.input, "resources run body: responses_create_params.input");
      await session.seed(runBody);
      return { context };
    },
    async call(name, args) {
      return observe(await session.callTool(name, args), name);
    },
    reward: () => 0,
  };
}
