// The SVG in a real browser (Chromium via playwright-core): it parses as XML with the browser's
// own parser, and a 500-call picture renders at its natural size with 11px text that fits its
// boxes (legible: the picture scrolls, the text does not shrink).
import { CHROMIUM_LAUNCH, NO_DEADLINE } from "../support/chromium.js";
import { readFileSync } from "node:fs";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { init, type Callforest } from "../../src/index.js";
import { renderBinsSvg, renderPackedSvg, renderSvg } from "../../src/draw/index.js";
import { generateRollout } from "../../bench/generate.js";
import type { Rollout } from "../../src/types.js";
import { SWAP_FILE } from "../support/media-rollouts.js";

const example = JSON.parse(readFileSync(new URL("../../examples/login-bug.json", import.meta.url), "utf8")) as Rollout;

let browser: Browser;
let page: Page;
let cf: Callforest;
beforeAll(async () => {
  cf = await init();
  browser = await chromium.launch(CHROMIUM_LAUNCH);
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.setDefaultTimeout(NO_DEADLINE);
});
afterAll(async () => {
  await browser?.close();
});

function draw(rollout: unknown): string {
  const plan = cf.plan(rollout);
  try {
    return renderSvg(plan);
  } finally {
    plan.release();
  }
}

/** The packed trees' picture, and the bins' at `capacity`. */
function drawPacked(rollout: unknown, capacity: number): string[] {
  const plan = cf.plan(rollout, { trees: true, capacity });
  try {
    const drawn = { report: plan.report, forest: plan.forest, agents: plan.agents, rows: plan.rows };
    return [renderPackedSvg({ ...drawn, trees: plan.trees }), renderBinsSvg({ ...drawn, bins: plan.bins, capacity })];
  } finally {
    plan.release();
  }
}

/** Parses with the browser's XML parser; returns its error text, or "" when the document is SVG. */
function xmlProblem(svg: string): Promise<string> {
  return page.evaluate((text) => {
    const doc = new DOMParser().parseFromString(text, "image/svg+xml");
    const error = doc.getElementsByTagName("parsererror")[0];
    if (error) return error.textContent || "parsererror";
    const root = doc.documentElement;
    return root.namespaceURI === "http://www.w3.org/2000/svg" && root.localName === "svg"
      ? ""
      : `root is ${root.localName}`;
  }, svg);
}

describe("SVG validity", () => {
  it("the browser's XML parser rejects a broken document (the check can fail)", async () => {
    expect(await xmlProblem(draw(example).replace("</svg>", ""))).not.toBe("");
  });

  it("parses every kind of picture as SVG", async () => {
    const nasty = structuredClone(example);
    nasty.calls[0].id = `<&>"'\u0001\uD800`;
    nasty.agents![1].mode = "]]><!--";
    const noAgents = { ...structuredClone(example), agents: undefined };
    for (const c of noAgents.calls) delete c.agent;
    const rejected = structuredClone(example);
    rejected.calls[2].prompt_token_ids = [1, -5];
    // a media cut, with a media id that needs escaping in C3's and C4's tooltips
    const swap = JSON.parse(readFileSync(SWAP_FILE, "utf8")) as Rollout;
    for (const call of swap.calls.slice(2)) call.media = [{ id: `]]><!--<&>"\u0001`, offset: 3, length: 3 }];
    const svgs = [
      draw(example),
      draw(nasty),
      draw(noAgents),
      draw(rejected),
      draw(generateRollout({ calls: 500, seed: 3 })),
      draw(swap),
      ...drawPacked(nasty, 20),
      ...drawPacked(swap, 32768),
    ];
    expect(svgs[5]).toContain('data-reason="media"');
    expect(svgs[7]).toContain('<g class="cf-bin" data-bin="3">');
    for (const svg of svgs) expect(await xmlProblem(svg)).toBe("");
  });
});

describe("legibility at 500 calls", () => {
  it("renders 1:1 with 11px text inside each call box", async () => {
    const rollout = generateRollout({ calls: 500, seed: 11 });
    const svg = draw(rollout);
    await page.setContent(`<!doctype html><body style="margin:0">${svg.replace(/^<\?xml[^>]*>\n/, "")}</body>`);
    const measured = await page.evaluate(() => {
      const root = document.querySelector("svg")!;
      const calls = Array.from(root.querySelectorAll("g.cf-call"), (g) => {
        const rect = g.querySelector("rect")!.getBoundingClientRect();
        const texts = Array.from(g.querySelectorAll("text"), (t) => t.getBoundingClientRect());
        const fontSize = getComputedStyle(g.querySelector("text")!).fontSize;
        const fits = texts.every(
          (t) => t.left >= rect.left && t.right <= rect.right && t.top >= rect.top - 1 && t.bottom <= rect.bottom + 1,
        );
        return { fits, fontSize, height: Math.min(...texts.map((t) => t.height)) };
      });
      return { width: root.getBoundingClientRect().width, attr: Number(root.getAttribute("width")), calls };
    });
    expect(measured.calls.length).toBe(rollout.calls.length);
    expect(measured.width).toBe(measured.attr);
    expect(measured.width).toBeGreaterThan(500 * 80);
    expect(new Set(measured.calls.map((c) => c.fontSize))).toEqual(new Set(["11px"]));
    expect(Math.min(...measured.calls.map((c) => c.height))).toBeGreaterThanOrEqual(10);
    expect(measured.calls.filter((c) => !c.fits)).toEqual([]);
  });
});
