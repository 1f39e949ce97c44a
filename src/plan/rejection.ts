// A rejected rollout: SPEC's reason code and a one-line detail naming what and where.
import type { RejectionCode } from "../types.js";

export class Rejection {
  constructor(
    readonly code: RejectionCode,
    readonly detail: string,
  ) {}
}
