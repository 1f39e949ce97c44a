// Runs a CLI entry in-process and captures what it writes to stdout and stderr.
export interface Captured {
  code: number;
  stdout: string;
  stderr: string;
}

export async function captureOutput(run: () => Promise<number>): Promise<Captured> {
  const out: string[] = [];
  const err: string[] = [];
  const writeOut = process.stdout.write.bind(process.stdout);
  const writeErr = process.stderr.write.bind(process.stderr);
  const grab = (sink: string[]) =>
    ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      sink.push(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8"));
      const callback = rest.find((r) => typeof r === "function") as (() => void) | undefined;
      callback?.();
      return true;
    }) as typeof process.stdout.write;
  process.stdout.write = grab(out);
  process.stderr.write = grab(err);
  try {
    const code = await run();
    return { code, stdout: out.join(""), stderr: err.join("") };
  } finally {
    process.stdout.write = writeOut;
    process.stderr.write = writeErr;
  }
}
