// The callforest page: open or drop a rollout file, plan it here with the WASM core, and show the
// picture, the report, the rows and one row's tokens. Nothing is sent anywhere: the only fetches
// are the page's own inlined assets and, from `callforest view`, the preloaded file (same origin).
import { init, reportToJson, rowToJson, type Callforest, type Plan, type Report } from "../src/browser.js";
import { FROM_OPTIONS, parseFrom, type FromOption } from "../src/formats/index.js";
import { reportOfImportRejection, usePlan, planImported } from "../src/plan-imported.js";
import {
  XML_DECLARATION,
  binsSavingsLine,
  faultOf,
  fileSafeId,
  renderBinsSvg,
  renderPackedSvg,
  renderSvg,
  savingsLine,
  savingsOf,
  type DrawablePlan,
} from "../src/draw/index.js";
import { countOf, errorLine } from "../src/messages.js";
import {
  holdsOneValue,
  jsonlItems,
  parseJsonInput,
  type ReadItem as LoadedItem,
  type ReadOptions,
} from "../src/formats/text.js";
import { TOKEN_FILE_SUFFIX, isTokenFileName, memoryTokenSource } from "../src/formats/token-files.js";
import { renderReport, renderRowsTable } from "./panels.js";
import { renderStrip } from "./strip.js";
import { ForestViewer, ZOOM_STEP } from "./viewer.js";
import { Minimap } from "./minimap.js";
import { Finder } from "./finder.js";
import { renderDetails } from "./details.js";
import { TokenizerPicker } from "./tokenizer.js";
import { breakView, breaksOf, renderBreak, renderBreaksList } from "./breaks.js";
import { parquetWriter, parquetWriterLoaded } from "./parquet.js";

/**
 * One rollout of the open file: where it is and its report. Its parsed value is not kept (a
 * JSONL file's rollouts would take many times the file's size as JS arrays): load() reads it
 * again from the file's bytes when it is shown.
 */
interface Entry {
  where: string;
  report: Report;
  load(): LoadedItem;
}

interface State {
  cf: Callforest | null;
  entries: Entry[];
  selected: number;
  plan: Plan | null;
  /** What the picture draws (the plan's, or a rejected rollout's report alone). */
  drawable: DrawablePlan | null;
  /** The selected call's index, -1 for none; the row shown, -1 for none. */
  call: number;
  row: number;
  /** The prefix break shown (an index into the report's prefix_break diagnostics), -1 for none. */
  brk: number;
  /** The capacity control's tokens (null: none, the packed view shows packed trees). */
  capacity: number | null;
  /** The shown rollout planned again in bins of `capacity` (its report may be a rejection). */
  bins: { plan: Plan; report: Report; capacity: number } | null;
}

const state: State = {
  cf: null,
  entries: [],
  selected: -1,
  plan: null,
  drawable: null,
  call: -1,
  row: -1,
  brk: -1,
  capacity: null,
  bins: null,
};

/** Plans a download still reads (their rows are views into the core's memory), and those to release after it. */
const inUse = new Set<Plan>();
const releaseAfterUse = new Set<Plan>();

/** Releases a plan the page no longer shows, once no download reads it. */
function dropPlan(plan: Plan | null | undefined): void {
  if (plan == null) return;
  if (inUse.has(plan)) releaseAfterUse.add(plan);
  else plan.release();
}

/** Resolves once state.cf is set: a file opened while the core loads waits for it. */
let coreReady!: () => void;
const coreLoaded = new Promise<void>((resolve) => (coreReady = resolve));

function element<T extends HTMLElement = HTMLElement>(id: string): T {
  return document.getElementById(id) as T;
}

function setStatus(text: string, error = false): void {
  const status = element("status");
  status.textContent = text;
  status.classList.toggle("error", error);
}

function reportOf(cf: Callforest, item: LoadedItem): Report {
  if (!item.result.ok) return reportOfImportRejection(item.result, item.line);
  return usePlan(cf, item.result, item.line, (_plan, report) => report);
}

/** Bumped as every open starts: an earlier open (still reading or planning) gives way to a newer one. */
let opens = 0;
/** `?from=` (what `callforest view --from` passes): how every file opened in the page is read. */
let pageFrom: FromOption = "auto";
/** How long the page plans before it lets the browser draw (and take clicks) again. */
const SLICE_MS = 50;

