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
