"""The ``callforest`` package's readers: every layout in every format reads as its JSONL does
(list columns as numpy views), in batches without reading a file whole, from a partitioned
``--output-dir`` dataset, and through ``torch.utils.data`` datasets into RL batches."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
import torch
from conftest import FORMATS, callforest, read_jsonl

import callforest as cf

LAYOUTS = ("rows", "trees", "bins-64")


def plain(record: dict) -> dict:
    """A record as plain Python values (numpy arrays to lists, the mask to bools)."""
    out = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in record.items()}
    out["loss_mask"] = cf.loss_mask(record).tolist()
    out["logprobs"] = np.asarray(record["logprobs"], dtype=np.float32).tolist()
    out.setdefault("routed_experts", None)
    out.setdefault("weight_versions", None)
    return out


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_format_reads_as_its_jsonl(outputs, layout, fmt):
    want = [plain(r) for r in outputs.jsonl(layout)]
    records = cf.read_records(outputs.path(layout, fmt))
    assert [plain(r) for r in records] == want
    if fmt != "jsonl":
        assert isinstance(records[0]["token_ids"], np.ndarray)  # a view, no Python ints per token
    # In small batches (a large file is never read whole), the same records in the same order.
    assert [plain(r) for r in cf.iter_records(outputs.path(layout, fmt), batch_size=3)] == want
    batches = list(cf.iter_record_batches(outputs.path(layout, fmt), batch_size=3))
    assert all(len(b) <= 3 for b in batches) and sum(len(b) for b in batches) == len(want)
    if fmt != "jsonl":
        assert all(isinstance(b, pa.RecordBatch) for b in batches)
    # Only some columns.
    some = next(cf.iter_records(outputs.path(layout, fmt), columns=["rollout_id", "num_tokens"]))
    assert sorted(some) == ["num_tokens", "rollout_id"]


def test_a_partitioned_dataset(outputs, tmp_path):
    """``callforest rows --output-dir`` over shards: the parts read as one dataset, in part
    order, skipping ``_reports`` and hidden files."""
    shards = tmp_path / "shards"
    shards.mkdir()
    rollouts = outputs.rollouts
    for i in range(3):
        (shards / f"part-{i}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rollouts[i::3]))
    for fmt in ("parquet", "jsonl"):
        out = tmp_path / f"dataset-{fmt}"
        callforest("rows", "--quiet", "--layout", "packed", str(shards), "--output-dir", str(out), "--format", fmt)
        (out / ".part-9.parquet.partial-host-1-1").write_text("half written")
        assert [p.name for p in cf.dataset_files(out)] == [f"part-{i}.{fmt}" for i in range(3)]
        got = [plain(r) for r in cf.iter_records(out, batch_size=2)]
        want = [plain(r) for i in range(3) for r in read_jsonl(out / f"part-{i}.jsonl")] if fmt == "jsonl" else None
        if want is not None:
            assert got == want
        by_rollout = {(r["rollout_id"], r["tree"]) for r in got}
        assert by_rollout == {(r["rollout_id"], r["tree"]) for r in outputs.jsonl("trees")}


def test_map_style_dataset_and_dataloader(outputs):
    dataset = cf.RecordDataset(outputs.path("trees", "parquet"))
    assert len(dataset) == len(outputs.jsonl("trees"))
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, collate_fn=cf.collate)
    batches = list(loader)
    assert sum(len(b["doc_placement"]) for b in batches) == len(dataset)
    first = batches[0]
    want = cf.collate(outputs.jsonl("trees")[:4])
    for key in ("input_ids", "ends", "sources", "loss_mask", "old_logprobs", "advantages"):
        assert torch.equal(first[key], want[key]), key


def test_iterable_dataset_splits_batches_across_workers(outputs):
    path = outputs.path("rows", "arrow")
    dataset = cf.IterableRecordDataset(path, batch_size=5)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
    got = sorted((item["rollout_id"], item["input_ids"].tolist()) for item in loader)
    want = sorted((r["rollout_id"], r["token_ids"]) for r in outputs.jsonl("rows"))
    assert got == want  # every record once over the two workers