/**
 * Calls `each` on every item of a file (a JSONL file line by line, yielding to the browser every
 * SLICE_MS with `doing` and the progress in the status). False when a newer open superseded it.
 */
async function eachItem(
  name: string,
  text: string | Uint8Array,
  read: ReadOptions,
  open: number,
  doing: string,
  each: (item: LoadedItem, again: () => LoadedItem) => void,
): Promise<boolean> {
  const bytes = typeof text === "string" ? new TextEncoder().encode(text) : text;
  if (holdsOneValue(name, bytes)) {
    // One JSON value: parsed whole either way, so its items are kept.
    for (const item of parseJsonInput(name, bytes, read)) each(item, () => item);
    return true;
  }
  let sliceStart = performance.now();
  let count = 0;
  for (const { item, end, again } of jsonlItems(name, bytes, read)) {
    each(item, again);
    count++;
    if (performance.now() - sliceStart > SLICE_MS) {
      setStatus(`${name}: ${doing}… ${count} rollouts, ${Math.floor((100 * end) / bytes.length)}%`);
      await new Promise((resolve) => setTimeout(resolve, 0));
      if (open !== opens) return false;
      sliceStart = performance.now();
    }
  }
  return true;
}

/** Each rollout of a file with its report (its value is read again when shown). Null: superseded. */
async function planEntries(
  cf: Callforest,
  name: string,
  text: string | Uint8Array,
  read: ReadOptions,
  open: number,
): Promise<Entry[] | null> {
  const entries: Entry[] = [];
  firstPlan?.release();
  firstPlan = null;
  const planned = await eachItem(name, text, read, open, "planning", (item, again) => {
    // The first rollout is shown at once: its plan (with the packed trees) is kept for that, not made twice.
    if (entries.length === 0 && item.result.ok) {
      const { plan, report } = planImported(cf, item.result, item.line, { trees: true });
      firstPlan = plan;
      entries.push({ where: item.where, report, load: again });
    } else entries.push({ where: item.where, report: reportOf(cf, item), load: again });
  });
  if (!planned) {
    (firstPlan as Plan | null)?.release(); // (assigned in the callback: TypeScript cannot see it)
    firstPlan = null;
  }
  return planned ? entries : null;
}

/** The first rollout's plan of the file being opened, until showRollout(0) takes it. */
let firstPlan: Plan | null = null;

/**
 * Plans every rollout of a file for its report, then shows the first one. The file is read by the
 * CLI's rules (src/formats/text.ts); as bytes, invalid UTF-8 is malformed_json there as here.
 */
async function openText(
  name: string,
  text: string | Uint8Array,
  read: ReadOptions = {},
  open = ++opens,
): Promise<void> {
  const cf = state.cf;
  if (cf === null) throw new Error("the core is still loading: open the file again in a moment");
  if (open !== opens) return; // a newer open started while this one was reading
  // Everything that can fail comes first, so a failure leaves the page as it was.
  // Without token files, the page's own advice on where gym-observed tokens come from.
  const entries = await planEntries(cf, name, text, { tokens: memoryTokenSource(new Map()), ...read }, open);
  if (entries === null) return; // another file was opened meanwhile
  performance.mark("callforest:planned");
  const options = document.createDocumentFragment(); // appended one by one: no argument spreading
  entries.forEach((entry, i) => {
    const option = document.createElement("option");
    option.value = String(i);
    const r = entry.report;
    const status = r.status === "ok" ? `${r.rows} rows` : `rejected (${r.reason})`;
    option.textContent = `${entry.where} · ${r.rollout_id ?? "(no id)"} · ${status}`;
    options.append(option);
  });
  dropPlan(state.plan);
  state.plan = null;
  dropPlan(state.bins?.plan);
  state.bins = null;
  state.entries = entries;
  const select = element<HTMLSelectElement>("rollout-select");
  select.replaceChildren(options);
  element("rollouts").hidden = state.entries.length < 2;
  const rejected = state.entries.filter((e) => e.report.status === "rejected").length;
  setStatus(
    `${name}: ${state.entries.length} rollout${state.entries.length === 1 ? "" : "s"}` +
      `${rejected > 0 ? `, ${rejected} rejected` : ""}`,
  );
  if (state.entries.length === 0) {
    clearViews();
    setStatus(`${name}: no rollouts in this file`, true);
  } else await showRollout(0);
  document.body.dataset.loads = String(Number(document.body.dataset.loads ?? "0") + 1);
}

