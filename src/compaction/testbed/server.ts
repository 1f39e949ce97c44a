// A deterministic model server on node:http that answers as Gym's vLLM model server does:
// `POST /v1/responses`, `POST /v1/responses/context-compaction` (honouring
// `required_prefix_token_ids`), both with the Responses create params Gym's adapter takes, and
// `POST /tokenize` in both forms: Gym's adapter (Responses params → `{tokens}`) and vLLM's own
// (`prompt` or `messages` → `{count, max_model_len, tokens}`). Anything else gets 422, as the real
// servers' pydantic models (extra="forbid") answer.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { RouteAnswer, listenLocally, readJson, requireObject } from "./http.js";
import {
  COMPACTION_BODY_KEYS,
  PLAIN_BODY_KEYS,
  TOKENIZE_BODY_KEYS,
  type FunctionTool,
  type InputItem,
  type OutputItem,
  type ResponsesResponse,
} from "../responses.js";
import { hashTokens, sample } from "./sampler.js";
import { encodeText, renderPrompt, renderWithPrefix, SPECIAL, TemplateError, type RenderRequest } from "./template.js";
import { ChatFormError, chatToRender } from "./chat.js";

/** vLLM's TokenizeChatRequest keys (plus NeMo RL's required prefix) and TokenizeCompletionRequest keys. */
const VLLM_TOKENIZE_CHAT_KEYS = [
  "model",
  "messages",
  "add_generation_prompt",
  "continue_final_message",
  "add_special_tokens",
  "chat_template",
  "chat_template_kwargs",
  "mm_processor_kwargs",
  "tools",
  "return_token_strs",
  "required_prefix_token_ids",
];
const VLLM_TOKENIZE_PROMPT_KEYS = ["model", "prompt", "add_special_tokens", "return_token_strs"];

/** Faults injected into the n-th generation request (1-based, both generation endpoints count). */
export type Fault =
  /** Answer HTTP 500 (a transient failure the client retries). */
  | "http_500"
  /** Leave `generation_log_probs` one short. */
  | "logprob_mismatch"
  /** Leave out `prompt_token_ids`. */
  | "missing_prompt_ids"
  /** Render as if `required_prefix_token_ids` had not been sent (a server that ignores it). */
  | "ignore_prefix"
  /** Answer `status: "incomplete"` (max_output_tokens), its items as sampled. */
  | "incomplete";

export interface ModelServerOptions {
  seed?: number;
  /** Served model name (requests naming another model get 404). Default "testbed-model". */
  model?: string;
  /** 422 on unknown body fields (default true, like vLLM). */
  strict?: boolean;
  /** Inclusive range of reasoning words per generation. Default [6, 14]. */
  reasoningWords?: [number, number];
  maxModelLen?: number;
  faults?: Record<number, Fault>;
  /** Identities to report on every response (`generation_provenance`); vLLM reports none (the default). */
  provenance?: { tokenizer?: string; chat_template?: string; processor?: string };
  /** Function calls per response with tools (parallel tool calls); default 1. */
  parallelCalls?: number;
  /**
   * Sticky sessions, as a load-balanced model server keeps them: a request without the session
   * cookie opens a session (`Set-Cookie: testbed_session=…`); one naming an unknown session is 422.
   */
  sessionCookie?: boolean;
}

export interface RecordedRequest {
  path: string;
  body: unknown;
  status: number;
  /** The request's Cookie header, if any. */
  cookie?: string;
}

export interface ModelServer {
  /** `http://127.0.0.1:<port>` */
  url: string;
  model: string;
  /** The token the template repeats for each image (`SPECIAL.imagePad`): give it to the model client. */
  imagePlaceholderToken: number;
  /** Every request received, in order. */
  requests: RecordedRequest[];
  close(): Promise<void>;
}

function badRequest(message: string): RouteAnswer {
  return new RouteAnswer(400, { error: { message, type: "BadRequestError", code: 400 } });
}

function checkKeys(body: Record<string, unknown>, allowed: readonly string[], strict: boolean): void {
  if (!strict) return;
  const extra = Object.keys(body).filter((k) => !allowed.includes(k));
  if (extra.length) {
    throw new RouteAnswer(422, {
      detail: extra.map((k) => ({
        type: "extra_forbidden",
        loc: ["body", k],
        msg: "Extra inputs are not permitted",
        input: body[k],
      })),
    });
  }
}

function isTokenList(v: unknown): v is number[] {
  return Array.isArray(v) && v.every((t) => Number.isInteger(t) && t >= 0 && t <= 0x7fffffff);
}

