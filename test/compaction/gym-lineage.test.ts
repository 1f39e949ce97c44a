// Gym's lineage records, field by field, against Gym's own example envelope (gym-formats
// context_compacted_response.json, checked against Gym PR #2616's pydantic models): the parts of
// its history, their digests and dispositions, the transformation ids and the lineage deltas.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  gymParts,
  lineageDelta,
  lineageRecord,
  unitRecord,
  unitRecordRepr,
  type UnitLineageRecord,
} from "../../src/compaction/gym-lineage.js";
import { runAgent } from "../../src/compaction/agent.js";
import { pythonFloat } from "../../src/compaction/gym-ids.js";
import { transportResponse } from "../../src/compaction/gym-response.js";
import { recencyPolicy } from "../../src/compaction/policies.js";
import { createResourcesServer, jsonObservation } from "../../src/compaction/resources.js";
import { rolling, turnChunked } from "../../src/compaction/schedules.js";
import { gridWorldRunBody } from "../../src/compaction/testbed/index.js";
import { withResources, withServer } from "./support.js";

const example = JSON.parse(
  readFileSync(join(__dirname, "../fixtures/gym-compaction/context_compacted_response.json"), "utf8"),
);

/**
 * The example's history as Gym numbered it: agent_input items are events 0 and 1 (initial), then
 * the output. The agent appended its tool output as `{type, call_id, output}`; the envelope's
 * dump adds the model's null `id` and `status`, which the history never saw.
 */
function exampleParts(upToEvent: number) {
  const asAppended = (item: Record<string, unknown>) => {
    if (item.type !== "function_call_output") return item;
    const { id: _id, status: _status, ...rest } = item;
    return rest;
  };
  const items = [...example.agent_input, ...example.output].slice(0, upToEvent + 1).map(asAppended);
  return items.flatMap((item: Record<string, unknown>, event: number) => gymParts(item, event, event < 2));
}

describe("Gym lineage", () => {
  it("writes a unit record as Python's repr of Gym's dataclass", () => {
    const r: UnitLineageRecord = {
      source_unit_id: "part-000000-000",
      source_digest: "ab",
      disposition: "kept",
      output_unit_ids: ["part-000000-000"],
      output_digests: ["ab"],
    };
    expect(unitRecordRepr(r)).toBe(
      "UnitLineageRecord(source_unit_id='part-000000-000', source_digest='ab', disposition='kept', " +
        "output_unit_ids=('part-000000-000',), output_digests=('ab',))",
    );
    expect(unitRecordRepr({ ...r, disposition: "dropped", output_unit_ids: [], output_digests: [] })).toMatch(
      /output_unit_ids=\(\), output_digests=\(\)\)$/,
    );
  });

  it("gives the example's final decision: part ids, digests, dispositions, transformation id", () => {
    const final = example.final_policy_decision;
    const parts = exampleParts(4);
    const artifact = { id: final.inserted_artifact_ids[0], text: "[Earlier image omitted]" };
    const omitted = new Set(final.changed_part_ranges.flat());
    const units = parts.map((p) => unitRecord(p, !omitted.has(p.id), omitted.has(p.id) ? artifact : undefined));
    const lineage = lineageRecord("recency", "2", final.config_digest, units, true);
    expect(lineage).toEqual(final.lineage);
    // the per-call evidence names the same transformation
    expect(example.completion_evidence[1].policy_decision.transformation_id).toBe(lineage.transformation_id);
  });

  it("gives the example's lineage deltas: the first call's whole state, then what the rewrite changed", () => {
    const config = example.final_policy_decision.config_digest;
    const first = lineageRecord(
      "recency",
      "2",
      config,
      exampleParts(1).map((p) => unitRecord(p, true, undefined)),
      false,
    );
    const one = lineageDelta(first, new Map(), null);
    expect(one.delta).toEqual(example.lineage_deltas[0]);
    const two = lineageDelta(example.final_policy_decision.lineage, one.state, one.delta.transformation_id);
    expect(two.delta).toEqual(example.lineage_deltas[1]);
  });
});

const transportExample = JSON.parse(
  readFileSync(join(__dirname, "../fixtures/gym-compaction/context_compacted_transport_response.json"), "utf8"),
);

