// Where a worker thread's compiled module is: beside the calling module in dist/, or in dist/
// when the caller runs from src/ (the tests run the TypeScript sources; a thread needs the build).

/** The URL of `file` (a thread's module in src/`dir`/) for a caller whose import.meta.url is `caller`. */
export function threadUrl(caller: string, dir: string, file: string): URL {
  return caller.endsWith(".ts") ? new URL(`../../dist/${dir}/${file}`, caller) : new URL(`./${file}`, caller);
}
