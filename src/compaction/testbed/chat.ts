// vLLM's `/tokenize` request forms, as the test bed's template reads them: a chat (`messages`, the
// form Gym's adapter forwards upstream) becomes the Responses items the template renders; a
// completion `prompt` is plain text (or token ids).
import type { FunctionTool, InputItem } from "../responses.js";
import type { RenderRequest } from "./template.js";

export class ChatFormError extends Error {}

type Obj = Record<string, unknown>;

function textOf(content: unknown, where: string): string {
  if (typeof content === "string") return content;
  if (
    Array.isArray(content) &&
    content.every((p) => (p as Obj)?.type === "text" && typeof (p as Obj).text === "string")
  )
    return content.map((p) => (p as Obj).text).join("");
  throw new ChatFormError(`${where} must be a string or text parts`);
}

/** Chat Completions messages and tools as the template's render request (system → instructions). */
export function chatToRender(messages: unknown, tools: unknown): RenderRequest {
  if (!Array.isArray(messages)) throw new ChatFormError("messages must be an array");
  const input: InputItem[] = [];
  let instructions: string | undefined;
  messages.forEach((raw, i) => {
    const m = raw as Obj;
    const where = `messages[${i}]`;
    switch (m?.role) {
      case "system":
      case "developer":
        instructions = textOf(m.content, `${where}.content`);
        break;
      case "user": {
        const parts = typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content;
        if (!Array.isArray(parts)) throw new ChatFormError(`${where}.content must be a string or an array of parts`);
        input.push({
          type: "message",
          role: "user",
          content: parts.map((p: Obj, j) => {
            if (p?.type === "text" && typeof p.text === "string") return { type: "input_text", text: p.text };
            const url = (p?.image_url as Obj | undefined)?.url;
            if (p?.type === "image_url" && typeof url === "string")
              return { type: "input_image", image_url: url, detail: "auto" };
            throw new ChatFormError(`${where}.content[${j}] must be a text or image_url part`);
          }),
        });
        break;
      }
      case "assistant": {
        if (typeof m.reasoning_content === "string")
          input.push({
            type: "reasoning",
            id: `rs_${i}`,
            summary: [],
            content: [{ type: "reasoning_text", text: m.reasoning_content }],
          });
        if (m.content !== undefined && m.content !== null)
          input.push({
            type: "message",
            role: "assistant",
            id: `msg_${i}`,
            content: [{ type: "output_text", text: textOf(m.content, `${where}.content`) }],
          });
        for (const [j, call] of ((m.tool_calls as Obj[] | undefined) ?? []).entries()) {
          const fn = call?.function as Obj | undefined;
          if (typeof call?.id !== "string" || typeof fn?.name !== "string" || typeof fn?.arguments !== "string")
            throw new ChatFormError(`${where}.tool_calls[${j}] needs id, function.name and function.arguments`);
          input.push({ type: "function_call", id: call.id, call_id: call.id, name: fn.name, arguments: fn.arguments });
        }
        break;
      }
      case "tool":
        if (typeof m.tool_call_id !== "string") throw new ChatFormError(`${where}.tool_call_id must be a string`);
        input.push({
          type: "function_call_output",
          call_id: m.tool_call_id,
          output: textOf(m.content, `${where}.content`),
        });
        break;
      default:
        throw new ChatFormError(
          `${where}.role ${JSON.stringify(m?.role)} is not system, developer, user, assistant or tool`,
        );
    }
  });
  let functionTools: FunctionTool[] | undefined;
  if (tools !== undefined) {
    if (!Array.isArray(tools)) throw new ChatFormError("tools must be an array");
    functionTools = tools.map((t: Obj, j) => {
      const fn = t?.function as Obj | undefined;
      if (t?.type !== "function" || typeof fn?.name !== "string")
        throw new ChatFormError(`tools[${j}] must be {type: "function", function: {name, …}}`);
      return {
        type: "function",
        name: fn.name,
        description: String(fn.description ?? ""),
        parameters: (fn.parameters as Obj) ?? {},
      };
    });
  }
  return { input, instructions, tools: functionTools };
}
