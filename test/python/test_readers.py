"""The columnar files read as trainers read them, column for column the same as the JSONL.

Every layout (rows, packed trees, bins, bins that split trees) in Parquet, Arrow IPC file and
Arrow IPC stream, read with pyarrow, with Hugging Face ``datasets`` and with polars (and the
Parquet rows with DuckDB, as docs/columnar.md queries them). Types are SPEC's "Columnar output":
int32 counts and token lists, float32 logprobs, ``loss_mask`` as booleans, float64 reward, and
``group_id``, ``routed_experts`` and ``weight_versions`` nullable, null where JSONL has null or
leaves them out."""

from __future__ import annotations

import base64

import datasets
import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from conftest import v4_schema

LAYOUTS = ("rows", "trees", "bins-64", "bins-split")
KIND = {"rows": "row", "trees": "tree", "bins-64": "bin", "bins-split": "bin"}


def expected_schema(layout: str) -> list[tuple[str, pa.DataType]]:
    """SPEC v4's "Columnar output" (conftest.v4_schema), as (name, type) pairs."""
    return [(f.name, f.type) for f in v4_schema("bins" if KIND[layout] == "bin" else KIND[layout] + "s")]


def layout_name(outputs, layout: str) -> str:
    if layout == "bins-split":
        return next(name for name in outputs.layouts if name.startswith("bins-") and name != "bins-64")
    return layout


def normalized(record: dict) -> dict:
    """A JSONL record as its columnar row reads back: mask bits as booleans, logprobs rounded to
    float32, routed_experts and weight_versions null when left out."""
    out = dict(record)
    data = base64.b64decode(record["loss_mask"])
    out["loss_mask"] = [bool((data[i >> 3] >> (i & 7)) & 1) for i in range(record["num_tokens"])]
    out["logprobs"] = np.asarray(record["logprobs"], dtype=np.float32).tolist()
    out.setdefault("routed_experts", None)
    out.setdefault("weight_versions", None)
    return out


def read(path) -> pa.Table:
    if path.suffix == ".parquet":
        return pq.read_table(path)
    if path.suffix == ".arrow":
        with ipc.open_file(path) as reader:
            return reader.read_all()
    with ipc.open_stream(path) as reader:
        return reader.read_all()


def strip(t: pa.DataType) -> pa.DataType:
    """The type without nullability flags on children (Parquet and IPC keep them; we compare
    types and check nullability on its own)."""
    if pa.types.is_list(t):
        return pa.list_(strip(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([(f.name, strip(f.type)) for f in t])
    return t


@pytest.mark.parametrize("fmt", ["parquet", "arrow", "arrows"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_pyarrow(outputs, layout, fmt):
    name = layout_name(outputs, layout)
    table = read(outputs.path(name, fmt))
    assert [(f.name, strip(f.type)) for f in table.schema] == expected_schema(layout)
    assert [f.name for f in table.schema if f.nullable] == ["group_id", "routed_experts", "weight_versions"]
    want = [normalized(r) for r in outputs.jsonl(name)]
    assert table.to_pylist() == want
    assert any(r["routed_experts"] for r in want) and any(r["routed_experts"] is None for r in want)
    assert any(r["media"] for r in want)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_datasets(outputs, layout, tmp_path):
    name = layout_name(outputs, layout)
    ds = datasets.load_dataset(
        "parquet", data_files=str(outputs.path(name, "parquet")), split="train", cache_dir=str(tmp_path)
    )
    features = ds.features
    assert features["token_ids"].feature.dtype == "int32"
    assert features["logprobs"].feature.dtype == "float32"
    assert features["loss_mask"].feature.dtype == "bool"
    assert features["num_tokens"].dtype == "int32" and features["reward"].dtype == "float64"
    assert list(ds) == [normalized(r) for r in outputs.jsonl(name)]
    # As a trainer takes it: torch tensors (datasets widens integers to int64, as torch does).
    first, record = ds.with_format("torch")[0], normalized(outputs.jsonl(name)[0])
    assert first["token_ids"].tolist() == record["token_ids"]
    assert str(first["loss_mask"].dtype) == "torch.bool" and first["loss_mask"].tolist() == record["loss_mask"]
    assert str(first["logprobs"].dtype) == "torch.float32" and first["logprobs"].tolist() == record["logprobs"]


@pytest.mark.parametrize("fmt", ["parquet", "arrow", "arrows"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_polars(outputs, layout, fmt):
    name = layout_name(outputs, layout)
    path = outputs.path(name, fmt)
    frame = {"parquet": pl.read_parquet, "arrow": pl.read_ipc, "arrows": pl.read_ipc_stream}[fmt](path)
    schema = frame.schema
    assert schema["token_ids"] == pl.List(pl.Int32) and schema["logprobs"] == pl.List(pl.Float32)
    assert schema["loss_mask"] == pl.List(pl.Boolean) and schema["num_tokens"] == pl.Int32
    assert schema["reward"] == pl.Float64 and schema["routed_experts"] == pl.String
    assert frame.to_dicts() == [normalized(r) for r in outputs.jsonl(name)]


def test_duckdb_query_from_docs(outputs):
    """docs/columnar.md's query: per row, its length and its trained tokens."""
    path = outputs.path("rows", "parquet")
    got = duckdb.sql(f"SELECT rollout_id, len(token_ids), list_sum(loss_mask::INTEGER[]) FROM '{path}'").fetchall()
    want = [(r["rollout_id"], r["num_tokens"], sum(normalized(r)["loss_mask"])) for r in outputs.jsonl("rows")]
    assert got == want
