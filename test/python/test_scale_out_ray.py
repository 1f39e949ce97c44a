"""docs/scale-out.md's Ray recipe (examples/scale-out/ray_rows.py) on a local Ray cluster.

A few small shards are planned as Ray tasks, each running ``callforest rows --output-dir``; the
partitioned dataset, read as one table by pyarrow and by DuckDB, must hold the same rows as one
``callforest rows`` process over every shard (after sorting by rollout and row), and each part's
report must end with a run record that matches the part.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
CALLFOREST = ["node", str(ROOT / "bin" / "callforest.js")]
sys.path.insert(0, str(ROOT / "examples" / "scale-out"))

# Nothing leaves the machine: no usage report, no dashboard, loopback only.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray  # noqa: E402
import ray_rows  # noqa: E402


def write_shards(dir: Path, count: int = 4) -> list[str]:
    """Shards of SPEC's worked example and the screenshot swap, each rollout with an id of its own."""
    examples = [json.loads((ROOT / "examples" / name).read_text()) for name in ("login-bug.json", "screenshot-swap.json")]
    shards = []
    for i in range(count):
        path = dir / f"shard-{i:02}.jsonl"
        lines = []
        for k in range(3):
            rollout = dict(examples[(i + k) % 2])
            rollout["rollout_id"] = f"r{i}-{k}"
            lines.append(json.dumps(rollout))
        path.write_text("\n".join(lines) + "\n")
        shards.append(str(path))
    return shards


def sorted_rows(table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda row: (row["rollout_id"], row["row"]))


@pytest.fixture(scope="module")
def cluster():
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        configure_logging=False,
        # The workers import the recipe's module as the driver does.
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT / "examples" / "scale-out")}},
    )
    yield
    ray.shutdown()


def test_ray_tasks_write_the_rows_one_process_writes(cluster, tmp_path: Path) -> None:
    shards = write_shards(tmp_path)
    single = tmp_path / "single.parquet"
    subprocess.run([*CALLFOREST, "rows", *shards, "-o", str(single), "--quiet"], check=True)
    out = tmp_path / "dataset"

    records = ray_rows.plan_dataset(shards, str(out), CALLFOREST)

    assert [record["shard"] for record in records] == shards
    assert [record["output"] for record in records] == [f"shard-{i:02}.parquet" for i in range(4)]
    assert sum(record["rollouts"] for record in records) == 12
    expected = sorted_rows(pq.read_table(single))
    assert len(expected) > 12
    # pyarrow: the directory as one dataset (it skips _reports/ and hidden partial files).
    assert sorted_rows(pads.dataset(out, format="parquet").to_table()) == expected
    # DuckDB: a glob over the parts.
    glob = str(out / "*.parquet")
    from_duckdb = duckdb.sql(f"SELECT * FROM read_parquet('{glob}') ORDER BY rollout_id, row").to_arrow_table()
    assert from_duckdb.to_pylist() == expected


def test_a_failed_shard_fails_its_task_and_leaves_no_part(cluster, tmp_path: Path) -> None:
    shards = write_shards(tmp_path, 1)
    missing = str(tmp_path / "missing.jsonl")
    out = tmp_path / "dataset"
    with pytest.raises(ray_rows.ShardsFailed, match=r"1 of 2 shards failed: .*missing\.jsonl: callforest: cannot read") as failed:
        ray_rows.plan_dataset([*shards, missing], str(out), CALLFOREST)
    assert list(failed.value.failures) == [missing]
    assert [record["output"] for record in failed.value.records] == ["shard-00.parquet"]
    assert sorted(path.name for path in out.iterdir() if not path.name.startswith(".")) == [
        "_reports",
        "shard-00.parquet",
    ]