function clearViews(): void {
  state.selected = -1;
  for (const id of ["report", "rows-table", "strip", "details", "packed-host", "breaks-list", "break-view"])
    element(id).replaceChildren();
  element("breaks-section").hidden = true;
  viewer().clear();
  state.drawable = null;
  element("strip-title").textContent = "";
  element("savings").textContent = "";
  element("views").hidden = true;
}

let forestViewer: ForestViewer | null = null;
/** The picture's viewer, made on first use (it measures its box). */
function viewer(): ForestViewer {
  forestViewer ??= new ForestViewer(
    element("svg-host"),
    new Minimap(element<HTMLCanvasElement>("minimap")),
    element("zoom-level"),
  );
  return forestViewer;
}
let finder: Finder | null = null;
let tokenizer: TokenizerPicker | null = null;

/** What the picture shows: the forest (and the rows), the packed trees, or the bins of a capacity. */
type Shown =
  | { layout: "rows"; plan: Plan | null }
  | { layout: "trees"; plan: Plan }
  | { layout: "bins"; plan: Plan; report: Report; capacity: number };

function shown(): Shown {
  const plan = state.plan;
  if (plan === null || !element<HTMLInputElement>("packed-toggle").checked) return { layout: "rows", plan };
  return state.bins === null ? { layout: "trees", plan } : { layout: "bins", ...state.bins };
}

/** How a download of what is shown is named: as `draw` names a rollout's file, and which layout. */
function downloadName(view: Shown, extension: string): string {
  const id = state.entries[state.selected]?.report.rollout_id ?? "rollout";
  const layout = view.layout === "rows" ? "" : view.layout === "trees" ? ".packed" : `.bins-${view.capacity}`;
  return `${fileSafeId(id)}${layout}.${extension}`;
}

/** The packed picture, as `callforest draw --layout packed [--capacity N]` draws it. */
function packedSvg(view: Exclude<Shown, { layout: "rows" }>, width: number | undefined, declaration: boolean): string {
  const plan = state.plan!;
  const drawn = { forest: plan.forest, agents: plan.agents, rows: plan.rows };
  if (view.layout === "trees")
    return renderPackedSvg({ ...drawn, report: state.drawable!.report, trees: plan.trees }, { width, declaration });
  // A rejected report draws as its reason, as every rejected rollout does.
  const { report, capacity } = view;
  return renderBinsSvg({ ...drawn, report, bins: view.plan.bins, capacity }, { width, declaration });
}

/** The line under the picture: what the packed trees save, or what the bins cost. */
function showSavings(view: Shown): void {
  const plan = state.plan;
  element("savings").textContent =
    plan === null
      ? ""
      : view.layout === "bins" && view.report.status === "ok"
        ? `bins of at most ${view.capacity} tokens: ${binsSavingsLine(view.report)}`
        : `packed: ${savingsLine(savingsOf(plan))}`;
}

/** The packed layout instead of the forest, when "Packed view" is on: the bins, with a capacity. */
function showPacked(): void {
  const view = shown();
  const on = view.layout !== "rows";
  const host = element("packed-host");
  host.hidden = !on;
  element("svg-host").hidden = on;
  element("minimap").hidden = on || state.plan === null;
  showSavings(view);
  if (!on) return host.replaceChildren();
  if (view.layout === "bins" && view.report.status === "rejected") {
    // A rollout whose longest row does not fit: one line, its reason (SPEC's row_exceeds_capacity).
    const { reason, detail } = view.report;
    const line = document.createElement("p");
    line.className = "bins-rejected";
    line.textContent = `bins of at most ${view.capacity} tokens: rejected, ${reason}${detail ? `: ${detail}` : ""}`;
    return host.replaceChildren(line);
  }
  host.innerHTML = packedSvg(view, Math.max(720, element("picture").clientWidth - 2), false);
}