describe("Gym's transport projection", () => {
  it("turns Gym's example response into Gym's example transport response", async () => {
    const projected = await transportResponse(structuredClone(example));
    expect(projected).toEqual(transportExample);
  });

  it("strips every image from the output and digests each call's exact tokens", async () => {
    const projected = await transportResponse(structuredClone(example));
    const images = (items: Record<string, unknown>[]) =>
      items.flatMap((o) => (Array.isArray(o.content) ? o.content : [])).filter((p) => p.type === "input_image");
    expect(images(example.output)).toHaveLength(1);
    expect(images(projected.output)).toEqual([]);
    const metadata = projected.model_call_metadata as Record<string, unknown>[];
    example.completion_evidence.forEach((c: Record<string, unknown>, i: number) => {
      // Python's json.dumps of the three arrays, floats as Python writes them (-0.5, not -.5 or -5e-1)
      const text =
        `{"prompt_token_ids":${JSON.stringify(c.prompt_token_ids)},` +
        `"sampled_logprobs":[${(c.sampled_logprobs as number[]).map(pythonFloat).join(",")}],` +
        `"sampled_token_ids":${JSON.stringify(c.sampled_token_ids)}}`;
      expect(metadata[i].generation_evidence_digest).toBe(createHash("sha256").update(text).digest("hex"));
      expect(metadata[i]).not.toHaveProperty("prompt_token_ids");
    });
    // a changed logprob changes the digest
    const changed = structuredClone(example);
    changed.completion_evidence[0].sampled_logprobs[0] = -0.5000001;
    const other = (await transportResponse(changed)).model_call_metadata as Record<string, unknown>[];
    expect(other[0].generation_evidence_digest).not.toBe(metadata[0].generation_evidence_digest);
  });
});

describe("a run's lineage records", () => {
  it.each([
    ["rolling", rolling()],
    ["turnChunked(3)", turnChunked(3)],
  ] as const)("%s: Gym's records over the envelope's own items, chained call by call", async (_name, schedule) => {
    const result = await withServer({ seed: 17 }, (_server, model) =>
      withResources(async (resources) =>
        runAgent({
          model,
          resources: {
            server: createResourcesServer({ baseUrl: resources.url }),
            runBody: await gridWorldRunBody({ seed: 6 }),
            observe: jsonObservation,
          },
          compaction: {
            policy: recencyPolicy({ images: { keepLastGroups: 1 }, reasoning: { keepLastBlocks: 1 } }),
            schedule,
          },
          maxTurns: 8,
        }),
      ),
    );
    const response = result.gymResponse! as Record<string, any>;
    const deltas = response.lineage_deltas as Record<string, any>[];
    const completions = response.completion_evidence as Record<string, any>[];
    expect(deltas).toHaveLength(result.evidence.calls.length);
    const state = new Map<string, UnitLineageRecord>();
    deltas.forEach((delta, i) => {
      expect(delta.parent_transformation_id).toBe(i === 0 ? null : deltas[i - 1].transformation_id);
      expect(completions[i].policy_decision.transformation_id).toBe(delta.transformation_id);
      for (const u of delta.unit_upserts) state.set(u.source_unit_id, u);
      expect(delta.source_unit_count).toBe(state.size);
    });
    const final = response.final_policy_decision;
    expect(final.decision_turn).toBe(completions[completions.length - 1].turn_id);
    expect(final.lineage.unit_records).toEqual(
      [...state.values()].sort((a, b) => (a.source_unit_id < b.source_unit_id ? -1 : 1)),
    );
    expect(final.lineage.transformation_id).toBe(deltas[deltas.length - 1].transformation_id);
    // Gym's part split and digests of the envelope's own items (as the history appended them)
    const items = [...response.agent_input, ...response.output] as Record<string, unknown>[];
    const parts = new Map(items.flatMap((item, event) => gymParts(item, event, event === 0)).map((p) => [p.id, p]));
    for (const u of final.lineage.unit_records) expect(u.source_digest).toBe(parts.get(u.source_unit_id)!.digest);
    expect(lineageRecord("recency", "2", final.config_digest, final.lineage.unit_records, final.lineage.lossy)).toEqual(
      final.lineage,
    );
    // old images were omitted: replaced by the marker that stands for their run
    const replaced = final.lineage.unit_records.filter((u: UnitLineageRecord) => u.disposition === "replaced");
    expect(replaced.length).toBeGreaterThan(0);
    for (const u of replaced) expect(final.inserted_artifact_ids).toContain(u.output_unit_ids[0]);
  });
});
