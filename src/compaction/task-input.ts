// A task's input (a Gym run body's `responses_create_params.input`) as initial context: a string,
// or Responses input items of any role — system and developer messages, the user's task, earlier
// assistant turns and reasoning, function calls and their outputs, images in any message. Gym's
// agent passes every item through to the semantic history as initial context; so does this one.
import { CompactionError } from "./errors.js";
import type { TaskInput, TaskItem, TaskPart } from "./environment.js";
import { dataUrlBytes } from "./media.js";

export type { TaskInput, TaskItem, TaskPart };

const ROLES = ["user", "system", "developer", "assistant"];

/**
 * The items of a task input; `where` names it in messages
 * (`resources run body: responses_create_params.input[2].content[1]: …`).
 */
export function taskInputItems(input: unknown, where: string): TaskItem[] {
  if (typeof input === "string") return [{ kind: "user", parts: [{ type: "text", text: input }] }];
  if (!Array.isArray(input) || input.length === 0)
    throw new CompactionError(`${where} must be a string or a non-empty array of input items`);
  const callNames = new Map<string, string>();
  return input.flatMap((item, i) => {
    const items = taskItem(item, `${where}[${i}]`, callNames);
    for (const it of items) if (it.kind === "function_call") callNames.set(it.callId, it.name);
    return items;
  });
}

/**
 * A tool output given as parts: its text as the function output and its images in a user message
 * after it, as the runtime shows an environment's tool images (a Responses function output the
 * history keeps is text; see docs/compaction.md).
 */
/** The text before a tool's images in the user message that shows them (here and in agent.ts). */
export function toolImagesCaption(tool: string): string {
  return `Observation after ${tool}:`;
}

function toolOutput(callId: string, parts: unknown[], where: string, name: string | undefined): TaskItem[] {
  const read = contentParts(parts, "tool", where, "output");
  const text = read.flatMap((p) => (p.type === "text" ? [p.text] : [])).join("");
  const images = read.filter((p) => p.type === "image");
  const output: TaskItem = { kind: "function_output", callId, output: text };
  if (!images.length) return [output];
  return [output, { kind: "user", parts: [{ type: "text", text: toolImagesCaption(name ?? callId) }, ...images] }];
}

function taskItem(raw: unknown, where: string, callNames: ReadonlyMap<string, string>): TaskItem[] {
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
  if (type === "function_call_output") {
    const callId = str("call_id")!;
    if (typeof item.output === "string") return [{ kind: "function_output", callId, output: item.output }];
    if (!Array.isArray(item.output))
      throw refuse("output must be a string or an array of input_text and input_image parts");
    return toolOutput(callId, item.output, where, callNames.get(callId));
  }
  return [oneItem(item, type, where, refuse, str)];
}

function oneItem(
  item: Record<string, unknown>,
  type: unknown,
  where: string,
  refuse: (why: string) => CompactionError,
  str: (key: string, optional?: boolean) => string | undefined,
): TaskItem {
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
    default:
      throw refuse(
        `item type ${JSON.stringify(type)} is not message, reasoning, function_call or function_call_output`,
      );
  }
}

function optionalId(id: string | undefined): { id?: string } {
  return id === undefined ? {} : { id };
}

/** A message's content (or, with `key` "output", a tool output's parts) as text and image parts. */
function contentParts(content: unknown, role: string, where: string, key = "content"): TaskPart[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  if (!Array.isArray(content)) throw new CompactionError(`${where}.${key} must be a string or an array of parts`);
  return content.map((raw, k): TaskPart => {
    const part = raw as { type?: unknown; text?: unknown; image_url?: unknown } | null;
    const at = `${where}.${key}[${k}]`;
    const textTypes = role === "assistant" ? ["output_text", "input_text"] : ["input_text"];
    if (textTypes.includes(part?.type as string) && typeof part?.text === "string")
      return { type: "text", text: part.text };
    if (part?.type === "input_image" && role !== "assistant") {
      const url = typeof part.image_url === "string" ? part.image_url : (part.image_url as { url?: unknown })?.url;
      const image = typeof url === "string" ? dataUrlBytes(url) : null;
      if (!image) throw new CompactionError(`${at}: image_url is not a base64 PNG, JPEG or WebP data URL`);
      return { type: "image", image };
    }
    throw new CompactionError(
      `${at}: ${JSON.stringify(part?.type)} is not a ${textTypes.join(" or ")}${role === "assistant" ? "" : " or input_image"} part`,
    );
  });
}
