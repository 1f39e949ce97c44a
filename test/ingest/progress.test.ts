// The progress bar draws only on a terminal and never with --quiet.
import { Writable } from "node:stream";
import { describe, expect, it, vi } from "vitest";
import { startProgress } from "../../src/cli/progress.js";

/** A stream that says it is (or is not) a terminal and keeps what is drawn. */
function fakeStream(isTTY: boolean): { stream: NodeJS.WriteStream; text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      chunks.push(String(chunk));
      done();
    },
  }) as unknown as NodeJS.WriteStream & { isTTY: boolean; columns: number };
  stream.isTTY = isTTY;
  stream.columns = 160;
  return { stream, text: () => chunks.join("") };
}

describe("startProgress", () => {
  it("draws rollouts, MB, rows, speed and ETA on a terminal; stop() draws the last counts", () => {
    const { stream, text } = fakeStream(true);
    const progress = startProgress(10 << 20, false, stream);
    progress.update({ rollouts: 12, rows: 34, bytes: 5 << 20 });
    progress.update({ rollouts: 13, rows: 35, bytes: 6 << 20 });
    progress.stop();
    const drawn = text();
    expect(drawn).toMatch(/13 rollouts \| 6\.0\/10\.0 MB \| 35 rows \| [\d.]+ MB\/s \| ETA/);
  });

  it("shows the share of the input read and the speed over the time since the start", () => {
    const now = vi.spyOn(Date, "now").mockReturnValue(1_000_000);
    try {
      const { stream, text } = fakeStream(true);
      const progress = startProgress(10 << 20, false, stream);
      now.mockReturnValue(1_002_000); // two seconds later: 6 MB read
      progress.update({ rollouts: 13, rows: 35, bytes: 6 << 20 });
      progress.stop();
      expect(text()).toMatch(/ 60% \| 13 rollouts \| 6\.0\/10\.0 MB \| 35 rows \| 3\.0 MB\/s \| ETA/);
    } finally {
      now.mockRestore();
    }
  });

  it("writes notes above the bar: the bar steps aside and is drawn again below them", () => {
    const { stream, text } = fakeStream(true);
    const progress = startProgress(10 << 20, false, stream);
    progress.update({ rollouts: 3, rows: 4, bytes: 1 << 20 });
    progress.write("in.jsonl:2: rejected (invalid_rollout): ...\n");
    const drawn = text();
    const at = drawn.indexOf("in.jsonl:2: rejected");
    expect(at).toBeGreaterThan(0);
    // Before the note the bar cleared its line; after it, the bar is back with the same counts.
    expect(drawn.slice(at)).toMatch(/\n[\s\S]*3 rollouts \| 1\.0\/10\.0 MB \| 4 rows/);
    progress.stop();
  });

  it("without a terminal, notes go straight to stderr", () => {
    const { stream } = fakeStream(false);
    const written: string[] = [];
    const stderr = vi
      .spyOn(process.stderr, "write")
      .mockImplementation((chunk: unknown) => (written.push(String(chunk)), true));
    try {
      startProgress(10, false, stream).write("a note\n");
    } finally {
      stderr.mockRestore();
    }
    expect(written).toEqual(["a note\n"]);
  });

  it("shows counts without ETA when the size is unknown (stdin)", () => {
    const { stream, text } = fakeStream(true);
    const progress = startProgress(null, false, stream);
    progress.update({ rollouts: 1, rows: 2, bytes: 1 << 20 });
    progress.stop();
    expect(text()).toMatch(/rollouts \| [\d.]+ MB \| \d+ rows/);
    expect(text()).not.toMatch(/ETA/);
  });

  it("stays silent when stderr is not a terminal, or with --quiet", () => {
    for (const [tty, quiet] of [
      [false, false],
      [true, true],
    ]) {
      const { stream, text } = fakeStream(tty);
      const progress = startProgress(100, quiet, stream);
      progress.update({ rollouts: 1, rows: 1, bytes: 50 });
      progress.stop();
      expect(text()).toBe("");
    }
  });
});
