// `callforest show` on rollouts with media (SPEC v2 "Input" `calls[].media`, "Linking"): each
// call's occurrences listed, a media_mismatch call marked, ids shortened and escaped.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { captureOutput } from "../support/capture.js";
import { tempDirs } from "../support/temp-dirs.js";
import { SWAP_FILE, shorterParentRollout } from "../support/media-rollouts.js";
import type { Rollout } from "../../src/types.js";

const tmp = tempDirs("show-media");

async function show(rollout: unknown): Promise<string> {
  const file = join(tmp(), "rollout.json");
  writeFileSync(file, JSON.stringify(rollout));
  const run = await captureOutput(() => main(["show", file]));
  expect(run.code).toBe(0);
  return run.stdout;
}

describe("show with media", () => {
  it("lists screenshot-swap's media on every call and marks C3, the root the swapped screenshot made", async () => {
    const run = await captureOutput(() => main(["show", SWAP_FILE]));
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(
      [
        "rollout screenshot-swap: 4 calls, 4 eligible, 2 trees, 2 leaves, 2 rows",
        "agents: L (leader)",
        "",
        "forest",
        "  C1 [L · leader] 8+2 tokens  root, trained in row 0  media sha256:aaaa@3+3",
        "  └─ C2 [L · leader] 11+1 tokens  leaf → row 0  media sha256:aaaa@3+3",
        "  C3 [L · leader] 13+2 tokens  root, media mismatch, trained in row 1  media sha256:bbbb@3+3",
        "  └─ C4 [L · leader] 16+1 tokens  leaf → row 1  media sha256:bbbb@3+3",
        "  media mismatch (C3): the call's tokens extend an earlier call whose media differ, " +
          "so it is a root or continues a shorter call",
        "",
        "rows",
        "  row  leaf  agent  path (root first)  trains  context only  tokens",
        "  0    C2    L      C1 C2              C1 C2   –             12",
        "  1    C4    L      C3 C4              C3 C4   –             17",
        "",
        "tokens: 6 generated, 6 trained, 29 in rows, 29 unique",
        "",
      ].join("\n"),
    );
  });

  it("marks a media mismatch that continues a shorter call, not only a root", async () => {
    const text = await show(shorterParentRollout());
    expect(text).toContain(
      [
        "  C1 [(no agent)] 2+1 tokens  root, trained in row 0",
        "  ├─ C2 [(no agent)] 8+1 tokens  leaf → row 0  media img:a@4+3",
        "  └─ C3 [(no agent)] 10+1 tokens  media mismatch, leaf → row 1  media img:b@4+3",
        "  media mismatch (C3): ",
      ].join("\n"),
    );
  });

  it(
    "lists several items in prompt order, shortens long ids, " + "and keeps whole the ids a short form would confuse",
    async () => {
      const swap = JSON.parse(readFileSync(SWAP_FILE, "utf8")) as Rollout;
      const digest = `sha256:${"0123456789abcdef".repeat(4)}`;
      // two file names that differ only in the middle: shortened, they would look the same
      const [one, two] = ["screens/session-0001/step-7.png", "screens/session-0002/step-7.png"];
      swap.calls[0].media = [
        { id: digest, offset: 3, length: 3 },
        { id: one, offset: 7, length: 1 },
      ];
      swap.calls[1].media = [...swap.calls[0].media, { id: two, offset: 10, length: 1 }];
      const text = await show(swap);
      expect(text).toContain(
        `  C1 [L · leader] 8+2 tokens  root, trained in row 0  media sha256:01234…abcdef@3+3, ${one}@7+1\n`,
      );
      expect(text).toContain(
        `  └─ C2 [L · leader] 11+1 tokens  leaf → row 0  media sha256:01234…abcdef@3+3, ${one}@7+1, ${two}@10+1\n`,
      );
    },
  );

  it("escapes control characters in media ids (no forged lines, no terminal escapes)", async () => {
    const swap = JSON.parse(readFileSync(SWAP_FILE, "utf8")) as Rollout;
    for (const call of swap.calls) call.media = [{ id: "a\n\u001b[31mred", offset: 3, length: 3 }];
    const text = await show(swap);
    expect(text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    expect(text).toContain("  C1 [L · leader] 8+2 tokens  root, trained in row 0  media a\\n\\u001b[31mred@3+3\n");
  });
});
