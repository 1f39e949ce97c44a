// The compaction test bed: a deterministic vLLM-like model server, a Gym resources server for the
// grid world, and two environments: a grid world, and a screen whose latest screenshot a view
// shows in place of the old one.
export {
  startModelServer,
  type Fault,
  type ModelServer,
  type ModelServerOptions,
  type RecordedRequest,
} from "./server.js";
export { startGridWorldResources, gridWorldRunBody, type ResourcesTestServer } from "./resources-server.js";
export { createGridWorld, type GridWorld, type GridWorldOptions } from "./gridworld.js";
export { createScreen, type Screen, type ScreenOptions } from "./screen.js";
export {
  renderPrompt,
  renderWithPrefix,
  itemTokens,
  encodeText,
  SPECIAL,
  PATCH_SIZE,
  TemplateError,
} from "./template.js";
export { sample, hashTokens } from "./sampler.js";
