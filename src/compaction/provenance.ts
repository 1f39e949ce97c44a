// Provenance: what generated a rollout's tokens. The model is always known (the client names it);
// the tokenizer, chat template and processor only when the server reports them, which vLLM does
// not. Missing identities are said, in Gym's words (`generation_contract.incomplete_reasons`).
import { EvidenceError } from "./errors.js";
import type { ResponsesResponse } from "./responses.js";

export interface Provenance {
  model: string;
  tokenizer: string | null;
  chat_template: string | null;
  processor: string | null;
  /** True when every identity above was reported. */
  complete: boolean;
  /** One of Gym's reasons per identity the server did not report. */
  incomplete_reasons: string[];
}

const IDENTITIES = [
  ["tokenizer", "exact_tokenizer_identity_not_reported_by_generation_server"],
  ["chat_template", "exact_chat_template_identity_not_reported_by_generation_server"],
  ["processor", "exact_multimodal_processor_fingerprint_not_reported_by_generation_server"],
] as const;

type Reported = Partial<Record<(typeof IDENTITIES)[number][0], string>>;

/** The identities one response reports (`generation_provenance`), checked: each a non-empty string when present. */
function reported(where: string, response: ResponsesResponse): Reported {
  const raw = response.generation_provenance;
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== "object" || Array.isArray(raw))
    throw new EvidenceError(`${where}: generation_provenance must be an object`);
  const out: Reported = {};
  for (const [key] of IDENTITIES) {
    const value = (raw as Record<string, unknown>)[key];
    if (value === undefined) continue;
    if (typeof value !== "string" || value === "")
      throw new EvidenceError(`${where}: generation_provenance.${key} must be a non-empty string`);
    out[key] = value;
  }
  return out;
}

/** Collects provenance over a run's responses: an identity that changes mid-rollout is an EvidenceError. */
export class ProvenanceRecorder {
  private seen: Reported | null = null;

  constructor(private readonly model: string) {}

  /** Notes one response's identities; all responses of a rollout must report the same ones. */
  note(where: string, response: ResponsesResponse): void {
    const now = reported(where, response);
    if (this.seen === null) {
      this.seen = now;
      return;
    }
    for (const [key] of IDENTITIES) {
      if (this.seen[key] !== now[key]) {
        throw new EvidenceError(
          `${where}: generation_provenance.${key} is ${JSON.stringify(now[key] ?? null)}, ` +
            `earlier calls reported ${JSON.stringify(this.seen[key] ?? null)}`,
        );
      }
    }
  }

  record(): Provenance {
    const seen = this.seen ?? {};
    const missing = IDENTITIES.filter(([key]) => seen[key] === undefined).map(([, reason]) => reason);
    return {
      model: this.model,
      tokenizer: seen.tokenizer ?? null,
      chat_template: seen.chat_template ?? null,
      processor: seen.processor ?? null,
      complete: missing.length === 0,
      incomplete_reasons: missing,
    };
  }
}