/** Plans the shown rollout (`item`, read again if not given) in bins of state.capacity. */
function planBins(shownItem?: LoadedItem): void {
  dropPlan(state.bins?.plan);
  state.bins = null;
  const entry = state.entries[state.selected];
  if (state.capacity === null || state.plan === null || entry === undefined) return;
  const item = shownItem ?? entry.load();
  if (!item.result.ok) return;
  const capacity = state.capacity;
  const { plan, report } = planImported(state.cf!, item.result, item.line, { capacity });
  state.bins = { plan, report, capacity };
}

/** The capacity control: empty for the packed trees, else a whole number of tokens (as `rows --capacity`). */
function setCapacity(input: HTMLInputElement): void {
  const text = input.value.trim();
  const value = Number(text);
  if (input.validity.badInput || (text !== "" && (!/^\d+$/.test(text) || value < 1 || value > 2 ** 31 - 1))) {
    setStatus(`the capacity must be a whole number of tokens from 1 to ${2 ** 31 - 1}`, true);
    return;
  }
  state.capacity = text === "" ? null : value;
  if (state.capacity !== null) element<HTMLInputElement>("packed-toggle").checked = true;
  planBins();
  showPacked();
}

/**
 * Selects a call: marked in the picture with its path, children and owner row; its details and
 * owner row's tokens shown.
 */
function selectCall(index: number, scroll = true): void {
  const plan = state.plan;
  if (plan === null || plan.forest[index] === undefined) return;
  const owner = plan.forest[index].ownerRow;
  state.call = index;
  // the details first: beside the picture, they narrow it before it scrolls to the call
  renderDetails(element("details"), plan, index, tokenizer?.decoder ?? null);
  viewer().select({ call: index, row: owner }, scroll);
  if (owner >= 0) showRow(owner, false);
  // A call with a prefix break shows it.
  const id = plan.forest[index].id;
  const brk = breaksOf(plan).findIndex((d) => d.call === id);
  if (brk >= 0) showBreak(brk, false);
}

/** Lists the shown rollout's prefix breaks (the section is hidden without any), the first shown. */
function showBreaks(): void {
  const plan = state.plan;
  const breaks = plan === null ? [] : breaksOf(plan);
  element("breaks-section").hidden = breaks.length === 0;
  element("breaks-count").textContent = breaks.length === 0 ? "" : String(breaks.length);
  state.brk = -1;
  element("break-view").replaceChildren();
  element("breaks-list").replaceChildren();
  if (breaks.length > 0) showBreak(0, false);
}

/** Shows break `index`: its strips side by side and its cause; `select`: its call in the picture too. */
function showBreak(index: number, select = true): void {
  const plan = state.plan;
  if (plan === null) return;
  const breaks = breaksOf(plan);
  const d = breaks[index];
  if (d === undefined) return;
  // Selecting its call shows the call's break (selectCall): drawn once, there.
  if (select) return selectCall(plan.forest.findIndex((c) => c.id === d.call));
  state.brk = index;
  renderBreaksList(element("breaks-list"), breaks, index, (i) => showBreak(i));
  const view = breakView(plan, d);
  if (view !== null) renderBreak(element("break-view"), view, tokenizer?.decoder ?? null);
}

function selectRow(index: number, scroll = true): void {
  state.call = -1;
  element("details").replaceChildren();
  viewer().select({ call: -1, row: index }, scroll);
  showRow(index, false);
}

