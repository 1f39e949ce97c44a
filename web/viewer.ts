// The forest picture on the page: opens fitted to its box (every column and lane in view; calls
// as marks when there are many), zooms (buttons, keys, Ctrl/⌘+wheel) and pans (scrolling), with
// lanes that collapse and a selection. Only what is on screen (and a screen around it) is drawn:
// a rollout of thousands of calls is a picture of ~100,000 px, drawn a window at a time.
import {
  COL,
  MAX_COL,
  layout,
  renderSvg,
  scaleAt,
  type DrawablePlan,
  type Layout,
  type Window,
} from "../src/draw/index.js";
import type { ForestCall } from "../src/browser.js";
import { renderGutter } from "./gutter.js";
import type { Minimap } from "./minimap.js";

/** Zoom steps of the buttons and keys. */
const STEP = 1.6;
/** Lanes fitted to the box's height are at least this high (their labels stay legible). */
const FIT_MIN_LANE_H = 12;
const FIT_MAX_LANE_H = 28;

export interface Selection {
  /** The selected call's index, or -1. */
  call: number;
  /** The row shown (the call's owner row, or a row picked on its own), or -1. */
  row: number;
}

export class ForestViewer {
  private plan: DrawablePlan | null = null;
  private byId = new Map<string, ForestCall>();
  private l: Layout | null = null;
  private col = COL;
  private fitCol = COL;
  private fitLaneH: number | undefined;
  private collapsed = new Set<string>();
  private drawn: Window | null = null;
  private frame = 0;
  private selection: Selection = { call: -1, row: -1 };
  private readonly layer: HTMLDivElement;
  private readonly wrap: HTMLDivElement;
  private readonly gutter: HTMLDivElement;
  /** Milliseconds the last draw took (layout + SVG + DOM), for the zoom readout and tests. */
  lastDrawMs = 0;

  constructor(
    private readonly host: HTMLElement,
    private readonly minimap: Minimap,
    private readonly readout: HTMLElement,
    private readonly onCollapse: () => void = () => {},
  ) {
    this.wrap = document.createElement("div");
    this.wrap.className = "picture-wrap";
    this.layer = document.createElement("div");
    this.layer.className = "svg-layer";
    this.gutter = document.createElement("div");
    this.gutter.className = "lane-gutter";
    host.addEventListener("scroll", () => this.schedule(), { passive: true });
    host.addEventListener("wheel", (event) => this.wheel(event), { passive: false });
    host.addEventListener("keydown", (event) => this.key(event));
    this.gutter.addEventListener("click", (event) => {
      const agent = (event.target as Element).closest<HTMLElement>("[data-agent]")?.dataset.agent;
      if (agent !== undefined) this.toggle(agent);
    });
    minimap.onPick = (x, y) => this.centerOn(x, y);
    new ResizeObserver(() => this.schedule()).observe(host);
  }

  /** Shows a plan, fitted. A rejected plan is drawn whole (it is small). */
  show(plan: DrawablePlan): void {
    this.plan = plan;
    this.byId = new Map(plan.forest.map((c) => [c.id, c]));
    this.collapsed = new Set();
    this.selection = { call: -1, row: -1 };
    this.wrap.replaceChildren(this.layer, this.gutter);
    this.host.replaceChildren(this.wrap);
    if (plan.report.status !== "ok") {
      this.l = null;
      this.layer.innerHTML = renderSvg(plan, { declaration: false });
      this.gutter.replaceChildren();
      this.wrap.style.width = this.wrap.style.height = "";
      this.minimap.clear();
      this.readout.textContent = "";
      return;
    }
    this.fit();
  }

  clear(): void {
    this.plan = null;
    this.l = null;
    this.host.replaceChildren();
    this.minimap.clear();
  }

  /** Every column in the box's width; lanes as low as fits its height (within legible bounds). */
  fit(): void {
    if (this.plan === null) return;
    const probe = layout(this.plan, { collapsed: this.collapsed });
    const width = Math.max(320, this.host.clientWidth);
    const lanes = probe.lanes.length;
    const room = this.host.clientHeight - probe.lanesTop - 12;
    this.fitLaneH = Math.max(FIT_MIN_LANE_H, Math.min(FIT_MAX_LANE_H, Math.floor(room / Math.max(1, lanes))));
    const fitted = layout(this.plan, { fit: width, laneH: this.fitLaneH, collapsed: this.collapsed });
    this.fitCol = fitted.scale.col;
    this.col = this.fitCol;
    this.relayout(() => ({ left: 0, top: 0 }));
  }

  /** Zooms by `factor`, keeping the picture point under (clientX) in place; default: the box's middle. */
  zoomBy(factor: number, clientX?: number): void {
    if (this.l === null) return;
    const box = this.host.getBoundingClientRect();
    const ax = clientX === undefined ? this.host.clientWidth / 2 : clientX - box.left;
    this.zoomTo(this.col * factor, ax);
  }

