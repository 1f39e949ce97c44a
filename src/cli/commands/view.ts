// `callforest view`: serves the page (dist/web/index.html, one self-contained file built by
// `npm run build`) on 127.0.0.1 and prints its URL. With INPUT, the file is served at
// /input/<name> and the printed URL (?input=input/<name>) makes the page open it on load; INPUT
// `-` reads stdin first (served as stdin.jsonl: stdin is JSONL, as for `rows`).
// Only those two paths exist; everything the page needs is inside index.html.
import { createReadStream, readFileSync, statSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { basename } from "node:path";
import { fileURLToPath } from "node:url";
import type { AddressInfo } from "node:net";
import type { Command } from "commander";
import { UsageError } from "../errors.js";

/** The built page; src/cli/commands and dist/cli/commands both sit three levels below the package. */
export const PAGE_FILE = fileURLToPath(new URL("../../../dist/web/index.html", import.meta.url));
const DEFAULT_PORT = 5178;

// The page only ever talks to its own origin (and data: URLs of its inlined assets).
const CSP =
  "default-src 'none'; script-src 'self' 'unsafe-inline' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; " +
  "connect-src 'self' data:; img-src 'self' data: blob:; base-uri 'none'; form-action 'none'";

export interface ViewServerOptions {
  /** The page file (default PAGE_FILE). */
  page?: string;
  /** A rollout file to offer at /input/<name>, or bytes already read (stdin) and their name. */
  input?: string | { name: string; bytes: Uint8Array };
  port?: number;
}

export interface ViewServer {
  /** The URL to open (with ?input=... when an input is served). */
  url: string;
  server: Server;
  close(): Promise<void>;
}

function readable(path: string, what: string): void {
  let isFile = false;
  try {
    isFile = statSync(path).isFile();
  } catch {
    throw new UsageError(`cannot read ${path}: no such file${what}`);
  }
  // The words every other command uses for what it cannot read.
  if (!isFile) throw new UsageError(`cannot read ${path}: ${statSync(path).isDirectory() ? "is a directory" : "not a regular file"}`);
}

export async function startViewServer(options: ViewServerOptions = {}): Promise<ViewServer> {
  const pageFile = options.page ?? PAGE_FILE;
  readable(pageFile, " (build the page first: npm run build)");
  const input = options.input;
  if (typeof input === "string") readable(input, "");
  const inputName = input === undefined ? null : typeof input === "string" ? basename(input) : input.name;
  const inputPath = inputName === null ? null : `/input/${encodeURIComponent(inputName)}`;
  const page = readFileSync(pageFile);

  const server = createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0];
    const headers = { "Content-Security-Policy": CSP, "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff" };
    if (request.method !== "GET" && request.method !== "HEAD") {
      response.writeHead(405, { ...headers, Allow: "GET, HEAD" }).end();
    } else if (path === "/" || path === "/index.html") {
      response.writeHead(200, { ...headers, "Content-Type": "text/html; charset=utf-8", "Content-Length": page.length });
      response.end(request.method === "HEAD" ? undefined : page);
    } else if (inputPath !== null && path === inputPath) {
      const ok = { ...headers, "Content-Type": "text/plain; charset=utf-8" };
      if (request.method === "HEAD") {
        response.writeHead(200, ok).end();
      } else if (typeof input === "string") {
        // The file may be gone (or unreadable) by now: answer 404, and never take the server down.
        const file = createReadStream(input);
        file.once("open", () => file.pipe(response.writeHead(200, ok)));
        file.once("error", () => {
          if (response.headersSent) response.destroy();
          else response.writeHead(404, { ...headers, "Content-Type": "text/plain; charset=utf-8" }).end("not found\n");
        });
      } else {
        response.writeHead(200, ok).end(input!.bytes);
      }
    } else {
      response.writeHead(404, { ...headers, "Content-Type": "text/plain; charset=utf-8" }).end("not found\n");
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}/${inputPath === null ? "" : `?input=${encodeURIComponent(inputPath.slice(1))}`}`;
  return {
    url,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // a browser's idle keep-alive connections would otherwise hold the server open
        server.closeAllConnections();
      }),
  };
}

async function readAll(stream: NodeJS.ReadableStream): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks);
}

function parsePort(text: string): number {
  const port = Number(text);
  if (!/^\d+$/.test(text) || port > 65535) throw new UsageError(`--port ${text}: expected a port number 0-65535`);
  return port;
}

export function register(program: Command): void {
  program
    .command("view")
    .description("Serve the callforest page on 127.0.0.1 and print its URL (INPUT, if given, opens on load).")
    .argument("[input]", "a .json or .jsonl rollout file to open in the page (- reads JSONL from stdin)")
    .option("--port <port>", `port to listen on (0 = any free port; default ${DEFAULT_PORT}, or any free port when that one is taken)`)
    .action(async (input: string | undefined, options: { port?: string }) => {
      const explicit = options.port !== undefined;
      const port = explicit ? parsePort(options.port!) : DEFAULT_PORT;
      const served = input === "-" ? { name: "stdin.jsonl", bytes: await readAll(process.stdin) } : input;
      let view: ViewServer;
      try {
        view = await startViewServer({ input: served, port });
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === "EADDRINUSE" && !explicit) view = await startViewServer({ input: served, port: 0 });
        else if (code === "EADDRINUSE") throw new UsageError(`--port ${port}: already in use (--port 0 picks a free one)`);
        else throw error;
      }
      process.stdout.write(`${view.url}\n`);
      // Serve until interrupted.
      await new Promise<void>((resolve) => {
        const stop = () => void view.close().then(resolve);
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
      });
    });
}
