// What both test-bed servers (the model server and the resources server) do over HTTP: answer
// with a status and a JSON payload, read a POST's JSON object body as FastAPI would judge it, and
// listen on a free local port.
import type { IncomingMessage, Server } from "node:http";
import type { AddressInfo } from "node:net";

/** An answer other than 200, thrown by a route: its status and JSON payload. */
export class RouteAnswer extends Error {
  constructor(
    readonly status: number,
    readonly payload: unknown,
  ) {
    super(JSON.stringify(payload));
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/** A POST's body, parsed as JSON, or the RouteAnswer FastAPI would answer (405, 422). */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  if (req.method !== "POST") throw new RouteAnswer(405, { detail: "Method Not Allowed" });
  const text = await readBody(req);
  try {
    return JSON.parse(text);
  } catch {
    throw new RouteAnswer(422, { detail: [{ type: "json_invalid", loc: ["body"], msg: "JSON decode error" }] });
  }
}

/** A body that must be a JSON object, or FastAPI's 422. */
export function requireObject(body: unknown): Record<string, unknown> {
  if (!body || typeof body !== "object" || Array.isArray(body))
    throw new RouteAnswer(422, { detail: [{ type: "model_type", loc: ["body"], msg: "Input should be an object" }] });
  return body as Record<string, unknown>;
}

/** Listens on a free port of 127.0.0.1: its URL, and a close() that also ends open connections. */
export async function listenLocally(server: Server): Promise<{ url: string; close(): Promise<void> }> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
