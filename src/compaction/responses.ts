// The slice of the OpenAI Responses API this runtime speaks, plus vLLM's token-output fields.
// Request bodies are separate types per endpoint: the plain body has no slot for
// `required_prefix_token_ids`, so the compaction-only key cannot leak into `POST /v1/responses`.

export interface InputText {
  type: "input_text";
  text: string;
}
export interface InputImage {
  type: "input_image";
  image_url: string;
  detail: "auto";
}
export interface OutputText {
  type: "output_text";
  text: string;
}
export interface ReasoningText {
  type: "reasoning_text";
  text: string;
}

export interface UserMessageItem {
  type: "message";
  /** System and developer messages come only from a task's initial context. */
  role: "user" | "system" | "developer";
  content: (InputText | InputImage)[];
}
export interface AssistantMessageItem {
  type: "message";
  role: "assistant";
  /** Absent on an earlier turn given as initial context without one. */
  id?: string;
  content: OutputText[];
}
export interface ReasoningItem {
  type: "reasoning";
  id?: string;
  summary: never[];
  content: ReasoningText[];
}
export interface FunctionCallItem {
  type: "function_call";
  id?: string;
  call_id: string;
  name: string;
  arguments: string;
}
export interface FunctionCallOutputItem {
  type: "function_call_output";
  call_id: string;
  output: string;
}

export type InputItem =
  | UserMessageItem
  | AssistantMessageItem
  | ReasoningItem
  | FunctionCallItem
  | FunctionCallOutputItem;

export interface FunctionTool {
  type: "function";
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  strict?: boolean;
}

/** Body of the standard `POST /v1/responses`: exactly what a plain agent sends. */
export interface PlainResponsesBody {
  model: string;
  input: InputItem[];
  instructions?: string;
  tools?: FunctionTool[];
  max_output_tokens?: number;
  temperature?: number;
  /** Any other Responses create parameter (RESPONSES_CREATE_PARAMS_KEYS), passed through as given. */
  [param: string]: unknown;
}

/** Body of `POST /v1/responses/context-compaction`: the plain fields plus the exact-prefix requirement. */
export interface CompactionResponsesBody extends PlainResponsesBody {
  required_prefix_token_ids?: number[];
}

/** Body of the model server's `POST /tokenize` preflight (Gym's adapter: Responses create params; diagnostic only). */
export interface TokenizeBody extends PlainResponsesBody {
  required_prefix_token_ids?: number[];
}

/**
 * The keys of Responses create params (Gym's NeMoGymResponseCreateParamsNonStreaming, extra="forbid"):
 * what `POST /v1/responses` accepts, and what the client refuses to send anything outside of.
 */
export const RESPONSES_CREATE_PARAMS_KEYS: readonly string[] = [
  "background",
  "include",
  "input",
  "instructions",
  "max_output_tokens",
  "max_tool_calls",
  "metadata",
  "model",
  "parallel_tool_calls",
  "previous_response_id",
  "prompt",
  "reasoning",
  "service_tier",
  "store",
  "context_management",
  "conversation",
  "moderation",
  "prompt_cache_key",
  "prompt_cache_retention",
  "safety_identifier",
  "stream_options",
  "temperature",
  "text",
  "tool_choice",
  "tools",
  "top_logprobs",
  "top_p",
  "truncation",
  "user",
  "stream",
];
/** Keys `POST /v1/responses` may carry. */
export const PLAIN_BODY_KEYS: readonly string[] = RESPONSES_CREATE_PARAMS_KEYS;
/**
 * Keys `POST /v1/responses/context-compaction` and the adapter's `POST /tokenize` may carry (Gym's
 * VLLMContextCompactionResponseCreateParams).
 */
export const COMPACTION_BODY_KEYS: readonly string[] = [...RESPONSES_CREATE_PARAMS_KEYS, "required_prefix_token_ids"];
export const TOKENIZE_BODY_KEYS: readonly string[] = COMPACTION_BODY_KEYS;

/** vLLM's token-output fields, carried on the output item that ends a generation. */
export interface TokenFields {
  prompt_token_ids?: number[];
  generation_token_ids?: number[];
  generation_log_probs?: number[];
}

export type OutputItem = (
  | (ReasoningItem & { status?: string })
  | (AssistantMessageItem & { status?: string })
  | (FunctionCallItem & { status?: string })
) &
  TokenFields;

export interface ResponsesResponse {
  id: string;
  object: "response";
  model: string;
  status: string;
  output: OutputItem[];
  usage?: { input_tokens: number; output_tokens: number; total_tokens: number };
  incomplete_details?: { reason?: string } | null;
  /**
   * Identities of what built the prompt, when the server reports them (vLLM does not): the
   * evidence's provenance records them, or says which are missing.
   */
  generation_provenance?: { tokenizer?: string; chat_template?: string; processor?: string };
}
