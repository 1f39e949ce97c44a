// callforest's scan module (separate from the core): JSON line scanning into linear memory, and
// the number formatting of row output. Host side: src/ingest/scanner.ts and src/ingest/serialize.ts.
export {
  setPrefixByte,
  inputAddress,
  scan,
  metaAddress,
  metaLength,
  tableAddress,
  arrayCount,
  streamBegin,
  streamRoom,
  streamScan,
} from "./scan";
export { formatInts, formatFloats, base64, maskInts } from "./format-row";
export { workspace } from "./workspace";
export { setMemoryLimit } from "./memory";
