// A one-window screen, as a computer-use agent sees it: every step returns a screenshot of the
// whole window, always the same size. Typing a key fills the next cell of the window's text
// field (a new screenshot); waiting changes nothing (the same bytes, so the same media id).
import { loadFeature } from "../../optional-dependency.js";
import type { Environment, Observation } from "../environment.js";
import type { FunctionTool } from "../responses.js";

// An optional peer: a missing one is one line naming what to install (src/optional-dependency.ts).
const { encode: encodePng } = await loadFeature(
  "the compaction test bed (callforest/compaction/testbed)",
  () => import("fast-png"),
);

export interface ScreenOptions {
  /** Cells per row of the text field (default 8). */
  columns?: number;
  /** Rows of the text field (default 4). */
  rows?: number;
  /** Pixels per cell side (default 8). */
  cell?: number;
}

const KEY_COLOURS: Record<string, [number, number, number]> = {
  a: [220, 40, 40],
  b: [40, 160, 60],
  c: [40, 80, 220],
  d: [230, 190, 30],
};

const TOOLS: FunctionTool[] = [
  {
    type: "function",
    name: "type",
    description: "Type one key into the text field.",
    parameters: {
      type: "object",
      properties: { key: { type: "string", enum: Object.keys(KEY_COLOURS) } },
      required: ["key"],
      additionalProperties: false,
    },
  },
  {
    type: "function",
    name: "wait",
    description: "Wait and look at the screen again.",
    parameters: { type: "object", properties: {}, additionalProperties: false },
  },
];

export interface Screen extends Environment {
  /** The keys typed so far. */
  readonly typed: string;
}

export function createScreen(options: ScreenOptions = {}): Screen {
  const columns = options.columns ?? 8;
  const rows = options.rows ?? 4;
  const cell = options.cell ?? 8;
  const cells = columns * rows;
  let typed = "";

  function screenshot(): Uint8Array {
    const width = columns * cell;
    const height = rows * cell;
    const data = new Uint8Array(width * height * 3).fill(255);
    for (let i = 0; i < typed.length; i++) {
      const x0 = (i % columns) * cell;
      const y0 = Math.floor(i / columns) * cell;
      // an inset square per typed key, so neighbouring cells stay apart
      for (let y = y0 + 1; y < y0 + cell - 1; y++)
        for (let x = x0 + 1; x < x0 + cell - 1; x++) data.set(KEY_COLOURS[typed[i]], (y * width + x) * 3);
    }
    return encodePng({ width, height, data, channels: 3, depth: 8 });
  }

  const observe = (text: string): Observation => ({
    text,
    images: [{ bytes: screenshot(), mime: "image/png" }],
    done: typed.length === cells,
  });

  return {
    instructions: "You use a computer through its screen. Use the tools; each returns a screenshot.",
    tools: TOOLS,
    get typed() {
      return typed;
    },
    start: () => observe(`Task: fill the ${columns}x${rows} text field on the screen.`),
    call(name, args) {
      if (name === "wait") return observe("Waited; the screen is unchanged.");
      if (name !== "type") return observe(`error: unknown tool ${name}`);
      const key = (args as { key?: unknown })?.key;
      if (typeof key !== "string" || !(key in KEY_COLOURS))
        return observe(`error: type needs key ${Object.keys(KEY_COLOURS).join("|")} (got ${JSON.stringify(key)})`);
      typed += key;
      return observe(`Typed ${key} (${typed.length} of ${cells} cells).`);
    },
    reward: () => typed.length / cells,
  };
}