async function showRollout(index: number): Promise<void> {
  dropPlan(state.plan);
  state.plan = null;
  dropPlan(state.bins?.plan);
  state.bins = null;
  state.selected = index;
  element<HTMLSelectElement>("rollout-select").value = String(index);
  const entry = state.entries[index];
  const report = entry.report;
  const item = entry.load();
  let drawable: DrawablePlan;
  const kept = index === 0 ? firstPlan : null;
  firstPlan = null;
  if (kept !== null && report.status !== "ok") kept.release();
  if (item.result.ok && report.status === "ok") {
    // With the packed trees: the savings line and the packed view need them.
    state.plan = kept ?? state.cf!.plan(item.result.rollout, { line: item.line, trees: true });
    drawable = { report, forest: state.plan.forest, agents: state.plan.agents, rows: state.plan.rows };
  } else {
    drawable = { report, forest: [], agents: [], rows: [] };
  }
  state.drawable = drawable;
  state.call = -1;
  state.row = -1;
  const fault = faultOf(report);
  const faultCall = fault !== null && item.result.ok ? item.result.rollout.calls[fault.index] : undefined;
  renderReport(element("report"), report, fault, faultCall);
  element("views").hidden = false; // before the viewer measures its box
  element("details").replaceChildren();
  element("toolbar").hidden = state.plan === null;
  element("svg-host").hidden = false;
  viewer().show(drawable);
  finder!.reset(drawable.forest, drawable.rows.length);
  planBins(item);
  showPacked();
  element("rows-section").hidden = state.plan === null;
  element("tokens-section").hidden = state.plan === null;
  showBreaks();
  element("rows-table").replaceChildren();
  element("strip").replaceChildren();
  if (state.plan === null) return;
  // The picture is painted first; the rows table and a long row's tokens (thousands of cells)
  // come a frame later.
  const plan = state.plan;
  await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  if (state.plan !== plan) return; // another rollout was shown meanwhile
  renderRowsTable(element("rows-table"), plan, (row) => selectRow(row, true));
  if (plan.rows.length > 0 && state.row < 0) showRow(0);
}

/** Shows a row's tokens (and marks it in the rows table; `mark`: in the picture too). */
function showRow(index: number, mark = true): void {
  const plan = state.plan!;
  const row = plan.rows[index];
  state.row = index;
  if (mark) viewer().select({ call: state.call, row: index }, false);
  for (const tr of element("rows-table").querySelectorAll("tr[data-row]")) {
    tr.classList.toggle("selected", (tr as HTMLElement).dataset.row === String(index));
  }
  let trainedTokens = 0;
  for (let i = 0; i < row.numTokens; i++) trainedTokens += (row.lossMask[i >> 3] >> (i & 7)) & 1;
  element("strip-title").textContent =
    `row ${row.index} · leaf ${row.leaf} · ${row.numTokens} tokens, ${trainedTokens} trained · reward ${row.reward}`;
  renderStrip(element("strip"), row, plan.forest, undefined, tokenizer?.decoder ?? null);
}

/**
 * Opens a rollout file; for gym-observed captures, open (or drop) it together with its
 * `<rollout_id>.tokens.jsonl` files, which stand in for the CLI's `--tokens DIR`.
 */
async function openFiles(files: readonly File[]): Promise<void> {
  const tokenFiles = files.filter((file) => isTokenFileName(file.name));
  const rollouts = files.filter((file) => !isTokenFileName(file.name));
  if (rollouts.length !== 1) {
    throw new Error(
      rollouts.length === 0
        ? "open a rollout file too (token files only give a gym-observed capture its tokens)"
        : "open one rollout file at a time (with its .tokens.jsonl files)",
    );
  }
  const [file] = rollouts;
  const open = ++opens;
  setStatus(`reading ${file.name}…`);
  await coreLoaded;
  const tokens = new Map<string, Uint8Array>();
  for (const tokenFile of tokenFiles) tokens.set(tokenFile.name, new Uint8Array(await tokenFile.arrayBuffer()));
  await openText(
    file.name,
    new Uint8Array(await file.arrayBuffer()),
    { from: pageFrom, tokens: memoryTokenSource(tokens) },
    open,
  );
}

/** A same-origin URL for `path`, or an error naming the query parameter it came from. */
function ownUrl(path: string, parameter: string): URL {
  const url = new URL(path, location.href);
  if (url.origin !== location.origin)
    throw new Error(`?${parameter}= must name a file on this page's own origin, not ${url.origin}`);
  return url;
}

/**
 * Opens a same-origin file named by ?input= (what `callforest view INPUT` prints), read as
 * ?from= says; with ?tokens=BASE, the gym-observed token files its rollouts ask for are fetched
 * from BASE (`view --tokens DIR` serves them there).
 */
