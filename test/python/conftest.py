"""Shared inputs for the Python tests: the CLI's rows, packed trees and bins of a generated batch.

The batch is SPEC's worked example (also with routed experts), a screenshot replaced in place,
and 16 rollouts from
examples/pytorch/generate.mjs (seed 7: forks, twins, fresh subagents, retries, compaction,
continued generations, parallel samples). Each layout is written once per format by the built
CLI (``node bin/callforest.js``; ``npm ci`` builds it).

The tests import the ``callforest`` package as installed into .venv from python/
(scripts/ensure-python.sh). Today's CLI writes SPEC v3 records; :func:`with_v4_fields` adds what
v4 records carry (``group_id``, ``weight_versions``) following SPEC v4's rules, from versions and
groups that the tests give the rollouts (:data:`CURRENT_VERSION`, :func:`call_versions`,
:func:`group_of`). Once the CLI writes v4, these tests can give the rollouts those fields and read
the CLI's records instead."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here downloads; fail fast if it tried
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[2]
# torch.compile (FlexAttention on CPU) caches its kernels here, inside the project.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(ROOT / ".venv" / "torchinductor-cache"))

FORMATS = ("jsonl", "parquet", "arrow", "arrows")


def callforest(*args: str) -> None:
    run = subprocess.run(
        ["node", str(ROOT / "bin" / "callforest.js"), *args], capture_output=True, text=True
    )
    if run.returncode != 0:
        raise RuntimeError(f"callforest {' '.join(args)} failed:\n{run.stdout}{run.stderr}")


def read_jsonl(path: Path) -> list[dict]:
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


@dataclass
class Outputs:
    dir: Path
    rollouts: list[dict]
    #: layout name -> its options for `callforest rows`
    layouts: dict[str, list[str]] = field(default_factory=dict)

    def path(self, layout: str, fmt: str = "jsonl") -> Path:
        return self.dir / f"{layout}.{fmt}"

    def jsonl(self, layout: str) -> list[dict]:
        return read_jsonl(self.path(layout))


@pytest.fixture(scope="session")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Outputs:
    work = tmp_path_factory.mktemp("callforest")
    generated = work / "generated.jsonl"
    with generated.open("w") as f:
        subprocess.run(
            ["node", str(ROOT / "examples" / "pytorch" / "generate.mjs"), "16", "7"], stdout=f, check=True
        )
    # SPEC's worked example once more, with MoE router choices on every call ([S][L][K]: each
    # token of the call's full sequence, 3 layers, top-2), so routed_experts columns hold values.
    experts = json.loads((ROOT / "examples" / "login-bug.json").read_text())
    experts["rollout_id"] = "login-bug-experts"
    for c in experts["calls"]:
        full = len(c["prompt_token_ids"]) + len(c["generation_token_ids"])
        c["routed_experts"] = [[[(7 * t + 3 * layer + k) % 64 for k in range(2)] for layer in range(3)] for t in range(full)]
    (work / "experts.json").write_text(json.dumps(experts))
    rollouts = work / "rollouts.jsonl"
    callforest(
        "convert", "--strict", str(ROOT / "examples" / "login-bug.json"),
        str(ROOT / "examples" / "screenshot-swap.json"), str(work / "experts.json"), str(generated),
        "-o", str(rollouts),
    )  # fmt: skip
    out = Outputs(work, read_jsonl(rollouts))
    callforest("rows", "--strict", "--quiet", str(rollouts), "-o", str(out.path("rows")))
    # The longest row is the smallest capacity that takes every rollout: there trees are split,
    # and calls come back as context in later bins.
    longest = max(r["num_tokens"] for r in out.jsonl("rows"))
    out.layouts = {
        "rows": [],
        "trees": ["--layout", "packed"],
        "bins-64": ["--capacity", "64"],
        f"bins-{longest}": ["--capacity", str(longest)],
    }
    for layout, options in out.layouts.items():
        for fmt in FORMATS:
            callforest("rows", "--strict", "--quiet", *options, str(rollouts), "-o", str(out.path(layout, fmt)))
    return out


#: The policy version a trainer is at in the tests' RL step; versions come from call_versions.
CURRENT_VERSION = 10


def call_versions(rollout_index: int, call_index: int, generated: int) -> list[int]:
    """The weight version of each generated token of a call (SPEC v4 ``weight_version``): most
    calls one version in 7..10, every fifth call a generation that spans a weight update."""
    version = CURRENT_VERSION - (rollout_index + call_index) % 4
    if call_index % 5 == 4 and generated >= 2:
        return [version - 1] * (generated // 2) + [version] * (generated - generated // 2)
    return [version] * generated


def group_of(rollout_index: int, rollout_id: str) -> str | None:
    """The rollout's v4 ``group_id``: groups of four, SPEC's examples in none."""
    return None if not rollout_id.startswith("gen-") else f"task-{rollout_index // 4}"


def with_v4_fields(outputs: Outputs, records: list[dict]) -> list[dict]:
    """Copies of today's (v3) records with SPEC v4's ``group_id`` and ``weight_versions``, as v4's
    "Rows" and "Packed trees" define them: on a generated token of a call (a row's path call in
    its generated span; a packed segment's creator at a position past its prompt), the version
    that sampled it; -1 elsewhere."""
    versions, prompts, groups = {}, {}, {}
    for i, r in enumerate(outputs.rollouts):
        groups[r["rollout_id"]] = group_of(i, r["rollout_id"])
        for j, c in enumerate(r["calls"]):
            prompts[r["rollout_id"], c["id"]] = len(c["prompt_token_ids"])
            versions[r["rollout_id"], c["id"]] = call_versions(i, j, len(c["generation_token_ids"]))
    out = []
    for record in records:
        rid, n = record["rollout_id"], record["num_tokens"]
        tokens = [-1] * n
        if "segments" in record:
            for s in record["segments"]:
                prompt, vs = prompts[rid, s["call"]], versions[rid, s["call"]]
                for k in range(s["start"], s["start"] + s["length"]):
                    g = record["position_ids"][k] - prompt
                    if 0 <= g < len(vs):
                        tokens[k] = vs[g]
        else:
            for call in record["calls"]:
                prompt, vs = prompts[rid, call], versions[rid, call]
                tokens[prompt : prompt + len(vs)] = vs
        out.append({**record, "group_id": groups[rid], "weight_versions": tokens})
    return out


def routes_refit_v4() -> dict[str, list[dict]]:
    """SPEC v4's routes example (examples/routes-refit.json, in /work/shared's SPEC: an MoE policy
    with 2 layers and top-1 routing, a weight update during C2, and C3's prefill routing token 3
    to expert 63 in layer 1 where C1 and C2 had 7) as the v4 records SPEC's worked example gives:
    two rows (C1 C2; C3) and one packed tree of 15 tokens whose trie splits C1's node after three
    tokens. Written by hand from SPEC v4 ("Rows", "Packed trees", the routes example), since
    today's CLI writes v3; switch to the CLI's records once it writes v4."""
    from callforest import encode_loss_mask, encode_routed_experts

    c1 = [[[0], [1]], [[2], [3]], [[4], [5]], [[6], [7]]]  # C1's routes, vLLM's S = len(full) - 1
    c2 = c1 + [[[8], [9]], [[10], [11]], [[12], [13]]]
    c3 = c2[:3] + [[[6], [63]]] + c2[4:] + [[[14], [15]], [[16], [17]]]
    none = [[-1], [-1]]

    def rec(**fields):
        mask = fields.pop("mask")
        n = len(fields["token_ids"])
        return {
            "rollout_id": "routes-refit", **fields, "num_tokens": n, "loss_mask": encode_loss_mask(mask),
            "reward": 1.0, "group_id": "task-42", "media": [],
        }  # fmt: skip

    rows = [
        rec(row=0, leaf="C2", agent="L", calls=["C1", "C2"], trained=["C1", "C2"], context=[],
            token_ids=[1, 2, 3, 10, 11, 20, 30, 31], logprobs=[0, 0, 0, -0.5, -0.25, 0, -1.0, -0.125],
            mask=[0, 0, 0, 1, 1, 0, 1, 1], routed_experts=encode_routed_experts(c2 + [none]),
            weight_versions=[-1, -1, -1, 7, 7, -1, 7, 8]),
        rec(row=1, leaf="C3", agent="L", calls=["C3"], trained=["C3"], context=[],
            token_ids=[1, 2, 3, 10, 11, 20, 30, 31, 40, 50], logprobs=[0] * 9 + [-0.75],
            mask=[0] * 9 + [1], routed_experts=encode_routed_experts(c3 + [none]),
            weight_versions=[-1] * 9 + [8]),
    ]  # fmt: skip
    packed_routes = c1 + [c2[4]] + c2[5:7] + [none] + c3[3:9] + [none]
    segments = [
        {"call": "C1", "parent": -1, "start": 0, "length": 3, "end": 15},
        {"call": "C1", "parent": 0, "start": 3, "length": 2, "end": 8},
        {"call": "C2", "parent": 1, "start": 5, "length": 3, "end": 8},
        {"call": "C3", "parent": 0, "start": 8, "length": 7, "end": 15},
    ]
    trees = [
        rec(tree=0, roots=["C1", "C3"], calls=["C1", "C2", "C3"],
            token_ids=[1, 2, 3, 10, 11, 20, 30, 31, 10, 11, 20, 30, 31, 40, 50],
            position_ids=[0, 1, 2, 3, 4, 5, 6, 7, 3, 4, 5, 6, 7, 8, 9],
            logprobs=[0, 0, 0, -0.5, -0.25, 0, -1.0, -0.125, 0, 0, 0, 0, 0, 0, -0.75],
            mask=[0, 0, 0, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1], segments=segments,
            routed_experts=encode_routed_experts(packed_routes),
            weight_versions=[-1, -1, -1, 7, 7, -1, 7, 8, -1, -1, -1, -1, -1, -1, 8]),
    ]  # fmt: skip
    return {"rows": rows, "trees": trees}


def v4_schema(layout: str):
    """SPEC v4's "Columnar output" types for a layout, field order as in "Output"."""
    import pyarrow as pa

    strings = pa.list_(pa.string())
    media = pa.list_(pa.struct([("id", pa.string()), ("offset", pa.int32()), ("length", pa.int32())]))
    segment = [("call", pa.string())] + [(n, pa.int32()) for n in ("parent", "start", "length", "end")]
    if layout == "bins":
        segment += [("tree", pa.int32()), ("trained", pa.bool_())]
    if layout == "rows":
        head = [("rollout_id", pa.string()), ("row", pa.int32()), ("leaf", pa.string()), ("agent", pa.string()),
                ("calls", strings), ("trained", strings), ("context", strings), ("num_tokens", pa.int32()),
                ("token_ids", pa.list_(pa.int32()))]  # fmt: skip
        tail = [("logprobs", pa.list_(pa.float32())), ("loss_mask", pa.list_(pa.bool_())), ("reward", pa.float64()),
                ("group_id", pa.string()), ("media", media)]  # fmt: skip
    else:
        kind = ("tree", pa.int32()) if layout == "trees" else ("bin", pa.int32())
        head = [("rollout_id", pa.string()), kind, ("roots", strings), ("calls", strings), ("num_tokens", pa.int32()),
                ("token_ids", pa.list_(pa.int32())), ("position_ids", pa.list_(pa.int32()))]  # fmt: skip
        tail = [("logprobs", pa.list_(pa.float32())), ("loss_mask", pa.list_(pa.bool_())),
                ("segments", pa.list_(pa.struct(segment))), ("media", media), ("reward", pa.float64()),
                ("group_id", pa.string())]  # fmt: skip
    return pa.schema(head + tail + [("routed_experts", pa.string()), ("weight_versions", pa.list_(pa.int32()))])


def write_v4(records: list[dict], layout: str, path: Path) -> Path:
    """v4 records written as ``callforest rows`` would: JSONL (base64 mask), or with pyarrow as
    Parquet, Arrow IPC file or stream (``loss_mask`` as booleans), by ``path``'s suffix."""
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        return path
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq
    from callforest import loss_mask

    schema = v4_schema(layout)
    columns = [{**r, "loss_mask": loss_mask(r).tolist()} for r in records]
    table = pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in columns], schema=schema)
    if path.suffix == ".parquet":
        pq.write_table(table, path, row_group_size=2)
    else:
        opener = ipc.new_file if path.suffix == ".arrow" else ipc.new_stream
        with opener(path, schema) as writer:
            for batch in table.to_batches(max_chunksize=2):
                writer.write_batch(batch)
    return path
