// The callforest page: open or drop a rollout file, plan it here with the WASM core, and show the
// picture, the report, the rows and one row's tokens. Nothing is sent anywhere: the only fetches
// are the page's own inlined assets and, from `callforest view`, the preloaded file (same origin).
import { init, reportToJson, rowToJson, type Callforest, type Plan, type Report } from "../src/browser.js";
import { FROM_OPTIONS, parseFrom, rejectedReport, usePlan, type FromOption } from "../src/formats/index.js";
import { XML_DECLARATION, faultOf, fileSafeId, renderSvg } from "../src/draw/index.js";
import { holdsOneValue, jsonlItems, parseJsonInput, type ReadItem as LoadedItem, type ReadOptions } from "../src/formats/text.js";
import { TOKEN_FILE_SUFFIX, isTokenFileName, memoryTokenSource } from "../src/formats/token-files.js";
import { renderReport, renderRowsTable } from "./panels.js";
import { renderStrip } from "./strip.js";

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
  svg: string;
}

const state: State = { cf: null, entries: [], selected: -1, plan: null, svg: "" };

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
  if (!item.result.ok) return rejectedReport(item.result, item.line);
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
async function eachItem(name: string, text: string | Uint8Array, read: ReadOptions, open: number, doing: string, each: (item: LoadedItem, again: () => LoadedItem) => void): Promise<boolean> {
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
async function planEntries(cf: Callforest, name: string, text: string | Uint8Array, read: ReadOptions, open: number): Promise<Entry[] | null> {
  const entries: Entry[] = [];
  const planned = await eachItem(name, text, read, open, "planning", (item, again) => entries.push({ where: item.where, report: reportOf(cf, item), load: again }));
  return planned ? entries : null;
}

/**
 * Plans every rollout of a file for its report, then shows the first one. The file is read by the
 * CLI's rules (src/formats/text.ts); as bytes, invalid UTF-8 is malformed_json there as here.
 */
async function openText(name: string, text: string | Uint8Array, read: ReadOptions = {}, open = ++opens): Promise<void> {
  const cf = state.cf;
  if (cf === null) throw new Error("the core is still loading: open the file again in a moment");
  if (open !== opens) return; // a newer open started while this one was reading
  // Everything that can fail comes first, so a failure leaves the page as it was.
  // Without token files, the page's own advice on where gym-observed tokens come from.
  const entries = await planEntries(cf, name, text, { tokens: memoryTokenSource(new Map()), ...read }, open);
  if (entries === null) return; // another file was opened meanwhile
  const options = document.createDocumentFragment(); // appended one by one: no argument spreading
  entries.forEach((entry, i) => {
    const option = document.createElement("option");
    option.value = String(i);
    const r = entry.report;
    option.textContent = `${entry.where} · ${r.rollout_id ?? "(no id)"} · ${r.status === "ok" ? `${r.rows} rows` : `rejected (${r.reason})`}`;
    options.append(option);
  });
  state.plan?.release();
  state.plan = null;
  state.entries = entries;
  const select = element<HTMLSelectElement>("rollout-select");
  select.replaceChildren(options);
  element("rollouts").hidden = state.entries.length < 2;
  const rejected = state.entries.filter((e) => e.report.status === "rejected").length;
  setStatus(`${name}: ${state.entries.length} rollout${state.entries.length === 1 ? "" : "s"}${rejected > 0 ? `, ${rejected} rejected` : ""}`);
  if (state.entries.length === 0) {
    clearViews();
    setStatus(`${name}: no rollouts in this file`, true);
  } else showRollout(0);
  document.body.dataset.loads = String(Number(document.body.dataset.loads ?? "0") + 1);
}

function clearViews(): void {
  for (const id of ["report", "svg-host", "rows-table", "strip"]) element(id).replaceChildren();
  element("strip-title").textContent = "";
  element("views").hidden = true;
}

function showRollout(index: number): void {
  state.plan?.release();
  state.plan = null;
  state.selected = index;
  element<HTMLSelectElement>("rollout-select").value = String(index);
  const entry = state.entries[index];
  const report = entry.report;
  const item = entry.load();
  let drawable;
  if (item.result.ok && report.status === "ok") {
    state.plan = state.cf!.plan(item.result.rollout, { line: item.line });
    drawable = { report, forest: state.plan.forest, agents: state.plan.agents, rows: state.plan.rows };
  } else {
    drawable = { report, forest: [], agents: [], rows: [] };
  }
  const fault = faultOf(report);
  const faultCall = fault !== null && item.result.ok ? item.result.rollout.calls[fault.index] : undefined;
  renderReport(element("report"), report, fault, faultCall);
  state.svg = renderSvg(drawable, { declaration: false }); // inline; the download adds the declaration
  element("svg-host").innerHTML = state.svg;
  renderRowsTable(element("rows-table"), state.plan, (row) => showRow(row));
  element("views").hidden = false;
  element("rows-section").hidden = state.plan === null;
  element("tokens-section").hidden = state.plan === null;
  if (state.plan !== null && state.plan.rows.length > 0) showRow(0);
}

function showRow(index: number): void {
  const plan = state.plan!;
  const row = plan.rows[index];
  for (const tr of element("rows-table").querySelectorAll("tr[data-row]")) {
    tr.classList.toggle("selected", (tr as HTMLElement).dataset.row === String(index));
  }
  let trainedTokens = 0;
  for (let i = 0; i < row.numTokens; i++) trainedTokens += (row.lossMask[i >> 3] >> (i & 7)) & 1;
  element("strip-title").textContent =
    `row ${row.index} · leaf ${row.leaf} · ${row.numTokens} tokens, ${trainedTokens} trained · reward ${row.reward}`;
  renderStrip(element("strip"), row, plan.forest);
}

/**
 * Opens a rollout file; for gym-observed captures, open (or drop) it together with its
 * `<rollout_id>.tokens.jsonl` files, which stand in for the CLI's `--tokens DIR`.
 */
async function openFiles(files: readonly File[]): Promise<void> {
  const tokenFiles = files.filter((file) => isTokenFileName(file.name));
  const rollouts = files.filter((file) => !isTokenFileName(file.name));
  if (rollouts.length !== 1) {
    throw new Error(rollouts.length === 0 ? "open a rollout file too (token files only give a gym-observed capture its tokens)" : "open one rollout file at a time (with its .tokens.jsonl files)");
  }
  const [file] = rollouts;
  const open = ++opens;
  setStatus(`reading ${file.name}…`);
  await coreLoaded;
  const tokens = new Map<string, Uint8Array>();
  for (const tokenFile of tokenFiles) tokens.set(tokenFile.name, new Uint8Array(await tokenFile.arrayBuffer()));
  await openText(file.name, new Uint8Array(await file.arrayBuffer()), { from: pageFrom, tokens: memoryTokenSource(tokens) }, open);
}

/** A same-origin URL for `path`, or an error naming the query parameter it came from. */
function ownUrl(path: string, parameter: string): URL {
  const url = new URL(path, location.href);
  if (url.origin !== location.origin) throw new Error(`?${parameter}= must name a file on this page's own origin, not ${url.origin}`);
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
    source = { ...source, notFound: (id) => `${id}${TOKEN_FILE_SUFFIX} is not in \`callforest view --tokens\`'s directory` };
  }
  await openText(name, bytes, { from, tokens: source }, open);
}