async function openUrl(path: string, from: FromOption, tokensBase: string | null): Promise<void> {
  const open = ++opens;
  const url = ownUrl(path, "input");
  const response = await fetch(url);
  if (!response.ok) throw new Error(`cannot load ${path}: HTTP ${response.status}`);
  const name = decodeURIComponent(url.pathname.split("/").pop() || path);
  const bytes = new Uint8Array(await response.arrayBuffer());
  performance.mark("callforest:fetched");
  const tokens = new Map<string, Uint8Array>();
  let source = memoryTokenSource(tokens);
  if (tokensBase !== null) {
    // Which token files the rollouts name: one pass that only records them, then fetch those.
    const wanted = new Set<string>();
    const recorder = { from, tokens: { describe: (id: string) => id, load: (id: string) => (wanted.add(id), null) } };
    if (!(await eachItem(name, bytes, recorder, open, "finding token files", () => {}))) return;
    let fetched = 0;
    for (const id of wanted) {
      const file = `${id}${TOKEN_FILE_SUFFIX}`;
      setStatus(`${name}: fetching token files… ${fetched++} of ${wanted.size}`);
      const found = await fetch(ownUrl(tokensBase + encodeURIComponent(file), "tokens"));
      if (found.ok) tokens.set(file, new Uint8Array(await found.arrayBuffer()));
      if (open !== opens) return;
    }
    source = {
      ...source,
      notFound: (id) => `${id}${TOKEN_FILE_SUFFIX} is not in \`callforest view --tokens\`'s directory`,
    };
  }
  await openText(name, bytes, { from, tokens: source }, open);
}

async function openExample(): Promise<void> {
  const open = ++opens;
  await coreLoaded;
  const response = await fetch(new URL("../examples/login-bug.json", import.meta.url));
  await openText("login-bug.json", new Uint8Array(await response.arrayBuffer()), {}, open);
}

function save(blob: Blob, name: string): void {
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = name;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 0);
}

function downloadSvg(): void {
  if (state.drawable === null) return;
  // The whole picture as `callforest draw` writes it (not the zoomed window): the forest at the
  // detail scale, or (packed view) the packed trees or bins at draw's width.
  const view = shown();
  const svg =
    view.layout === "rows"
      ? `${XML_DECLARATION}\n${renderSvg(state.drawable, { declaration: false })}`
      : packedSvg(view, undefined, true);
  save(new Blob([svg], { type: "image/svg+xml" }), downloadName(view, "svg"));
}

/** True while a Parquet file is being written (a second click waits for it). */
let writingParquet = false;

/**
 * What the page shows as Parquet, the bytes `callforest rows <file> -o x.parquet` writes for this
 * rollout: its rows, or in the packed view its packed trees (`--layout packed`) or its bins
 * (`--capacity N`). A rejected rollout has none: the file holds the columns and no records, as
 * the CLI's does.
 */
async function downloadParquet(): Promise<void> {
  if (state.selected < 0 || writingParquet) return;
  const view = shown();
  const name = downloadName(view, "parquet");
  const button = element<HTMLButtonElement>("download-parquet");
  const plan = view.plan;
  writingParquet = true;
  button.disabled = true;
  if (plan !== null) inUse.add(plan);
  try {
    if (!parquetWriterLoaded()) setStatus(`${name}: unpacking the Parquet writer…`);
    const writer = await parquetWriter();
    setStatus(`${name}: writing…`);
    const layout = view.layout;
    const bytes = await writer.toParquet(plan ?? [], { layout });
    save(new Blob([bytes as Uint8Array<ArrayBuffer>], { type: "application/vnd.apache.parquet" }), name);
    const [records, noun] =
      layout === "rows"
        ? [plan?.rows.length ?? 0, "row"]
        : layout === "trees"
          ? [view.plan.trees.length, "packed tree"]
          : [view.plan.bins.length, "bin"];
    setStatus(`${name}: ${countOf(records, noun)}, ${(bytes.length / 1024).toFixed(1)} KB`);
  } catch (error) {
    setStatus(`${name}: ${errorLine(error)}`, true); // one line, never a stack
  } finally {
    writingParquet = false;
    button.disabled = false;
    if (plan !== null) {
      inUse.delete(plan);
      if (releaseAfterUse.delete(plan)) plan.release();
    }
  }
}

