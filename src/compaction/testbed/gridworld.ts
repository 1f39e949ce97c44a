// A deterministic grid world: the agent moves on a small grid with walls and (optionally) a goal,
// and every step returns a rendered PNG of the grid.
import { loadFeature } from "../../optional-dependency.js";
import type { Environment, Observation } from "../environment.js";
import type { FunctionTool } from "../responses.js";
import { mulberry32 } from "../../random.js";

// An optional peer: a missing one is one line naming what to install (src/optional-dependency.ts).
const { encode: encodePng } = await loadFeature(
  "the compaction test bed (callforest/compaction/testbed)",
  () => import("fast-png"),
);

export interface GridWorldOptions {
  /** Cells per side (default 5). */
  size?: number;
  /** Pixels per cell side (default 16). */
  cell?: number;
  /** Seed for the wall layout (default 0). */
  seed?: number;
  /** Put a goal in the far corner; reaching it ends the episode (default false). */
  goal?: boolean;
}

const DIRECTIONS: Record<string, [number, number]> = { north: [0, -1], south: [0, 1], east: [1, 0], west: [-1, 0] };

const TOOLS: FunctionTool[] = [
  {
    type: "function",
    name: "move",
    description: "Move one cell in a direction.",
    parameters: {
      type: "object",
      properties: { direction: { type: "string", enum: ["north", "south", "east", "west"] } },
      required: ["direction"],
      additionalProperties: false,
    },
  },
  {
    type: "function",
    name: "look",
    description: "Look at the grid again.",
    parameters: { type: "object", properties: {}, additionalProperties: false },
  },
];

export interface GridWorld extends Environment {
  readonly position: { x: number; y: number };
  readonly steps: number;
}

export function createGridWorld(options: GridWorldOptions = {}): GridWorld {
  const size = options.size ?? 5;
  const cell = options.cell ?? 16;
  const rand = mulberry32(options.seed ?? 0);
  const walls = new Set<string>();
  for (let i = 0; i < Math.floor((size * size) / 6); i++) {
    const x = Math.floor(rand() * size);
    const y = Math.floor(rand() * size);
    // keep the start, its neighbours and the goal corner free so the agent can always move
    if (x + y <= 1 || (x === size - 1 && y === size - 1)) continue;
    walls.add(`${x},${y}`);
  }
  const goal = options.goal ? { x: size - 1, y: size - 1 } : null;
  const pos = { x: 0, y: 0 };
  let steps = 0;
  let reached = false;

  function render(): Uint8Array {
    const side = size * cell;
    const data = new Uint8Array(side * side * 3);
    for (let py = 0; py < side; py++) {
      for (let px = 0; px < side; px++) {
        const x = Math.floor(px / cell);
        const y = Math.floor(py / cell);
        const border = px % cell === 0 || py % cell === 0;
        let rgb = border ? [200, 200, 200] : [255, 255, 255];
        if (walls.has(`${x},${y}`)) rgb = [60, 60, 60];
        if (goal && x === goal.x && y === goal.y && !border) rgb = [40, 180, 60];
        if (x === pos.x && y === pos.y && !border) rgb = [220, 40, 40];
        data.set(rgb, (py * side + px) * 3);
      }
    }
    return encodePng({ width: side, height: side, data, channels: 3, depth: 8 });
  }

  const observe = (text: string, done = false): Observation => ({
    text,
    images: [{ bytes: render(), mime: "image/png" }],
    done,
  });

  return {
    instructions: "You control an agent on a grid. Use the tools to explore.",
    tools: TOOLS,
    get position() {
      return { ...pos };
    },
    get steps() {
      return steps;
    },
    start: () =>
      observe(`Task: explore a ${size}x${size} grid${goal ? " and reach the green goal" : ""}. You are at (0,0).`),
    call(name, args) {
      steps++;
      if (name === "look") return observe(`You are at (${pos.x},${pos.y}).`);
      if (name !== "move") return { text: `error: unknown tool ${name}` };
      const direction = (args as { direction?: unknown })?.direction;
      const delta = typeof direction === "string" ? DIRECTIONS[direction] : undefined;
      if (!delta)
        return { text: `error: move needs direction north|south|east|west (got ${JSON.stringify(direction)})` };
      const nx = pos.x + delta[0];
      const ny = pos.y + delta[1];
      if (nx < 0 || ny < 0 || nx >= size || ny >= size || walls.has(`${nx},${ny}`))
        return observe(`Blocked moving ${direction}; still at (${pos.x},${pos.y}).`);
      pos.x = nx;
      pos.y = ny;
      reached = !!goal && nx === goal.x && ny === goal.y;
      return observe(
        reached ? `Moved ${direction} to (${nx},${ny}). Goal reached.` : `Moved ${direction} to (${nx},${ny}).`,
        reached,
      );
    },
    reward: () => (reached ? 1 : 0),
  };
}
