// The overview strip above the picture: every lane's calls as dots across the whole rollout,
// with a frame around what the picture shows. Click or drag in it to go there.
import type { DrawablePlan, Layout, Window } from "../src/draw/index.js";

export class Minimap {
  /** Called with the picture point the user picked. */
  onPick: (x: number, y: number) => void = () => {};
  private l: Layout | null = null;
  private picture: ImageData | null = null;
  private dragging = false;

  constructor(private readonly canvas: HTMLCanvasElement) {
    const pick = (event: PointerEvent) => {
      if (this.l === null) return;
      const box = canvas.getBoundingClientRect();
      const fx = (event.clientX - box.left) / box.width;
      const fy = (event.clientY - box.top) / box.height;
      this.onPick(fx * this.l.width, this.l.lanesTop + fy * (this.l.rowsTop - this.l.lanesTop));
    };
    canvas.addEventListener("pointerdown", (event) => {
      this.dragging = true;
      canvas.setPointerCapture(event.pointerId);
      pick(event);
    });
    canvas.addEventListener("pointermove", (event) => this.dragging && pick(event));
    canvas.addEventListener("pointerup", () => (this.dragging = false));
  }

  clear(): void {
    this.l = null;
    this.picture = null;
    this.canvas.hidden = true;
  }

  /** Draws the overview of a layout (only when it changed), then the frame. */
  show(plan: DrawablePlan, l: Layout, visible: Window): void {
    const canvas = this.canvas;
    canvas.hidden = false;
    const width = Math.max(100, canvas.clientWidth);
    const height = Math.max(24, Math.min(72, 2 * l.lanes.length + 8));
    if (this.l !== l || canvas.width !== width) {
      this.l = l;
      canvas.width = width;
      canvas.height = height;
      const g = canvas.getContext("2d")!;
      g.fillStyle = "#fff";
      g.fillRect(0, 0, width, height);
      const sx = width / l.width;
      const span = Math.max(1, l.rowsTop - l.lanesTop);
      const sy = height / span;
      for (const call of plan.forest) {
        const lane = l.laneOf.get(call.agent)!;
        g.fillStyle = call.eligible ? lane.colour : "#bbb";
        g.fillRect(
          Math.floor(l.x.get(call.id)! * sx),
          Math.floor((lane.y - l.lanesTop) * sy),
          Math.max(1, Math.ceil(l.scale.boxW * sx)),
          Math.max(1, Math.ceil(lane.height * sy)),
        );
      }
      this.picture = g.getImageData(0, 0, width, height);
    }
    this.view(visible);
  }

  /** The frame around what the picture shows. */
  view(visible: Window): void {
    const l = this.l;
    if (l === null || this.picture === null) return;
    const g = this.canvas.getContext("2d")!;
    g.putImageData(this.picture, 0, 0);
    const sx = this.canvas.width / l.width;
    const sy = this.canvas.height / Math.max(1, l.rowsTop - l.lanesTop);
    g.strokeStyle = "#1d232b";
    g.lineWidth = 1.5;
    const x = visible.x * sx;
    const y = (visible.y - l.lanesTop) * sy;
    g.strokeRect(
      Math.max(1, x),
      Math.max(1, y),
      Math.min(this.canvas.width - 2, visible.width * sx),
      Math.min(this.canvas.height - 2, visible.height * sy),
    );
  }
}
