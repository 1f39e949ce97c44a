// `--tokens DIR` reads only files inside DIR (issue 18 item 1, the rows half): a token file that
// is a symlink resolving outside DIR's real path is refused, naming the file, and the batch's
// other rollouts go on. Symlinks that stay inside DIR, and a DIR that is itself a symlink, read.
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { toCanonical } from "../../src/formats/index.js";
import { tokenDirectory } from "../../src/files/tokens-dir.js";
import { cli, lines, read } from "../ingest/cli.js";
import { OBSERVED_ROWS, OBSERVED_TOKENS } from "../support/fixtures.js";
import { tempDirs } from "../support/temp-dirs.js";
import { clone, readJsonl } from "./helpers.js";

const tmp = tempDirs("tokens-dir");
const row = readJsonl(OBSERVED_ROWS)[0];

/** The example row as rollout `7-<n>` (its token file is then `7-<n>.tokens.jsonl`). */
function rowOf(n: number): string {
  const value = clone(row);
  value._ng_rollout_index = n;
  return JSON.stringify(value);
}

describe("--tokens DIR and symlinks", () => {
  it("refuses a token file whose symlink resolves outside DIR, though the file there is a good one", () => {
    const dir = tmp();
    const outside = tmp();
    writeFileSync(join(outside, "7-2.tokens.jsonl"), readFileSync(OBSERVED_TOKENS));
    const tokens = join(dir, "tokens");
    mkdirSync(tokens);
    symlinkSync(join(outside, "7-2.tokens.jsonl"), join(tokens, "7-2.tokens.jsonl"));
    const result = toCanonical(clone(row), "gym-observed", { tokens: tokenDirectory(tokens) });
    expect(result).toMatchObject({
      ok: false,
      reason: "invalid_rollout",
      code: "token_file_outside_dir",
      detail:
        `gym-observed: ${join(tokens, "7-2.tokens.jsonl")} is a symlink to ${join(outside, "7-2.tokens.jsonl")}, ` +
        `outside ${tokens}`,
    });
  });

  it("refuses a link to a link that leaves DIR, and a link through a linked directory", () => {
    const dir = tmp();
    const outside = tmp();
    writeFileSync(join(outside, "real.jsonl"), readFileSync(OBSERVED_TOKENS));
    symlinkSync(join(outside, "real.jsonl"), join(dir, "hop.jsonl")); // inside DIR, pointing out
    symlinkSync("hop.jsonl", join(dir, "7-2.tokens.jsonl"));
    expect(toCanonical(clone(row), "gym-observed", { tokens: tokenDirectory(dir) })).toMatchObject({
      ok: false,
      code: "token_file_outside_dir",
    });
    symlinkSync(outside, join(dir, "sub"));
    symlinkSync(join("sub", "real.jsonl"), join(dir, "7-3.tokens.jsonl"));
    const value = clone(row);
    value._ng_rollout_index = 3;
    expect(toCanonical(value, "gym-observed", { tokens: tokenDirectory(dir) })).toMatchObject({
      ok: false,
      code: "token_file_outside_dir",
    });
  });

  it("reads a symlink that stays inside DIR, and a DIR that is itself a symlink", () => {
    const dir = tmp();
    mkdirSync(join(dir, "store"));
    writeFileSync(join(dir, "store", "a.jsonl"), readFileSync(OBSERVED_TOKENS));
    symlinkSync(join("store", "a.jsonl"), join(dir, "7-2.tokens.jsonl"));
    expect(toCanonical(clone(row), "gym-observed", { tokens: tokenDirectory(dir) }).ok).toBe(true);
    const linked = join(tmp(), "linked");
    symlinkSync(dir, linked);
    expect(toCanonical(clone(row), "gym-observed", { tokens: tokenDirectory(linked) }).ok).toBe(true);
  });

  it("rows --tokens: the linked-out rollout is rejected naming its file, the others go on", async () => {
    const dir = tmp();
    const outside = tmp();
    const tokens = join(dir, "tokens");
    mkdirSync(tokens);
    writeFileSync(join(outside, "secret.jsonl"), readFileSync(OBSERVED_TOKENS)); // a good token file, but not DIR's
    symlinkSync(join(outside, "secret.jsonl"), join(tokens, "7-1.tokens.jsonl"));
    writeFileSync(join(tokens, "7-2.tokens.jsonl"), readFileSync(OBSERVED_TOKENS));
    const input = join(dir, "in.jsonl");
    writeFileSync(input, `${rowOf(1)}\n${rowOf(2)}\n`);
    const run = await cli(
      "rows",
      input,
      "--tokens",
      tokens,
      "-o",
      join(dir, "rows.jsonl"),
      "--report",
      join(dir, "report.jsonl"),
      "--jobs",
      "1",
    );
    expect(run.code).toBe(0);
    const reports = lines(read(join(dir, "report.jsonl"))).map((l) => JSON.parse(l));
    expect(reports.map((r) => [r.rollout_id, r.status, r.rows])).toEqual([
      ["7-1", "rejected", 0],
      ["7-2", "ok", 4],
    ]);
    expect(reports[0].detail).toBe(
      `gym-observed: ${join(tokens, "7-1.tokens.jsonl")} is a symlink to ${join(outside, "secret.jsonl")}, ` +
        `outside ${tokens}`,
    );
    // Without --report the rejection is a line on stderr, with the finer code.
    const again = await cli("rows", input, "--tokens", tokens, "-o", join(dir, "again.jsonl"), "--jobs", "1");
    expect(lines(again.stderr)[0]).toBe(
      `${input}:1: rejected (invalid_rollout, token_file_outside_dir): ${reports[0].detail}`,
    );
    expect(lines(read(join(dir, "rows.jsonl"))).map((l) => JSON.parse(l).rollout_id)).toEqual([
      "7-2",
      "7-2",
      "7-2",
      "7-2",
    ]);
  });
});
