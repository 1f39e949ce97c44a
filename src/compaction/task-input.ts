// A task's input (a Gym run body's `responses_create_params.input`) as initial context: a string,
// or Responses input items of any role — system and developer messages, the user's task, earlier
// assistant turns and reasoning, function calls and their outputs, images in any message. Gym's
// agent passes every item through to the semantic history as initial context; so does this one.
import { CompactionError } from "./errors.js";
import type { ObservationImage } from "./environment.js";
import { dataUrlImage } from "./media.js";

/** A text or image part of a message of the initial context. */
export type TaskPart = { type: "text"; text: string } | { type: "image"; image: ObservationImage };

/** One item of the initial context, before its images are stored. */
export type TaskItem =
  | { kind: "user"; role?: "system" | "developer"; parts: TaskPart[] }
  | { kind: "message"; id?: string; text: string }
  | { kind: "reasoning"; id?: string; text: string }
  | { kind: "function_call"; id?: string; callId: string; name: string; arguments: string }
  | { kind: "function_output"; callId: string; output: string };

/** What an environment's `start()` may return instead of one observation: the whole initial context. */
export interface TaskInput {
  context: TaskItem[];
}

const ROLES = ["user", "system", "developer", "assistant"];

function decodeBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

/**
 * The items of a task input; `where` names it in messages
 * (`resources run body: responses_create_params.input[2].content[1]: …`).
 */
export function taskInputItems(input: unknown, where: string): TaskItem[] {
  if (typeof input === "string") return [{ kind: "user", parts: [{ type: "text", text: input }] }];
  if (!Array.isArray(input) || input.length === 0)
    throw new CompactionError(`${where} must be a string or a non-empty array of input items`);
  return input.map((item, i) => taskItem(item, `${where}[${i}]`));
}

function taskItem(raw: unknown, where: string): TaskItem {
  const refuse = (why: string) => new CompactionError(`${where}: ${why}`);
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw refuse("is not an object");
  const item = raw as Record<string, unknown>;
  const str = (key: string, optional = false): string | undefined => {
    const v = item[key];
    if (v === undefined || v === null) {
      if (optional) return undefined;
      throw refuse(`${key} is missing`);
    }
    if (typeof v !== "string") throw refuse(`${key} must be a string`);
    return v;
  };
  // EasyInputMessage has no `type`; its role says it is a message.
  const type = item.type ?? (item.role !== undefined ? "message" : undefined);
  switch (type) {
    case "message": {
      const role = item.role;
      if (typeof role !== "string" || !ROLES.includes(role))
        throw refuse(`role ${JSON.stringify(role)} is not one of ${ROLES.join(", ")}`);
      const parts = contentParts(item.content, role, where);
      if (role === "assistant")
        return {
          kind: "message",
          ...optionalId(str("id", true)),
          text: parts.map((p) => (p as { text: string }).text).join(""),
        };
      return { kind: "user", ...(role === "user" ? {} : { role: role as "system" | "developer" }), parts };
    }
    case "reasoning": {
      const blocks = Array.isArray(item.content) && item.content.length ? item.content : item.summary;
      if (!Array.isArray(blocks)) throw refuse("reasoning needs content or summary");
      const text = blocks
        .map((b, k) => {
          const t = (b as { text?: unknown } | null)?.text;
          if (typeof t !== "string") throw refuse(`reasoning block ${k} has no text`);
          return t;
        })
        .join("");
      return { kind: "reasoning", ...optionalId(str("id", true)), text };
    }
    case "function_call":
      return {
        kind: "function_call",
        ...optionalId(str("id", true)),
        callId: str("call_id")!,
        name: str("name")!,
        arguments: str("arguments")!,
      };
    case "function_call_output":
      if (typeof item.output !== "string")
        throw refuse("function_call_output.output must be a string (this runtime keeps tool images in messages)");
      return { kind: "function_output", callId: str("call_id")!, output: item.output };
    default:
      throw refuse(
        `item type ${JSON.stringify(type)} is not message, reasoning, function_call or function_call_output`,
      );
  }
}

function optionalId(id: string | undefined): { id?: string } {
  return id === undefined ? {} : { id };
}

function contentParts(content: unknown, role: string, where: string): TaskPart[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  if (!Array.isArray(content)) throw new CompactionError(`${where}.content must be a string or an array of parts`);
  return content.map((raw, k): TaskPart => {
    const part = raw as { type?: unknown; text?: unknown; image_url?: unknown } | null;
    const at = `${where}.content[${k}]`;
    const textTypes = role === "assistant" ? ["output_text", "input_text"] : ["input_text"];
    if (textTypes.includes(part?.type as string) && typeof part?.text === "string")
      return { type: "text", text: part.text };
    if (part?.type === "input_image" && role !== "assistant") {
      const url = typeof part.image_url === "string" ? part.image_url : (part.image_url as { url?: unknown })?.url;
      const image = typeof url === "string" ? dataUrlImage(url) : null;
      if (!image) throw new CompactionError(`${at}: image_url is not a base64 PNG, JPEG or WebP data URL`);
      return { type: "image", image: { bytes: decodeBase64(image.base64), mime: image.mime } };
    }
    throw new CompactionError(
      `${at}: ${JSON.stringify(part?.type)} is not a ${textTypes.join(" or ")}${role === "assistant" ? "" : " or input_image"} part`,
    );
  });
}
