// What both entries (index.ts for Node, browser.ts for browsers) export besides init(): the
// public types and the serializers. Each entry adds only how it loads its .wasm files.
export * from "./types.js";
export { toRolloutBatch } from "./plan/batch-of.js";
export {
  formatFloat32,
  fromBase64,
  maskBit,
  maskToInts,
  packedToJson,
  reportToJson,
  rowToJson,
  toBase64,
  type MaskFormat,
} from "./output/jsonl.js";
export type {
  ByteOutput,
  ColumnarApi,
  ColumnarFormat,
  ColumnarInput,
  ColumnarLayout,
  ColumnarOptions,
  ColumnarWriter,
  ParquetCompression,
  ParquetOptions,
} from "./columnar/api.js";
export type {
  ByteInput,
  ReadRejection,
  ReadRollout,
  ReadRolloutsOptions,
} from "./read-rollouts.js";
export type { FromOption, TokenEntries, TokenSource, TrajectoryFiles } from "./formats/types.js";