function wire(): void {
  const fail = (error: unknown) => setStatus(error instanceof Error ? error.message : String(error), true);
  element<HTMLInputElement>("file").addEventListener("change", (event) => {
    const files = [...((event.target as HTMLInputElement).files ?? [])];
    if (files.length > 0) openFiles(files).catch(fail);
  });
  element("example").addEventListener("click", () => openExample().catch(fail));
  element("download-svg").addEventListener("click", downloadSvg);
  element("download-parquet").addEventListener("click", () => void downloadParquet());
  const capacity = element<HTMLInputElement>("capacity");
  capacity.addEventListener("change", () => setCapacity(capacity));
  // Clicking a call (or its tick in a collapsed lane) selects it and shows the tokens of the row
  // that trains it; clicking a row's path shows that row.
  element("svg-host").addEventListener("click", (event) => {
    const plan = state.plan;
    const target = event.target as Element;
    if (plan === null) return;
    const row = target.closest("g.cf-row")?.getAttribute("data-row");
    // By index: an id the SVG had to alter (characters XML forbids, a CR) would match no call.
    const index = target.closest("g.cf-call, .cf-tick")?.getAttribute("data-index");
    if (index != null) selectCall(Number(index), false);
    else if (row != null) selectRow(Number(row), false);
  });
  element("zoom-fit").addEventListener("click", () => viewer().fit());
  element("zoom-in").addEventListener("click", () => viewer().zoomBy(ZOOM_STEP));
  element("zoom-out").addEventListener("click", () => viewer().zoomBy(1 / ZOOM_STEP));
  element("zoom-detail").addEventListener("click", () => viewer().detail());
  element("collapse-all").addEventListener("click", () => viewer().collapseAll());
  element("expand-all").addEventListener("click", () => viewer().expandAll());
  element("packed-toggle").addEventListener("change", showPacked);
  finder = new Finder(element<HTMLDataListElement>("find-list"));
  const find = element<HTMLInputElement>("find");
  const runFind = () => {
    const result = finder!.find(find.value);
    const found = result.found;
    element("find-status").textContent =
      found === null
        ? find.value.trim() === ""
          ? ""
          : "no match"
        : result.matches > 1
          ? `${result.nth} of ${result.matches} (Enter: next)`
          : "";
    if (found === null || state.plan === null) return;
    element<HTMLInputElement>("packed-toggle").checked = false;
    showPacked();
    if (found.kind === "row") selectRow(found.row);
    else {
      const index = found.kind === "call" ? found.index : found.first;
      selectCall(index);
      viewer().reveal(index); // a readable zoom, the details beside it
    }
  };
  find.addEventListener("keydown", (event) => {
    if (event.key === "Enter") runFind();
  });
  // A pick from the suggestions (the datalist) finds at once; typing waits for Enter.
  find.addEventListener("input", (event) => {
    if ((event as InputEvent).inputType === "insertReplacementText" || !(event instanceof InputEvent)) runFind();
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "/" && !(event.target instanceof HTMLInputElement || event.target instanceof HTMLSelectElement)) {
      event.preventDefault();
      find.focus();
    }
  });
  tokenizer = new TokenizerPicker(
    element<HTMLSelectElement>("tokenizer"),
    element<HTMLInputElement>("tokenizer-file"),
    (text, error) => setStatus(text, error),
  );
  tokenizer.onChange = () => {
    if (state.plan === null) return;
    if (state.row >= 0) showRow(state.row, false);
    if (state.call >= 0) renderDetails(element("details"), state.plan, state.call, tokenizer!.decoder);
    if (state.brk >= 0) showBreak(state.brk, false);
  };
  element<HTMLSelectElement>("rollout-select").addEventListener("change", (event) => {
    void showRollout(Number((event.target as HTMLSelectElement).value));
  });
  document.addEventListener("dragover", (event) => {
    event.preventDefault();
    document.body.classList.add("dragging");
  });
  document.addEventListener("dragleave", () => document.body.classList.remove("dragging"));
  document.addEventListener("drop", (event) => {
    event.preventDefault();
    document.body.classList.remove("dragging");
    const files = [...(event.dataTransfer?.files ?? [])];
    if (files.length > 0) openFiles(files).catch(fail);
  });
}

/**
 * For tests and the console: the selected rollout's rows and report as the CLI writes them, and
 * the picture's state.
 */