async function openExample(): Promise<void> {
  const open = ++opens;
  await coreLoaded;
  const response = await fetch(new URL("../examples/login-bug.json", import.meta.url));
  await openText("login-bug.json", new Uint8Array(await response.arrayBuffer()), {}, open);
}

function downloadSvg(): void {
  if (state.svg === "") return;
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([`${XML_DECLARATION}\n${state.svg}`], { type: "image/svg+xml" }));
  const id = state.entries[state.selected]?.report.rollout_id ?? "rollout";
  link.download = `${fileSafeId(id)}.svg`; // as `draw` names files
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 0);
}

function wire(): void {
  const fail = (error: unknown) => setStatus(error instanceof Error ? error.message : String(error), true);
  element<HTMLInputElement>("file").addEventListener("change", (event) => {
    const files = [...((event.target as HTMLInputElement).files ?? [])];
    if (files.length > 0) openFiles(files).catch(fail);
  });
  element("example").addEventListener("click", () => openExample().catch(fail));
  element("download-svg").addEventListener("click", downloadSvg);
  // Clicking a row's path in the picture, or a call box, shows that row's tokens (a call's: the row that trains it).
  element("svg-host").addEventListener("click", (event) => {
    const plan = state.plan;
    const target = event.target as Element;
    if (plan === null) return;
    const row = target.closest("g.cf-row")?.getAttribute("data-row");
    // By index: an id the SVG had to alter (characters XML forbids, a CR) would match no call.
    const index = target.closest("g.cf-call")?.getAttribute("data-index");
    const owner = index == null ? -1 : plan.forest[Number(index)]?.ownerRow ?? -1;
    if (row != null) showRow(Number(row));
    else if (owner >= 0) showRow(owner);
  });
  element<HTMLSelectElement>("rollout-select").addEventListener("change", (event) => {
    showRollout(Number((event.target as HTMLSelectElement).value));
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

/** For tests and the console: the selected rollout's rows and report as the CLI writes them. */
export interface PageHandle {
  backend: string;
  openText(name: string, text: string | Uint8Array, read?: ReadOptions): Promise<void>;
  rowsJsonl(): string;
  reportJson(): string;
}

declare global {
  interface Window {
    callforest?: PageHandle;
  }
}

async function start(): Promise<void> {
  wire();
  try {
    state.cf = await init();
  } catch (error) {
    // No WebAssembly (or it is blocked): the TypeScript backend gives the same rows.
    state.cf = await init({ backend: "ts" });
    console.warn("callforest: WebAssembly core unavailable, using the TypeScript backend:", error);
  }
  coreReady();
  const backend = state.cf.backend === "wasm" ? `WebAssembly${state.cf.simd ? " (SIMD)" : ""}` : "TypeScript";
  element("backend").textContent = `core: ${backend}`;
  window.callforest = {
    backend: state.cf.backend,
    openText,
    rowsJsonl: () => (state.plan?.rows ?? []).map((row) => rowToJson(row, "bits")).join("\n"),
    reportJson: () => (state.selected < 0 ? "" : reportToJson(state.entries[state.selected].report)),
  };
  const query = new URLSearchParams(location.search);
  const from = parseFrom(query.get("from") ?? "auto");
  if (from !== null) pageFrom = from;
  const input = query.get("input");
  // A file the user opened while the core loaded is newer than the page's own ?input=.
  const userOpened = opens > 0;
  if (from === null) {
    setStatus(`?from=${query.get("from")} is not one of ${FROM_OPTIONS.join(", ")}: nothing opened (open a file to read it as auto)`, true);
  } else if (input !== null && !userOpened) {
    try {
      await openUrl(input, pageFrom, query.get("tokens"));
    } catch (error) {
      setStatus(error instanceof Error ? error.message : String(error), true);
    }
  }
  document.body.dataset.ready = "true";
}

void start();
