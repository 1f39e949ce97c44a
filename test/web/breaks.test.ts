// Prefix breaks on the page (web/breaks.ts), in real Chromium: the near parents as dashed arrows,
// the list of breaks, and a selected break's two token strips side by side at `at`, decoded with
// the page's tokenizer, with the cause.
import { CHROMIUM_LAUNCH, buildPage } from "../support/chromium.js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { byteLevelTokenizer } from "../support/byte-level-tokenizer.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const REASONING_DROPPED = join(ROOT, "examples/reasoning-dropped.json");

let dir: string;
let browser: Browser;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "callforest-breaks-"));
  buildPage(dir);
  browser = await chromium.launch(CHROMIUM_LAUNCH);
});
afterAll(async () => {
  await browser?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function openPage(file: string): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  await page.goto(`file://${join(dir, "web/index.html")}`);
  await page.waitForSelector("body[data-ready=true]");
  await page.setInputFiles("#file", file);
  await page.waitForSelector('body[data-loads="1"]');
  return page;
}

/** One side of the shown break: each token's index, id and text, and which are past `at`. */
function side(page: Page, which: "expected" | "found") {
  return page.$$eval(`#break-view .break-side[data-side="${which}"] .tok`, (cells) =>
    cells.map((c) => ({
      index: Number((c as HTMLElement).dataset.index),
      id: Number((c as HTMLElement).dataset.id),
      text: (c as HTMLElement).dataset.text ?? null,
      parted: c.classList.contains("parted"),
      at: c.classList.contains("break-at"),
    })),
  );
}

describe("the page: prefix breaks", () => {
  it("lists the worked example's breaks, draws near parents dashed, and shows both sides at `at`", async () => {
    const page = await openPage(REASONING_DROPPED);
    try {
      expect(await page.isHidden("#breaks-section")).toBe(false);
      expect(await page.$$eval("#breaks-list button", (bs) => bs.map((b) => b.textContent))).toEqual([
        "C2 near C1 at 4",
        "C3 near C2 at 9",
      ]);
      const near = await page.$$eval("#svg-host path.cf-near[data-call]", (ps) =>
        ps.map((p) => [(p as SVGElement).dataset.call, (p as SVGElement).dataset.near]),
      );
      expect(near).toEqual([
        ["C2", "C1"],
        ["C3", "C2"],
      ]);
      // The first break is shown: C1's sequence and C2's prompt, the same up to 4, then apart
      const expected = await side(page, "expected");
      const found = await side(page, "found");
      expect(expected.map((t) => t.id)).toEqual([1, 2, 3, 4, 50, 11, 12, 51, 20, 21, 99]);
      expect(found.map((t) => t.id)).toEqual([1, 2, 3, 4, 20, 21, 99, 30, 31]);
      for (const s of [expected, found]) {
        expect(s.filter((t) => t.parted).map((t) => t.index)[0]).toBe(4);
        expect(s.filter((t) => t.at).map((t) => t.index)).toEqual([4]);
      }
      // Without a tokenizer the cause needs what is not known: the page says so
      expect(await page.getAttribute("#break-view .break-cause b", "data-cause")).toBe("unknown");
      expect(await page.textContent("#break-view .break-cause")).toContain("needs");
      // Picking the second shows C3 at 9 and selects C3
      await page.click('#breaks-list button[data-index="1"]');
      expect((await side(page, "expected")).find((t) => t.at)?.index).toBe(9);
      expect(await page.textContent("#details h3")).toBe("call C3");
      expect(await page.getAttribute("#breaks-list li.selected button", "data-call")).toBe("C3");
    } finally {
      await page.close();
    }
  });

  it("decodes both sides with the page's tokenizer and names the cause: reasoning dropped", async () => {
    const tokenizerFile = join(dir, "tokenizer.json");
    const [THINK, END_THINK, END] = [302, 303, 300];
    writeFileSync(
      tokenizerFile,
      JSON.stringify(
        byteLevelTokenizer([
          { id: THINK, content: "<think>" },
          { id: END_THINK, content: "</think>" },
        ]),
      ),
    );
    const bytes = (text: string) => Array.from(Buffer.from(text, "utf8"));
    const question = bytes("Q: fix it\n");
    const answer = bytes("done");
    const reasoning = [THINK, ...bytes("look at the code"), END_THINK];
    const rollout = {
      rollout_id: "think",
      reward: 1,
      calls: [
        { id: "a", prompt_token_ids: question, generation_token_ids: [...reasoning, ...answer, END] },
        {
          id: "b",
          prompt_token_ids: [...question, ...answer, END, ...bytes("ok?")],
          generation_token_ids: [...bytes("yes"), END],
        },
      ].map((c) => ({ ...c, generation_log_probs: c.generation_token_ids.map(() => -0.5) })),
    };
    const file = join(dir, "think.json");
    writeFileSync(file, JSON.stringify(rollout));
    const page = await openPage(file);
    try {
      expect(await page.getAttribute("#break-view .break-cause b", "data-cause")).toBe("unknown");
      await page.setInputFiles("#tokenizer-file", tokenizerFile);
      await page.waitForSelector("body[data-tokenizer='tokenizer.json']");
      await page.waitForSelector('#break-view .break-cause b[data-cause="reasoning_dropped"]');
      const expected = await side(page, "expected");
      const at = question.length;
      expect(expected.find((t) => t.at)).toMatchObject({ index: at, id: THINK, text: "<think>" });
      expect((await side(page, "found")).find((t) => t.at)).toMatchObject({ index: at, text: "d" });
      const texts = await page.$$eval("#break-view .break-text", (ps) => ps.map((p) => p.textContent));
      expect(texts[0]).toMatch(/^<think>look at the code<\/think>done<\|end\|>/);
      expect(texts[1]).toBe("done<|end|>ok?");
    } finally {
      await page.close();
    }
  });

  it("hides the section for a rollout without breaks", async () => {
    const page = await openPage(join(ROOT, "examples/login-bug.json"));
    try {
      expect(await page.isHidden("#breaks-section")).toBe(true);
      expect(await page.$$eval("#svg-host path.cf-near", (ps) => ps.length)).toBe(0);
    } finally {
      await page.close();
    }
  });
});
