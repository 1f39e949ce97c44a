// The compaction test bed: a deterministic vLLM-like model server and a grid-world environment.
export { startModelServer, type Fault, type ModelServer, type ModelServerOptions, type RecordedRequest } from "./server.js";
export { createGridWorld, type GridWorld, type GridWorldOptions } from "./gridworld.js";
export { renderPrompt, renderWithPrefix, itemTokens, encodeText, SPECIAL, PATCH_SIZE, TemplateError } from "./template.js";
export { sample, hashTokens } from "./sampler.js";
