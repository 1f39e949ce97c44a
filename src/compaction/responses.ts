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
  role: "user";
  content: (InputText | InputImage)[];
}
export interface AssistantMessageItem {
  type: "message";
  role: "assistant";
  id: string;
  content: OutputText[];
}
export interface ReasoningItem {
  type: "reasoning";
  id: string;
  summary: never[];
  content: ReasoningText[];
}
export interface FunctionCallItem {
  type: "function_call";
  id: string;
  call_id: string;
  name: string;
  arguments: string;
}
export interface FunctionCallOutputItem {
  type: "function_call_output";
  call_id: string;
  output: string;
}

export type InputItem = UserMessageItem | AssistantMessageItem | ReasoningItem | FunctionCallItem | FunctionCallOutputItem;

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
}

/** Body of `POST /v1/responses/context-compaction`: the plain fields plus the exact-prefix requirement. */
export interface CompactionResponsesBody extends PlainResponsesBody {
  required_prefix_token_ids?: number[];
}

/** Body of the server's `POST /tokenize` preflight (diagnostic only). */
export interface TokenizeBody {
  model: string;
  input: InputItem[];
  instructions?: string;
  tools?: FunctionTool[];
  required_prefix_token_ids?: number[];
}

/** Keys `POST /v1/responses` may carry; the client refuses to send anything else there. */
export const PLAIN_BODY_KEYS: readonly string[] = ["model", "input", "instructions", "tools", "max_output_tokens", "temperature"];
/** Keys `POST /v1/responses/context-compaction` may carry. */
export const COMPACTION_BODY_KEYS: readonly string[] = [...PLAIN_BODY_KEYS, "required_prefix_token_ids"];
/** Keys `POST /tokenize` may carry (the preflight that checks a compaction's prefix). */
export const TOKENIZE_BODY_KEYS: readonly string[] = ["model", "input", "instructions", "tools", "required_prefix_token_ids"];

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
}
