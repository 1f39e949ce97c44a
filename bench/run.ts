// `npm run bench`: every benchmark, medians and ratios from one run, as markdown tables.
import { coreTable, runCoreBench } from "./core.js";
import { runScanBench, scanTable } from "./scan.js";
import { runIngestBench } from "./ingest.js";
import { runColumnarBench } from "./columnar.js";
import { packedTable, runPackedBench } from "./packed.js";
import { runBinsBench } from "./bins.js";
import { runExpertsBench } from "./experts.js";
import { runViewerBench } from "./viewer.js";
import { explainTable, runExplainBench } from "./explain.js";
import { breaksTable, runBreaksBench } from "./breaks.js";
import { runVersusBench } from "./versus.js";
import { runFloorBench } from "./floor.js";
import { runV4Bench } from "./v4.js";

const log = (line: string) => process.stderr.write(`${line}\n`);
const core = await runCoreBench(log);
console.log("\n### Core: plan() + reading every row's arrays (medians, tokens per second)\n");
console.log(coreTable(core));

console.log("\n### Prefix breaks: what finding them costs plan() (medians, diagnostic on vs off)\n");
console.log(breaksTable(runBreaksBench(log)));

const packed = await runPackedBench(log);
console.log("\n### Packed layouts: tokens and attention saved, and what packing adds to plan() (medians)\n");
console.log(packedTable(packed));

console.log("\n### Bins of many small trees: one-token roots at capacity 3 (medians, ms)\n");
console.log(await runBinsBench(undefined, log));

console.log("\n### Routed experts (48 layers × top-8, int16) through `callforest rows --jobs 1`\n");
console.log(runExpertsBench(log));

const scan = await runScanBench(log);
console.log("\n### Reading and writing bytes: scanner and row serializer vs JSON (medians)\n");
console.log(scanTable(scan));

const ingest = await runIngestBench({ log });
console.log("\n### End to end: `callforest rows` on a generated ~1 GB JSONL file\n");
console.log(ingest.table);

const columnar = await runColumnarBench({ log });
console.log(
  "\n### Columnar output: `rows -o rows.parquet` vs `-o rows.jsonl`, the trainer's read, and the default --jobs\n",
);
console.log(columnar.table);

console.log(
  "\n### `callforest explain` vs `callforest rows` on inputs that once grew with the square of the calls (medians of 3)\n",
);
console.log(explainTable(await runExplainBench(log)));

console.log("\n### Against older builds: `rows --jobs 1` side by side, the goals of issue 28, byte-identical output\n");
console.log((await runVersusBench({ log })).table);

console.log("\n### SPEC v4's cost: `rows --jobs 1` and `--layout packed` against the build before it (medians)\n");
console.log((await runV4Bench({ log })).table);

console.log("\n### Where the time of `rows --jobs 1` goes: the pipeline stage by stage, beside the whole CLI\n");
console.log((await runFloorBench({ log })).table);

console.log("\n### The page on a 1,000-call rollout (headless Chromium, 1,400 × 1,000, median of 5 loads)\n");
console.log(await runViewerBench(log));
