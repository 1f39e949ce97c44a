// The errors a core (or the scanner's WebAssembly instance) reports to its host, whichever
// backend or module: the planner, the ingest pipeline and the CLI tell them apart.

/** The instance traps with this when linear memory cannot grow: the rollout is too large. */
export class CoreMemoryError extends Error {}

/** No new instance can be had (address space): the process's limit, not the rollout's size. */
export class CoreUnavailableError extends Error {}