  /** The detail scale (boxes with ids), around the box's middle. */
  detail(): void {
    if (this.l !== null) this.zoomTo(COL, this.host.clientWidth / 2);
  }

  private zoomTo(col: number, ax: number): void {
    const l = this.l!;
    const next = Math.max(Math.min(this.fitCol, COL), Math.min(MAX_COL, col));
    if (next === this.col) return;
    const column = (this.host.scrollLeft + ax - l.left) / l.scale.col;
    const laneAt = this.laneIndexAt(this.host.scrollTop + this.host.clientHeight / 2);
    this.col = next;
    this.relayout((n) => ({
      left: n.left + column * n.scale.col - ax,
      top: laneAt < 0 ? this.host.scrollTop : n.lanes[laneAt].y - this.host.clientHeight / 2,
    }));
  }

  private laneIndexAt(y: number): number {
    const lanes = this.l?.lanes ?? [];
    for (let i = 0; i < lanes.length; i++) if (y < lanes[i].y + lanes[i].height) return i;
    return lanes.length - 1;
  }

  /** Collapses or expands an agent's lane (with its subagents). */
  toggle(agent: string): void {
    if (this.collapsed.has(agent)) this.collapsed.delete(agent);
    else this.collapsed.add(agent);
    this.relayout(() => ({ left: this.host.scrollLeft, top: this.host.scrollTop }));
    this.onCollapse();
  }

  /** Collapses every lane that has subagents (top level first: one click folds a rollout to its leaders). */
  collapseAll(): void {
    if (this.l === null) return;
    this.collapsed = new Set(
      this.l.lanes.filter((lane) => lane.depth === 0 && lane.subagents > 0).map((lane) => lane.agent),
    );
    this.relayout(() => ({ left: this.host.scrollLeft, top: 0 }));
    this.onCollapse();
  }

  expandAll(): void {
    this.collapsed = new Set();
    this.relayout(() => ({ left: this.host.scrollLeft, top: this.host.scrollTop }));
    this.onCollapse();
  }

  isCollapsed(agent: string): boolean {
    return this.collapsed.has(agent);
  }

  /** Marks a call (its path to the root, its children, its owner row) or a row; scrolls it into view. */
  select(selection: Selection, scroll = true): void {
    this.selection = selection;
    if (this.plan === null || this.l === null) return;
    const call = selection.call >= 0 ? this.plan.forest[selection.call] : undefined;
    // A call folded into a collapsed lane: expand the lanes that hide it (nested collapses one by one).
    while (call !== undefined && this.l.folded.has(call.agent)) {
      this.collapsed.delete(this.l.laneOf.get(call.agent)!.agent);
      this.relayout(() => ({ left: this.host.scrollLeft, top: this.host.scrollTop }));
    }
    if (scroll) {
      const l = this.l!;
      if (call !== undefined) {
        const lane = l.laneOf.get(call.agent)!;
        this.scrollToShow(l.x.get(call.id)!, lane.y, l.scale.boxW, lane.height);
      } else if (selection.row >= 0) {
        this.scrollToShow(this.host.scrollLeft, l.rowsTop + selection.row * l.scale.rowH, 0, l.scale.rowH);
      }
    }
    // Only the marks change: redraw only if the scroll left the drawn window.
    this.draw(false);
    this.mark();
  }

  /**
   * Brings a call into view readably: at the detail scale (boxes with ids) when the picture shows
   * marks, centred on the call; already readable, only scrolled to it. The page scrolls to the
   * picture too. Select the call first (that expands a lane it is folded into).
   */
  reveal(index: number): void {
    const call = this.plan?.forest[index];
    if (call === undefined || this.l === null) return;
    if (!this.l.scale.labels) {
      this.col = COL;
      this.relayout((n) => {
        const lane = n.laneOf.get(call.agent)!;
        return {
          left: n.x.get(call.id)! + n.scale.boxW / 2 - (this.host.clientWidth + n.left) / 2,
          top: lane.y + lane.height / 2 - this.host.clientHeight / 2,
        };
      });
    }
    this.host.scrollIntoView({ block: "nearest" });
  }

  /** Scrolls so the rectangle is in view (centred when it was not). */
  private scrollToShow(x: number, y: number, w: number, h: number): void {
    const host = this.host;
    const gutter = this.l!.left;
    if (x < host.scrollLeft + gutter || x + w > host.scrollLeft + host.clientWidth)
      host.scrollLeft = x + w / 2 - (host.clientWidth + gutter) / 2;
    if (y < host.scrollTop || y + h > host.scrollTop + host.clientHeight)
      host.scrollTop = y + h / 2 - host.clientHeight / 2;
  }

