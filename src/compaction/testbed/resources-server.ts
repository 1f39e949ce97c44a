// A Gym resources server for the grid world, on node:http: `/seed_session` opens a session (a
// cookie) with the world the run body's `grid` field describes, `/move` and `/look` act in it
// (answering `{output, images, done}`, which `jsonObservation` reads), `/verify` scores it
// (`reward`: 1 at the goal, else 0) and `/aggregate_metrics` averages a batch, as Gym's do.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { GymRunBody } from "../resources.js";
import { createGridWorld, type GridWorld, type GridWorldOptions } from "./gridworld.js";
import type { Observation } from "../environment.js";
import type { RecordedRequest } from "./server.js";

export interface ResourcesTestServer {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Every request received, in order (with the session cookie it carried). */
  requests: (RecordedRequest & { session: string | null })[];
  close(): Promise<void>;
}

const dataUrl = (image: { bytes: Uint8Array; mime: string }) =>
  `data:${image.mime};base64,${Buffer.from(image.bytes).toString("base64")}`;

/** A Gym run body for one grid-world task: its first observation as the input, its tools, and `grid` for the server. */
export async function gridWorldRunBody(
  grid: GridWorldOptions = {},
  extra: Record<string, unknown> = {},
): Promise<GymRunBody> {
  const world = createGridWorld(grid);
  const start = await world.start();
  return {
    responses_create_params: {
      input: [
        {
          role: "user",
          type: "message",
          content: [
            { type: "input_text", text: start.text },
            ...(start.images ?? []).map((i) => ({ type: "input_image", image_url: dataUrl(i), detail: "auto" })),
          ],
        },
      ],
      instructions: world.instructions,
      tools: world.tools,
    },
    grid,
    ...extra,
  };
}

class HttpAnswer extends Error {
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

function sessionOf(req: IncomingMessage): string | null {
  const match = /(?:^|;\s*)grid_session=([^;]+)/.exec(req.headers.cookie ?? "");
  return match ? match[1] : null;
}

function observation(obs: Observation): unknown {
  return { output: obs.text, images: (obs.images ?? []).map(dataUrl), done: obs.done === true };
}

export async function startGridWorldResources(): Promise<ResourcesTestServer> {
  const worlds = new Map<string, GridWorld>();
  const requests: ResourcesTestServer["requests"] = [];
  let sessions = 0;

  async function route(
    path: string,
    body: Record<string, unknown>,
    session: string | null,
    res: ServerResponse,
  ): Promise<unknown> {
    if (path === "/seed_session") {
      if (typeof body.responses_create_params !== "object" || body.responses_create_params === null) {
        throw new HttpAnswer(422, {
          detail: [{ type: "missing", loc: ["body", "responses_create_params"], msg: "Field required" }],
        });
      }
      const id = String(++sessions);
      const world = createGridWorld((body.grid as GridWorldOptions | undefined) ?? {});
      await world.start();
      worlds.set(id, world);
      res.setHeader("set-cookie", `grid_session=${id}; Path=/; HttpOnly`);
      return {};
    }
    if (path === "/aggregate_metrics") {
      const rows = body.verify_responses;
      if (!Array.isArray(rows))
        throw new HttpAnswer(422, {
          detail: [{ type: "missing", loc: ["body", "verify_responses"], msg: "Field required" }],
        });
      const rewards = rows.map((r) => Number((r as { reward?: unknown }).reward));
      const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
      const byTask = new Map<number, number[]>();
      rows.forEach((r, i) => {
        const task = Number((r as { _ng_task_index?: unknown })._ng_task_index ?? 0);
        byTask.set(task, [...(byTask.get(task) ?? []), rewards[i]]);
      });
      const agent = {
        "mean/reward": mean(rewards),
        "max/reward": Math.max(...rewards),
        "min/reward": Math.min(...rewards),
      };
      return {
        group_level_metrics: [...byTask].map(([task, xs]) => ({ _ng_task_index: task, "mean/reward": mean(xs) })),
        agent_metrics: agent,
        key_metrics: { "mean/reward": agent["mean/reward"] },
      };
    }
    const world = session === null ? undefined : worlds.get(session);
    if (path === "/verify") {
      if (typeof body.response !== "object" || body.response === null)
        throw new HttpAnswer(422, { detail: [{ type: "missing", loc: ["body", "response"], msg: "Field required" }] });
      if (!world) throw new HttpAnswer(400, { detail: "no session: call /seed_session first" });
      return { ...body, reward: world.reward() };
    }
    if (path === "/move" || path === "/look") {
      if (!world) throw new HttpAnswer(400, { detail: "no session: call /seed_session first" });
      return observation(await world.call(path.slice(1), body));
    }
    throw new HttpAnswer(404, { detail: "Not Found" });
  }

  const server = createServer((req, res) => {
    void (async () => {
      const path = (req.url ?? "/").split("?")[0];
      const session = sessionOf(req);
      let status = 200;
      let payload: unknown;
      let body: unknown = null;
      try {
        if (req.method !== "POST") throw new HttpAnswer(405, { detail: "Method Not Allowed" });
        try {
          body = JSON.parse(await readBody(req));
        } catch {
          throw new HttpAnswer(422, { detail: [{ type: "json_invalid", loc: ["body"], msg: "JSON decode error" }] });
        }
        if (!body || typeof body !== "object" || Array.isArray(body))
          throw new HttpAnswer(422, {
            detail: [{ type: "model_type", loc: ["body"], msg: "Input should be an object" }],
          });
        payload = await route(path, body as Record<string, unknown>, session, res);
      } catch (error) {
        status = error instanceof HttpAnswer ? error.status : 500;
        payload = error instanceof HttpAnswer ? error.payload : { detail: String(error) };
      }
      requests.push({ path, body, status, session });
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(payload));
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
