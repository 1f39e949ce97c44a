"""Readers for ``callforest rows`` output: rows, packed trees and bins, as JSONL, Parquet, Arrow
IPC file (``.arrow``) or stream (``.arrows``), one file or a partitioned ``--output-dir``
dataset, whole or as a stream of pyarrow record batches, and as ``torch.utils.data`` datasets.

Records come back as dicts with SPEC's field names. List columns read from Parquet or Arrow are
numpy arrays (views of the record batch, no per-token Python objects); JSONL gives lists. Both
SPEC v3 records (packed trees with ``root``) and v4 records (``roots``, ``group_id``,
``weight_versions``) read; :func:`normalize` fills what v3 lacks."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import torch

__all__ = [
    "SUFFIXES",
    "IterableRecordDataset",
    "RecordDataset",
    "dataset_files",
    "iter_record_batches",
    "iter_records",
    "layout_of",
    "normalize",
    "read_records",
]

#: File suffixes of the formats ``callforest rows`` writes.
SUFFIXES = (".jsonl", ".ndjson", ".parquet", ".arrow", ".arrows")
# List columns of primitive values, read as numpy views.
_ARRAY_COLUMNS = ("token_ids", "position_ids", "logprobs", "loss_mask", "weight_versions")

Source = str | os.PathLike | Iterable[str | os.PathLike]


def layout_of(record: dict) -> str:
    """``"row"``, ``"tree"`` or ``"bin"``: which layout a record is."""
    if "bin" in record:
        return "bin"
    if "tree" in record or "segments" in record:
        return "tree"
    return "row"


def normalize(record: dict) -> dict:
    """A shallow copy of ``record`` with SPEC v4's fields, when it is a v3 record: ``roots``
    (packed records: ``[root]`` from v3's ``root``), ``group_id`` (None), ``weight_versions``
    and ``routed_experts`` (None: none given)."""
    out = dict(record)
    if layout_of(out) != "row" and "roots" not in out and "root" in out:
        out["roots"] = [out["root"]]
    out.setdefault("group_id", None)
    out.setdefault("weight_versions", None)
    out.setdefault("routed_experts", None)
    return out


def dataset_files(source: Source) -> list[Path]:
    """The files a source names: a file, or every output file under a directory (a partitioned
    ``--output-dir`` dataset, subfolders included), in sorted order, skipping names that start
    with ``_`` (``_reports``) or ``.`` (a part still being written); or each of several paths."""
    if not isinstance(source, (str, os.PathLike)):
        return [f for s in source for f in dataset_files(s)]
    path = Path(source)
    if not path.is_dir():
        return [path]
    files = []
    for folder, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        files += [Path(folder, n) for n in sorted(names) if not n.startswith(("_", ".")) and n.endswith(SUFFIXES)]
    return files


def _batch_records(batch) -> list[dict]:
    """A pyarrow RecordBatch as dicts; list columns of numbers or bools as numpy views."""
    names = batch.schema.names
    columns = {}
    for name in names:
        column = batch.column(name)
        if name in _ARRAY_COLUMNS and column.null_count == 0 and hasattr(column, "offsets"):
            offsets = column.offsets.to_numpy()
            values = column.values.to_numpy(zero_copy_only=False)
            columns[name] = [values[offsets[i] : offsets[i + 1]] for i in range(len(column))]
        else:
            columns[name] = column.to_pylist()
    return [{name: columns[name][i] for name in names} for i in range(batch.num_rows)]


def _file_batches(path: Path, batch_size: int, columns: list[str] | None):
    """One file as pyarrow RecordBatches of at most ``batch_size`` records (JSONL: lists of
    dicts)."""
    suffix = path.suffix
    if suffix in (".jsonl", ".ndjson"):
        chunk = []
        with path.open() as f:
            for line in f:
                if line.strip():
                    record = json.loads(line)
                    chunk.append({k: record[k] for k in columns if k in record} if columns else record)
                    if len(chunk) == batch_size:
                        yield chunk
                        chunk = []
        if chunk:
            yield chunk
        return
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    def sliced(batch):
        if columns:
            batch = batch.select(columns)
        for start in range(0, batch.num_rows, batch_size):
            yield batch.slice(start, batch_size)

    if suffix == ".parquet":
        yield from pq.ParquetFile(path).iter_batches(batch_size=batch_size, columns=columns)
    elif suffix == ".arrow":
        with pa.memory_map(str(path)) as source:
            reader = ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield from sliced(reader.get_batch(i))
    elif suffix == ".arrows":
        with pa.memory_map(str(path)) as source:
            for batch in ipc.open_stream(source):
                yield from sliced(batch)
    else:
        raise ValueError(f"{path}: not .jsonl, .ndjson, .parquet, .arrow or .arrows")


def iter_record_batches(source: Source, batch_size: int = 1024, columns: list[str] | None = None) -> Iterator:
    """The records of a file or dataset as they are read, never the whole file at once:
    pyarrow ``RecordBatch``es of at most ``batch_size`` records for Parquet and Arrow, lists of
    dicts for JSONL. ``columns`` reads only those fields."""
    for path in dataset_files(source):
        yield from _file_batches(path, batch_size, columns)


def iter_records(source: Source, batch_size: int = 1024, columns: list[str] | None = None) -> Iterator[dict]:
    """The records of a file or a partitioned dataset, one dict at a time, read in batches of
    ``batch_size`` (memory stays that of one batch)."""
    for batch in iter_record_batches(source, batch_size, columns):
        yield from (batch if isinstance(batch, list) else _batch_records(batch))


def read_records(source: Source, columns: list[str] | None = None) -> list[dict]:
    """Every record of a file (``.jsonl``, ``.ndjson``, ``.parquet``, ``.arrow``, ``.arrows``) or a
    partitioned ``--output-dir`` dataset, as dicts."""
    return list(iter_records(source, columns=columns))


class RecordDataset(torch.utils.data.Dataset):
    """A map-style dataset over the records of a file or dataset (read once, kept in memory);
    item ``i`` is ``transform(record i)``, by default :func:`callforest.prepare`, so a
    ``DataLoader(..., collate_fn=callforest.collate)`` yields RL batches."""

    def __init__(self, source: Source | list[dict], transform=None):
        from .batch import prepare

        in_memory = isinstance(source, list) and source and isinstance(source[0], dict)
        self.records = source if in_memory else read_records(source)
        self.transform = prepare if transform is None else transform

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int):
        return self.transform(self.records[i])


class IterableRecordDataset(torch.utils.data.IterableDataset):
    """A streaming dataset over a large file or a partitioned dataset: records are read in
    pyarrow batches of ``batch_size``, and with several ``DataLoader`` workers each worker reads
    every ``num_workers``-th batch. Items are ``transform(record)`` (:func:`callforest.prepare`
    by default)."""

    def __init__(self, source: Source, batch_size: int = 1024, transform=None, columns: list[str] | None = None):
        from .batch import prepare

        self.files = dataset_files(source)
        self.batch_size, self.columns = batch_size, columns
        self.transform = prepare if transform is None else transform

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        for i, batch in enumerate(iter_record_batches(self.files, self.batch_size, self.columns)):
            if i % workers == worker:
                for record in batch if isinstance(batch, list) else _batch_records(batch):
                    yield self.transform(record)