function checkItem(item: unknown, i: number): InputItem {
  const it = item as Record<string, unknown>;
  const fail = (what: string): never => {
    throw new RouteAnswer(422, { detail: [{ type: "value_error", loc: ["body", "input", i], msg: what }] });
  };
  if (!it || typeof it !== "object") fail("must be an object");
  switch (it.type) {
    case "message":
      if (!["user", "assistant", "system", "developer"].includes(it.role as string))
        fail(`unsupported role ${String(it.role)}`);
      if (!Array.isArray(it.content)) fail("content must be an array");
      for (const part of it.content as Record<string, unknown>[]) {
        const ok =
          (part?.type === "input_text" && typeof part.text === "string") ||
          (part?.type === "input_image" && typeof part.image_url === "string") ||
          (part?.type === "output_text" && typeof part.text === "string");
        if (!ok) fail(`bad content part ${JSON.stringify(part).slice(0, 80)}`);
      }
      break;
    case "reasoning":
      if (!Array.isArray(it.content)) fail("reasoning content must be an array");
      break;
    case "function_call":
      if (typeof it.call_id !== "string" || typeof it.name !== "string" || typeof it.arguments !== "string")
        fail("function_call needs call_id, name, arguments");
      break;
    case "function_call_output":
      if (typeof it.call_id !== "string" || typeof it.output !== "string")
        fail("function_call_output needs call_id and output");
      break;
    default:
      fail(`unsupported item type ${String(it.type)}`);
  }
  return it as unknown as InputItem;
}

interface Parsed extends RenderRequest {
  model: string;
  tools?: FunctionTool[];
  prefix: number[] | null;
}

function invalid(loc: string, msg: string): RouteAnswer {
  return new RouteAnswer(422, { detail: [{ type: "value_error", loc: ["body", loc], msg }] });
}

function parse(body: Record<string, unknown>, served: string): Parsed {
  if (typeof body.model !== "string") throw invalid("model", "model must be a string");
  if (body.model !== served)
    throw new RouteAnswer(404, {
      error: { message: `The model \`${body.model}\` does not exist.`, type: "NotFoundError", code: 404 },
    });
  if (!Array.isArray(body.input)) throw invalid("input", "input must be an array of items");
  const input = body.input.map(checkItem);
  if (body.instructions !== undefined && typeof body.instructions !== "string")
    throw invalid("instructions", "instructions must be a string");
  if (body.tools !== undefined && !Array.isArray(body.tools)) throw invalid("tools", "tools must be an array");
  const prefix = body.required_prefix_token_ids;
  if (prefix !== undefined && prefix !== null && !isTokenList(prefix))
    throw invalid("required_prefix_token_ids", "required_prefix_token_ids must be an array of token ids");
  return {
    model: body.model,
    input,
    instructions: body.instructions as string | undefined,
    tools: body.tools as FunctionTool[] | undefined,
    prefix: (prefix as number[] | null | undefined) ?? null,
  };
}

/** The model named in a vLLM-form request, if any, must be the served one. */
function checkModel(body: Record<string, unknown>, served: string): void {
  if (body.model !== undefined && body.model !== served)
    throw new RouteAnswer(404, {
      error: { message: `The model \`${String(body.model)}\` does not exist.`, type: "NotFoundError", code: 404 },
    });
}

function prompt(parsed: Parsed, honourPrefix: boolean, maxModelLen: number): number[] {
  let ids: number[];
  try {
    ids = parsed.prefix && honourPrefix ? renderWithPrefix(parsed, parsed.prefix) : renderPrompt(parsed);
  } catch (error) {
    if (error instanceof TemplateError) throw badRequest(error.message);
    throw error;
  }
  if (ids.length > maxModelLen)
    throw badRequest(
      `This model's maximum context length is ${maxModelLen} tokens. ` +
        `However, your request has ${ids.length} input tokens.`,
    );
  return ids;
}

