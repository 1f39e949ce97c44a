// src/ is built in layers, and no import climbs back up one (docs/internals.md draws them). A
// module's layer is its folder under src/, or its own name for a file directly in src/. An import
// (type-only ones included: they are dependencies too) may go to its own layer or any lower one.
// A new folder or root module must be given a layer here, which is the point: where it sits is a
// decision. Packages: the CLI's own come through src/cli/vendor.ts only (it is bundled), and the
// optional ones only from the layers whose features need them (src/optional-dependency.ts).
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "./support/fixtures.js";

/** Lowest first. */
const LAYERS: readonly (readonly string[])[] = [
  // the ground floor: shared types, where thread modules are, the codecs (base64, float32 text,
  // the routed-experts envelope)
  ["types", "random", "optional-dependency", "thread-url", "codecs"],
  ["messages"],
  ["core"],
  ["plan"],
  // what reads and writes plans without running one: JSONL, the importers (pure, browser-safe),
  // pictures, token decoders, the prefix-break analysis (pure: the page runs it too)
  ["output", "formats", "draw", "tokenizer", "explain"],
  // Parquet and Arrow; the files an input refers to, read with Node (token directories,
  // trajectory files beside an input) and Node's file errors
  ["columnar", "files"],
  // the library's entry points and the glue that plans an imported rollout
  ["api", "exports", "plan-imported", "read-rollouts", "read-node"],
  ["index", "browser"],
  // Node's streaming pipeline and readers; the compaction agent runtime
  ["ingest", "compaction"],
  ["cli"],
];

const RANK = new Map(LAYERS.flatMap((names, rank) => names.map((name) => [name, rank] as const)));

/** Where each bare package may be imported from (a path prefix under src/). */
const PACKAGES: Record<string, readonly string[]> = {
  commander: ["src/cli/vendor.ts"],
  "cli-progress": ["src/cli/vendor.ts"],
  "apache-arrow": ["src/columnar/"],
  "parquet-wasm": ["src/columnar/"],
  "gpt-tokenizer": ["src/tokenizer/", "src/compaction/testbed/"],
  "@huggingface/tokenizers": ["src/tokenizer/"], // the page's only: bundled into it
  yaml: ["src/compaction/"],
  "image-size": ["src/compaction/"],
  "fast-png": ["src/compaction/testbed/"],
};

interface Import {
  file: string;
  line: number;
  specifier: string;
}

const SPECIFIER =
  /(?:^|[\s;])(?:import|export)\s[^;]*?\sfrom\s+"([^"]+)"|import\(\s*"([^"]+)"\s*\)|^import\s+"([^"]+)"/gm;

function importsOf(): Import[] {
  const files = execFileSync("git", ["ls-files", "src"], { cwd: ROOT, encoding: "utf8" })
    .split("\n")
    .filter((file) => file.endsWith(".ts") && !file.endsWith(".d.ts"));
  const out: Import[] = [];
  for (const file of files) {
    const text = readFileSync(join(ROOT, file), "utf8");
    for (const match of text.matchAll(SPECIFIER)) {
      const specifier = match[1] ?? match[2] ?? match[3];
      const line = text.slice(0, match.index).split("\n").length + (match[0].startsWith("\n") ? 1 : 0);
      out.push({ file, line, specifier });
    }
  }
  return out;
}

function layerOf(path: string): string {
  const parts = path.replace(/^src\//, "").split("/");
  return parts.length === 1 ? parts[0].replace(/\.(ts|js)$/, "") : parts[0];
}

const imports = importsOf();

describe("layers", () => {
  it("every folder and root module of src/ has a layer", () => {
    const layers = new Set(imports.map(({ file }) => layerOf(file)));
    expect([...layers].filter((layer) => !RANK.has(layer)).sort()).toEqual([]);
  });

  it("no import climbs to a higher layer", () => {
    const climbing = imports
      .filter(({ specifier }) => specifier.startsWith("."))
      .map(({ file, line, specifier }) => {
        const target = normalize(join(dirname(file), specifier));
        const [from, to] = [layerOf(file), layerOf(target)];
        return RANK.get(to)! > RANK.get(from)! ? `${file}:${line} (${from}) imports ${target} (${to})` : null;
      })
      .filter((edge) => edge !== null);
    expect(climbing).toEqual([]);
  });

  it("within a layer, folders import each other one way only", () => {
    const edges = new Set<string>();
    for (const { file, specifier } of imports) {
      if (!specifier.startsWith(".")) continue;
      const [from, to] = [layerOf(file), layerOf(normalize(join(dirname(file), specifier)))];
      if (from !== to) edges.add(`${from} -> ${to}`);
    }
    const both = [...edges].filter((edge) => edges.has(edge.split(" -> ").reverse().join(" -> ")));
    expect(both.sort()).toEqual([]);
  });

  it("no two modules import each other, directly or around a loop (type-only imports count)", () => {
    const graph = new Map<string, string[]>();
    for (const { file, specifier } of imports) {
      if (!specifier.startsWith(".")) continue;
      const target = normalize(join(dirname(file), specifier)).replace(/\.js$/, ".ts");
      graph.set(file, [...(graph.get(file) ?? []), target]);
    }
    // Depth-first: a module met again while still on the path closes a loop.
    const done = new Set<string>();
    const loops: string[] = [];
    const visit = (file: string, path: string[]) => {
      if (path.includes(file)) return void loops.push([...path.slice(path.indexOf(file)), file].join(" -> "));
      if (done.has(file)) return;
      for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
      done.add(file);
    };
    for (const file of graph.keys()) visit(file, []);
    expect(loops).toEqual([]);
  });

  it("packages come in only where their feature is (Node's built-ins not in the browser-safe layers)", () => {
    const misplaced = imports
      .filter(({ specifier }) => !specifier.startsWith("."))
      .filter(({ file, specifier }) => {
        // the layers the page runs too (docs/internals.md)
        if (specifier.startsWith("node:")) return /^src\/(formats|codecs|output|draw|tokenizer|explain)\//.test(file);
        const name = specifier.startsWith("@") ? specifier.split("/").slice(0, 2).join("/") : specifier.split("/")[0];
        return !(PACKAGES[name] ?? []).some((prefix) => file.startsWith(prefix));
      })
      .map(({ file, line, specifier }) => `${file}:${line}: ${specifier}`);
    expect(misplaced).toEqual([]);
  });
});
