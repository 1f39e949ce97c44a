// The test bed's strict check of a ContextCompactedResponse (what Gym's agent validates in /run):
// Gym's own example passes; what its pydantic models would refuse is refused, and `/verify` of the
// test bed's resources server answers it with 422.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GymModelError, checkCompactedResponse } from "../../src/compaction/testbed/gym-models.js";
import { gridWorldRunBody } from "../../src/compaction/testbed/index.js";
import { withResources } from "./support.js";

const example = JSON.parse(
  readFileSync(join(__dirname, "../fixtures/gym-compaction/context_compacted_response.json"), "utf8"),
);

describe("Gym's ContextCompactedResponse models", () => {
  it("accept Gym's example and refuse what pydantic would, naming the field", () => {
    expect(() => checkCompactedResponse(structuredClone(example))).not.toThrow();
    const cases: [(r: any) => void, string][] = [
      [(r) => (r.context_compaction_contract.extra = 1), "response.context_compaction_contract.extra"],
      [(r) => (r.context_compaction_contract.rollout_index = -1), "response.context_compaction_contract.rollout_index"],
      [(r) => delete r.lineage_deltas[1].state_digest, "response.lineage_deltas.1.state_digest"],
      [
        (r) => (r.final_policy_decision.lineage.unit_records[0].disposition = "kept?"),
        "response.final_policy_decision.lineage.unit_records.0.disposition",
      ],
      [
        (r) => (r.completion_evidence[0].policy_decision.units = []),
        "response.completion_evidence.0.policy_decision.units",
      ],
      [(r) => (r.chunk_records[0].actual_action_count = -1), "response.chunk_records.0.actual_action_count"],
      [(r) => delete r.agent_input, "response.agent_input"],
    ];
    for (const [mutate, loc] of cases) {
      const bad = structuredClone(example);
      mutate(bad);
      let error: unknown = null;
      try {
        checkCompactedResponse(bad);
      } catch (e) {
        error = e;
      }
      expect(error, loc).toBeInstanceOf(GymModelError);
      expect((error as GymModelError).loc.join(".")).toBe(loc);
    }
  });

  it("make the test bed's /verify answer 422 to a response Gym's agent would refuse", async () => {
    await withResources(async (resources) => {
      const runBody = await gridWorldRunBody({ seed: 1 });
      const post = (path: string, body: unknown, cookie?: string) =>
        fetch(resources.url + path, {
          method: "POST",
          headers: { "content-type": "application/json", ...(cookie ? { cookie } : {}) },
          body: JSON.stringify(body),
        });
      const seeded = await post("/seed_session", runBody);
      const cookie = seeded.headers.get("set-cookie")!.split(";")[0];
      const bad = structuredClone(example);
      delete bad.lineage_deltas[0].transformation_id;
      const refused = await post("/verify", { ...runBody, response: bad }, cookie);
      expect(refused.status).toBe(422);
      expect(await refused.json()).toEqual({
        detail: [
          {
            type: "value_error",
            loc: ["body", "response", "lineage_deltas", 0, "transformation_id"],
            msg: "Field required",
          },
        ],
      });
      expect((await post("/verify", { ...runBody, response: example }, cookie)).status).toBe(200);
    });
  });
});