export interface PageHandle {
  backend: string;
  openText(name: string, text: string | Uint8Array, read?: ReadOptions): Promise<void>;
  rowsJsonl(): string;
  reportJson(): string;
  /** The picture: its zoom, the last draw's time, where each lane and call is. */
  picture(): {
    col: number;
    fitCol: number;
    labels: boolean;
    drawMs: number;
    width: number;
    lanes: { agent: string; y: number; height: number; collapsed: boolean }[];
  } | null;
  callBox(index: number): { x: number; y: number; width: number; height: number; folded: boolean } | null;
  /** Whether "Download Parquet" has unpacked the Parquet writer yet. */
  parquetWriterLoaded(): boolean;
}

declare global {
  interface Window {
    callforest?: PageHandle;
  }
}

/**
 * True when another page frames this one (it could trick clicks into it). A server says so with
 * headers (`callforest view` does), but a <meta> CSP cannot carry frame-ancestors, so a page
 * opened from disk or any static server checks for itself.
 */
function framed(): boolean {
  try {
    return window.top !== window.self;
  } catch {
    return true; // a cross-origin parent
  }
}

async function start(): Promise<void> {
  if (framed()) {
    document.body.replaceChildren(
      Object.assign(document.createElement("p"), {
        id: "framed",
        textContent: "callforest refuses to run inside a frame: open it in its own tab.",
      }),
    );
    document.body.dataset.ready = "framed";
    return;
  }
  wire();
  try {
    state.cf = await init();
  } catch (error) {
    // No WebAssembly (or it is blocked): the TypeScript backend gives the same rows.
    state.cf = await init({ backend: "ts" });
    console.warn("callforest: WebAssembly core unavailable, using the TypeScript backend:", error);
  }
  coreReady();
  performance.mark("callforest:core");
  const backend = state.cf.backend === "wasm" ? `WebAssembly${state.cf.simd ? " (SIMD)" : ""}` : "TypeScript";
  element("backend").textContent = `core: ${backend}`;
  window.callforest = {
    backend: state.cf.backend,
    openText,
    rowsJsonl: () => (state.plan?.rows ?? []).map((row) => rowToJson(row, "bits")).join("\n"),
    reportJson: () => (state.selected < 0 ? "" : reportToJson(state.entries[state.selected].report)),
    picture: () => {
      const l = viewer().current;
      if (l === null) return null;
      const zoom = viewer().zoom;
      return {
        ...zoom,
        drawMs: viewer().lastDrawMs,
        width: l.width,
        lanes: l.lanes.map((lane) => ({
          agent: lane.agent,
          y: lane.y,
          height: lane.height,
          collapsed: lane.collapsed,
        })),
      };
    },
    callBox: (index) => {
      const l = viewer().current;
      const call = state.plan?.forest[index];
      if (l === null || call === undefined) return null;
      const lane = l.laneOf.get(call.agent)!;
      return {
        x: l.x.get(call.id)!,
        y: lane.y + l.scale.boxTop,
        width: l.scale.boxW,
        height: l.scale.boxH,
        folded: l.folded.has(call.agent),
      };
    },
    parquetWriterLoaded,
  };
  const query = new URLSearchParams(location.search);
  const from = parseFrom(query.get("from") ?? "auto");
  if (from !== null) pageFrom = from;
  const input = query.get("input");
  // A file the user opened while the core loaded is newer than the page's own ?input=.
  const userOpened = opens > 0;
  if (input !== null && location.protocol === "file:") {
    // From disk, "its own origin" is every file on the machine: ?input=/etc/passwd would be read.
    setStatus(
      "?input= is not followed on a page opened from disk (file:): open the file with the button, or drop it here",
      true,
    );
  } else if (from === null) {
    setStatus(
      `?from=${query.get("from")} is not one of ${FROM_OPTIONS.join(", ")}: ` +
        "nothing opened (open a file to read it as auto)",
      true,
    );
  } else if (input !== null && !userOpened) {
    try {
      await openUrl(input, pageFrom, query.get("tokens"));
    } catch (error) {
      setStatus(error instanceof Error ? error.message : String(error), true);
    }
  }
  const tokenizerQuery = query.get("tokenizer");
  if (tokenizerQuery !== null && location.protocol !== "file:") {
    try {
      await tokenizer!.fromQuery(tokenizerQuery, ownUrl);
    } catch (error) {
      setStatus(error instanceof Error ? error.message : String(error), true);
    }
  }
  document.body.dataset.ready = "true";
}

void start();