export async function startModelServer(options: ModelServerOptions = {}): Promise<ModelServer> {
  const seed = options.seed ?? 0;
  const model = options.model ?? "testbed-model";
  const strict = options.strict ?? true;
  const maxModelLen = options.maxModelLen ?? 131072;
  const reasoningWords = options.reasoningWords ?? [6, 14];
  const requests: RecordedRequest[] = [];
  let generations = 0;

  function generate(parsed: Parsed, fault: Fault | undefined): ResponsesResponse {
    const promptIds = prompt(parsed, fault !== "ignore_prefix", maxModelLen);
    const s = sample(seed, promptIds, parsed.tools, { reasoningWords, parallelCalls: options.parallelCalls });
    const last = s.output[s.output.length - 1] as OutputItem;
    last.prompt_token_ids = promptIds;
    last.generation_token_ids = s.generationIds;
    last.generation_log_probs = s.logprobs;
    if (fault === "logprob_mismatch") last.generation_log_probs = s.logprobs.slice(1);
    if (fault === "missing_prompt_ids") delete last.prompt_token_ids;
    return {
      id: `resp_${hashTokens(seed, promptIds).toString(16)}`,
      object: "response",
      model,
      status: fault === "incomplete" ? "incomplete" : "completed",
      ...(fault === "incomplete" ? { incomplete_details: { reason: "max_output_tokens" } } : {}),
      output: s.output,
      usage: {
        input_tokens: promptIds.length,
        output_tokens: s.generationIds.length,
        total_tokens: promptIds.length + s.generationIds.length,
      },
      ...(options.provenance ? { generation_provenance: { ...options.provenance } } : {}),
    };
  }

  function route(path: string, body: Record<string, unknown>): unknown {
    if (path === "/v1/responses" || path === "/v1/responses/context-compaction") {
      const compaction = path !== "/v1/responses";
      checkKeys(body, compaction ? COMPACTION_BODY_KEYS : PLAIN_BODY_KEYS, strict);
      const parsed = parse(body, model);
      if (!compaction) parsed.prefix = null; // a lenient plain endpoint ignores what it does not know
      const fault = options.faults?.[++generations];
      if (fault === "http_500")
        throw new RouteAnswer(500, { error: { message: "injected failure", type: "InternalServerError", code: 500 } });
      return generate(parsed, fault);
    }
    if (path === "/tokenize") return tokenize(body);
    throw new RouteAnswer(404, { detail: "Not Found" });
  }

  /**
   * Gym's adapter form (Responses params: `{tokens}`), or vLLM's (`prompt` or `messages`: `{count,
   * max_model_len, tokens}`).
   */
  function tokenize(body: Record<string, unknown>): unknown {
    const forms = ["input", "messages", "prompt"].filter((k) => k in body);
    if (forms.length !== 1)
      throw new RouteAnswer(422, {
        detail: [
          {
            type: "missing",
            loc: ["body"],
            msg:
              `a /tokenize body has exactly one of input (Gym's adapter), messages or prompt (vLLM); ` +
              `this one has ${forms.length ? forms.join(" and ") : "none"}`,
          },
        ],
      });
    if (forms[0] === "input") {
      checkKeys(body, TOKENIZE_BODY_KEYS, strict);
      return { tokens: prompt(parse(body, model), true, Number.MAX_SAFE_INTEGER) };
    }
    checkModel(body, model);
    let tokens: number[];
    if (forms[0] === "prompt") {
      checkKeys(body, VLLM_TOKENIZE_PROMPT_KEYS, strict);
      if (typeof body.prompt === "string") tokens = encodeText(body.prompt);
      else if (isTokenList(body.prompt)) tokens = body.prompt;
      else throw invalid("prompt", "prompt must be a string or token ids");
    } else {
      checkKeys(body, VLLM_TOKENIZE_CHAT_KEYS, strict);
      let request: RenderRequest;
      try {
        request = chatToRender(body.messages, body.tools);
      } catch (error) {
        if (error instanceof ChatFormError) throw invalid("messages", error.message);
        throw error;
      }
      const prefix = body.required_prefix_token_ids;
      if (prefix !== undefined && prefix !== null && !isTokenList(prefix))
        throw invalid("required_prefix_token_ids", "required_prefix_token_ids must be an array of token ids");
      tokens = prompt(
        {
          ...request,
          tools: request.tools ? [...request.tools] : undefined,
          model,
          prefix: (prefix as number[] | null | undefined) ?? null,
        },
        true,
        Number.MAX_SAFE_INTEGER,
      );
    }
    return { count: tokens.length, max_model_len: maxModelLen, tokens };
  }

  const sessions = new Set<string>();
  /** The session a request belongs to (opening one when it names none), or a 422. */
  function session(cookie: string | undefined): string | null {
    const named = /(?:^|;\s*)testbed_session=([^;]+)/.exec(cookie ?? "")?.[1];
    if (named === undefined) {
      const opened = `s${sessions.size + 1}`;
      sessions.add(opened);
      return opened;
    }
    if (!sessions.has(named))
      throw new RouteAnswer(422, {
        detail: [{ type: "value_error", loc: ["cookie", "testbed_session"], msg: `unknown session ${named}` }],
      });
    return null;
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const path = (req.url ?? "/").split("?")[0];
    const cookie = req.headers.cookie;
    let status = 200;
    let payload: unknown;
    let body: unknown = null;
    let opened: string | null = null;
    try {
      body = await readJson(req);
      if (options.sessionCookie) opened = session(cookie);
      payload = route(path, requireObject(body));
    } catch (error) {
      if (error instanceof RouteAnswer) {
        status = error.status;
        payload = error.payload;
      } else {
        status = 500;
        payload = {
          error: {
            message: error instanceof Error ? error.message : String(error),
            type: "InternalServerError",
            code: 500,
          },
        };
      }
    }
    requests.push({ path, body, status, ...(cookie !== undefined ? { cookie } : {}) });
    res.writeHead(status, {
      "content-type": "application/json",
      ...(opened ? { "set-cookie": `testbed_session=${opened}; Path=/` } : {}),
    });
    res.end(JSON.stringify(payload));
  }

  const { url, close } = await listenLocally(createServer((req, res) => void handle(req, res)));
  return { url, model, imagePlaceholderToken: SPECIAL.imagePad, requests, close };
}
