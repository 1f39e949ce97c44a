"""Plan a directory of rollout shards on a Ray cluster: one ``callforest rows`` per shard.

Planning is a pure function of one rollout, so a dataset is built by mapping shards to the CLI
with Ray tasks: each task runs ``callforest rows SHARD --output-dir OUT``, which writes the
part OUT/<shard>.<format> whole (or not at all) and its report OUT/_reports/<shard>.jsonl. The
report's last line, the run record, names the part's size and SHA-256; each task returns it,
checked against the part. A failed task can simply be run again: it replaces only its own part.

    python ray_rows.py SHARDS_DIR OUT_DIR [--format parquet] [--address auto]

OUT_DIR must be on storage every worker sees (a shared file system). The shards are files of
rollouts (JSONL, Gym's formats; see docs/formats.md); the callforest CLI must be on each
worker's PATH (or pass --callforest "node /path/to/bin/callforest.js").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shlex
import subprocess
from pathlib import Path

import ray

#: Input endings dropped from a shard's name to name its part (as `rows --output-dir` does).
INPUT_ENDINGS = re.compile(r"\.(jsonl|ndjson|json)$", re.IGNORECASE)


def part_name(shard: str | Path) -> str:
    return INPUT_ENDINGS.sub("", Path(shard).name)


def plan_shard(callforest: list[str], shard: str, out_dir: str, fmt: str = "parquet") -> dict:
    """Runs ``callforest rows`` on one shard; returns its run record, checked against its part."""
    command = [*callforest, "rows", shard, "--output-dir", out_dir, "--format", fmt, "--jobs", "1", "--quiet"]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:  # rejected rollouts are in the report; this is a failed write or bad input
        raise RuntimeError(f"{shard}: {run.stderr.strip() or f'exit {run.returncode}'}")
    name = part_name(shard)
    report = Path(out_dir, "_reports", f"{name}.jsonl").read_text().splitlines()
    record = json.loads(report[-1])["run"]
    part = Path(out_dir, f"{name}.{fmt}").read_bytes()
    if record["status"] != "ok" or record["bytes"] != len(part) or record["sha256"] != hashlib.sha256(part).hexdigest():
        raise RuntimeError(f"{shard}: the report's run record does not match its part")
    return {"shard": shard, **record}


# One CPU per task: the CLI is told to plan on one thread (--jobs 1).
plan_shard_task = ray.remote(num_cpus=1, max_retries=2)(plan_shard)


class ShardsFailed(RuntimeError):
    """Some shards failed (their parts are not written); the others' parts are in place."""

    def __init__(self, records: list[dict], failures: dict[str, str]):
        self.records = records
        self.failures = failures
        super().__init__(f"{len(failures)} of {len(records) + len(failures)} shards failed: " + "; ".join(failures.values()))


def plan_dataset(shards: list[str], out_dir: str, callforest: list[str], fmt: str = "parquet") -> list[dict]:
    """Plans every shard as a Ray task (ray.init() first); returns their run records, in shard order.

    Every task runs to its end; then ShardsFailed names the shards that failed, to run again."""
    Path(out_dir, "_reports").mkdir(parents=True, exist_ok=True)
    refs = [plan_shard_task.remote(callforest, shard, out_dir, fmt) for shard in shards]
    records: list[dict] = []
    failures: dict[str, str] = {}
    for shard, ref in zip(shards, refs):
        try:
            records.append(ray.get(ref))
        except ray.exceptions.RayTaskError as error:
            failures[shard] = str(error.cause)
    if failures:
        raise ShardsFailed(records, failures)
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shards", help="a directory of shard files")
    parser.add_argument("out", help="the dataset's directory")
    parser.add_argument("--format", default="parquet", choices=["parquet", "jsonl", "arrow", "arrows"])
    parser.add_argument("--address", default=None, help="the Ray cluster (default: a local one)")
    parser.add_argument("--callforest", default="callforest", help="the command that runs the CLI")
    args = parser.parse_args()
    shards = sorted(
        str(path)
        for path in Path(args.shards).iterdir()
        if path.is_file() and not path.name.startswith((".", "_"))
    )
    ray.init(address=args.address)
    records = plan_dataset(shards, args.out, shlex.split(args.callforest), args.format)
    rollouts = sum(record["rollouts"] for record in records)
    rejected = sum(record["rejected"] for record in records)
    print(f"{len(records)} parts, {rollouts} rollouts ({rejected} rejected) in {args.out}")


if __name__ == "__main__":
    main()
