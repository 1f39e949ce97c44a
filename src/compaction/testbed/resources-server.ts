// A Gym resources server for the grid world, on node:http: `/seed_session` opens a session (a
// cookie) with the world the run body's `grid` field describes, `/move` and `/look` act in it
// (answering `{output, images, done}`, which `jsonObservation` reads), `/verify` scores it
// (`reward`: 1 at the goal, else 0) and `/aggregate_metrics` averages a batch, as Gym's do.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { RouteAnswer, listenLocally, readJson, requireObject } from "./http.js";
import type { GymRunBody } from "../resources.js";
import { createGridWorld, type GridWorld, type GridWorldOptions } from "./gridworld.js";
import type { Observation } from "../environment.js";
import type { RecordedRequest } from "./server.js";
import { GymModelError, checkCompactedResponse } from "./gym-models.js";

export interface ResourcesTestServer {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Every request received, in order (with its session and its whole Cookie header). */
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
        throw new RouteAnswer(422, {
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
        throw new RouteAnswer(422, {
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
        throw new RouteAnswer(422, { detail: [{ type: "missing", loc: ["body", "response"], msg: "Field required" }] });
      if (!world) throw new RouteAnswer(400, { detail: "no session: call /seed_session first" });
      // A compacted response must be one Gym's agent would have accepted (its pydantic models).
      if ("context_compaction_contract" in body.response) {
        try {
          checkCompactedResponse(body.response, ["body", "response"]);
        } catch (error) {
          if (!(error instanceof GymModelError)) throw error;
          throw new RouteAnswer(422, { detail: [{ type: "value_error", loc: error.loc, msg: error.msg }] });
        }
      }
      return { ...body, reward: world.reward() };
    }
    if (path === "/move" || path === "/look") {
      if (!world) throw new RouteAnswer(400, { detail: "no session: call /seed_session first" });
      return observation(await world.call(path.slice(1), body));
    }
    throw new RouteAnswer(404, { detail: "Not Found" });
  }

  const server = createServer((req, res) => {
    void (async () => {
      const path = (req.url ?? "/").split("?")[0];
      const session = sessionOf(req);
      let status = 200;
      let payload: unknown;
      let body: unknown = null;
      try {
        body = await readJson(req);
        payload = await route(path, requireObject(body), session, res);
      } catch (error) {
        status = error instanceof RouteAnswer ? error.status : 500;
        payload = error instanceof RouteAnswer ? error.payload : { detail: String(error) };
      }
      const cookie = req.headers.cookie;
      requests.push({ path, body, status, session, ...(cookie !== undefined ? { cookie } : {}) });
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(payload));
    })();
  });
  const { url, close } = await listenLocally(server);
  return { url, requests, close };
}
