// Media in the SVG (src/draw) and `callforest draw`: a call kept off the parent its tokens point
// to because its media differ (SPEC's media_mismatch) is marked as a media cut, with the reason
// in its tooltip; call tooltips list the media; a rollout without media draws as it always did.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { init, type Callforest } from "../../src/index.js";
import { renderSvg } from "../../src/draw/index.js";
import { MEDIA_CUT_REASON, mediaNamer } from "../../src/draw/media.js";
import { CHAR, MARGIN, MEDIA_CUT_LEGEND_W, MIN_WIDTH } from "../../src/draw/layout.js";
import { main } from "../../src/cli/main.js";
import { captureOutput } from "../support/capture.js";
import { tempDirs } from "../support/temp-dirs.js";
import { SWAP_FILE, shorterParentRollout } from "../support/media-rollouts.js";
import type { Rollout } from "../../src/types.js";

const swap = JSON.parse(readFileSync(SWAP_FILE, "utf8")) as Rollout;
const example = JSON.parse(readFileSync(new URL("../../examples/login-bug.json", import.meta.url), "utf8")) as Rollout;
const tmp = tempDirs("draw-media");

let cf: Callforest;
beforeAll(async () => {
  cf = await init();
});

function draw(rollout: unknown, api = cf): string {
  const plan = api.plan(rollout);
  try {
    return renderSvg(plan);
  } finally {
    plan.release();
  }
}

/** Each cut mark's group attributes and tooltip. */
function cutMarks(svg: string): { attributes: string; title: string }[] {
  return [...svg.matchAll(/<g (class="cf-cut-mark[^>]*)><title>([^<]*)<\/title>/g)].map((m) => ({
    attributes: m[1],
    title: m[2],
  }));
}

function callTitle(svg: string, id: string): string {
  return new RegExp(`data-call="${id}" data-index="\\d+"><title>([^<]*)</title>`).exec(svg)![1];
}

describe("a media cut", () => {
  it("marks C3 of screenshot-swap, made a root by its swapped screenshot, with the reason in its tooltip", () => {
    const svg = draw(swap);
    expect(cutMarks(svg)).toEqual([
      {
        attributes: `class="cf-cut-mark cf-is-media-cut" data-reason="media" data-after="C3"`,
        title: `media cut in L before C3: ${MEDIA_CUT_REASON}, so it starts a new tree`,
      },
    ]);
    expect(svg).toMatch(
      /<path d="M\d+,\d+ V\d+" class="cf-media-cut"\/><text x="\d+" y="\d+" class="cf-media">media cut<\/text><\/g>/,
    );
    expect(svg).toMatch(/<g class="cf-call cf-is-root cf-is-media-mismatch" data-call="C3" /);
    expect(callTitle(svg, "C3")).toBe(
      "C3 · L · leader · calls[2] · 13 prompt + 2 generated tokens · root · trained in row 1 · " +
        `media cut: ${MEDIA_CUT_REASON} · media sha256:bbbb@3+3`,
    );
    expect(callTitle(svg, "C2")).toMatch(/ · continues C1 · .* · media sha256:aaaa@3\+3$/);
  });

  it("is drawn even when the call is no root but continues a shorter call whose media agree", () => {
    const svg = draw(shorterParentRollout());
    expect(cutMarks(svg)).toEqual([
      {
        attributes: `class="cf-cut-mark cf-is-media-cut" data-reason="media" data-after="C3"`,
        title:
          `media cut in (no agent) before C3: ${MEDIA_CUT_REASON}, ` +
          "so it continues C1, a shorter call whose media agree",
      },
    ]);
    expect(callTitle(svg, "C3")).toMatch(/ · continues C1 · .* · media cut: /);
  });

  it("has its legend item only in a picture with a media cut, and the picture is wide enough for it", () => {
    const svg = draw(swap);
    const item = /<text x="(\d+)" y="\d+" class="cf-dim">media cut<\/text>/.exec(svg);
    expect(item).not.toBeNull();
    const width = Number(/<svg [^>]*width="(\d+)"/.exec(svg)![1]);
    expect(Number(item![1]) + "media cut".length * CHAR).toBeLessThanOrEqual(width - MARGIN);
    expect(width).toBe(MIN_WIDTH + MEDIA_CUT_LEGEND_W); // four calls: the legend sets the width
    expect(svg).toContain(".cf-media-cut{");
    // no media: not a byte of it (the login example's snapshot holds the rest)
    expect(draw(example)).not.toMatch(/media/);
  });

  it("is the same bytes every time and on both backends", async () => {
    const ts = await init({ backend: "ts" });
    expect(draw(structuredClone(swap))).toBe(draw(swap));
    expect(draw(swap, ts)).toBe(draw(swap));
  });

  it("escapes media ids in tooltips (ids are free text)", () => {
    const nasty = structuredClone(swap);
    for (const call of nasty.calls.slice(2)) call.media = [{ id: `<&>"\u0001`, offset: 3, length: 3 }];
    const svg = draw(nasty);
    expect(callTitle(svg, "C3")).toContain("media &lt;&amp;&gt;&quot;\uFFFD@3+3");
    expect(svg).not.toContain(`<&>`);
  });

  it("is in the file `callforest draw` writes", async () => {
    const file = join(tmp(), "swap.svg");
    const run = await captureOutput(() => main(["draw", SWAP_FILE, "-o", file]));
    expect(run.code).toBe(0);
    expect(cutMarks(readFileSync(file, "utf8")).map((m) => m.attributes)).toEqual([
      `class="cf-cut-mark cf-is-media-cut" data-reason="media" data-after="C3"`,
    ]);
  });
});

describe("media names", () => {
  const namer = (...ids: string[]) => mediaNamer([{ media: ids.map((id, i) => ({ id, offset: i, length: 1 })) }]);

  it("keeps short ids whole and shortens long ones to their head and tail", () => {
    const digest = `sha256:${"0123456789abcdef".repeat(4)}`;
    const name = namer("sha256:aaaa", digest);
    expect(name("sha256:aaaa")).toBe("sha256:aaaa");
    expect(name(digest)).toBe("sha256:01234…abcdef");
    expect(name("a".repeat(20))).toBe("a".repeat(20));
    expect(Array.from(name("🖼".repeat(30)))).toHaveLength(19); // counts code points, never splits a pair
  });

  it("keeps whole the ids whose short forms would be the same", () => {
    const [one, two] = ["screens/session-0001/step-7.png", "screens/session-0002/step-7.png"];
    const name = namer(one, two, "screens/other-session/x/step-7.png");
    expect([name(one), name(two)]).toEqual([one, two]);
    expect(name("screens/other-session/x/step-7.png")).toBe("screens/othe…-7.png");
  });
});

describe("a capture's compaction records", () => {
  it("label the call they name (draw reads the report's context_compaction diagnostics)", async () => {
    const { execFileSync } = await import("node:child_process");
    const svg = execFileSync(
      process.execPath,
      [
        "bin/callforest.js",
        "draw",
        "examples/gym-capture/rollouts.jsonl",
        "--tokens",
        "examples/gym-capture",
        "--rollout",
        "12-0",
        "-o",
        "-",
      ],
      {
        cwd: new URL("../..", import.meta.url).pathname,
        encoding: "utf8",
      },
    );
    expect(svg).toMatch(/<title>[^<]*· compaction: [^<]*<\/title>/);
    expect(svg).toContain(">compacted</text>");
  });
});