  /** Centres the view on a picture point (from the minimap). */
  private centerOn(x: number, y: number): void {
    this.host.scrollLeft = x - this.host.clientWidth / 2;
    this.host.scrollTop = y - this.host.clientHeight / 2;
    this.draw(false);
  }

  /** The current layout (tests and the find box read positions from it). */
  get current(): Layout | null {
    return this.l;
  }

  get zoom(): { col: number; fitCol: number; labels: boolean } {
    return { col: this.col, fitCol: this.fitCol, labels: this.l?.scale.labels ?? true };
  }

  private relayout(scrollTo: (l: Layout) => { left: number; top: number }): void {
    if (this.plan === null) return;
    const started = performance.now();
    const fitted = this.col === this.fitCol;
    const scale = scaleAt(this.col, this.fitLaneH);
    this.l = layout(
      this.plan,
      fitted
        ? { fit: Math.max(320, this.host.clientWidth), laneH: this.fitLaneH, collapsed: this.collapsed }
        : { scale, collapsed: this.collapsed },
    );
    const l = this.l;
    this.wrap.style.width = `${l.width}px`;
    this.wrap.style.height = `${l.height}px`;
    renderGutter(this.gutter, l);
    const to = scrollTo(l);
    this.host.scrollLeft = to.left;
    this.host.scrollTop = to.top;
    this.drawn = null;
    this.draw(true, started);
    const percent = Math.round((100 * l.scale.col) / COL);
    this.readout.textContent = `${percent}%${fitted ? " (fit)" : ""}${l.scale.labels ? "" : " · marks"}`;
  }

  private schedule(): void {
    if (this.frame !== 0) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw(false);
    });
  }

  /** Draws the window around what is on screen, unless the last one still covers it. */
  private draw(force: boolean, started = performance.now()): void {
    if (this.plan === null || this.l === null) return;
    const host = this.host;
    const visible = { x: host.scrollLeft, y: host.scrollTop, width: host.clientWidth, height: host.clientHeight };
    const d = this.drawn;
    const covered =
      d !== null &&
      visible.x >= d.x &&
      visible.y >= d.y &&
      visible.x + visible.width <= d.x + d.width &&
      visible.y + visible.height <= d.y + d.height;
    if (covered && !force) {
      this.minimap.view(visible);
      return;
    }
    // A screen more on every side, so small scrolls draw nothing.
    const window = {
      x: visible.x - visible.width,
      y: visible.y - visible.height,
      width: 3 * visible.width,
      height: 3 * visible.height,
    };
    this.layer.innerHTML = renderSvg(this.plan, { declaration: false, layout: this.l, window });
    this.drawn = window;
    this.mark();
    this.minimap.show(this.plan, this.l, visible);
    this.lastDrawMs = performance.now() - started;
    this.host.dataset.drawMs = this.lastDrawMs.toFixed(1);
    performance.mark("callforest:picture"); // when the picture was last drawn
    // ...and the first frame after it (tests measure time to first paint by it)
    requestAnimationFrame(() => setTimeout(() => performance.mark("callforest:painted"), 0));
  }

  /** Classes for the selection: the call, its path to the root, its children, its owner row. */
  private mark(): void {
    const svg = this.layer.querySelector("svg");
    const plan = this.plan;
    if (svg === null || plan === null) return;
    const { call, row } = this.selection;
    svg.classList.toggle("has-selection", call >= 0);
    if (call >= 0) {
      const selected = plan.forest[call];
      const path = new Set<number>();
      for (
        let c = this.byId.get(selected.parent ?? "");
        c !== undefined;
        c = c.parent === null ? undefined : this.byId.get(c.parent)
      )
        path.add(c.index);
      const children = new Set(selected.children.map((id) => this.byId.get(id)!.index));
      for (const g of svg.querySelectorAll<SVGGElement>("g.cf-call")) {
        const index = Number(g.dataset.index);
        g.classList.toggle("cf-sel", index === call);
        g.classList.toggle("cf-on-path", path.has(index));
        g.classList.toggle("cf-child", children.has(index));
      }
    }
    for (const g of svg.querySelectorAll<SVGGElement>("g.cf-row"))
      g.classList.toggle("cf-owner", Number(g.dataset.row) === row);
  }

  private wheel(event: WheelEvent): void {
    if (!(event.ctrlKey || event.metaKey) || this.l === null) return;
    event.preventDefault(); // the page would zoom instead
    this.zoomBy(Math.exp(-event.deltaY / 300), event.clientX);
  }

  private key(event: KeyboardEvent): void {
    if (event.target !== this.host) return;
    if (event.key === "+" || event.key === "=") this.zoomBy(STEP);
    else if (event.key === "-" || event.key === "_") this.zoomBy(1 / STEP);
    else if (event.key === "0") this.fit();
    else if (event.key === "1") this.detail();
    else return;
    event.preventDefault();
  }
}

export { STEP as ZOOM_STEP };
