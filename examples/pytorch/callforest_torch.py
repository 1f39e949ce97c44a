"""Training inputs for PyTorch from callforest's rows, packed trees and bins.

One file, torch and pyarrow only: copy it into a trainer or put its folder on ``sys.path``.

    records = read_records("trees.parquet")       # JSONL, Parquet, Arrow IPC file or stream
    batch = collate(records)                       # tensors [B, L], padded
    mask = dense_mask(batch)                       # [B, 1, L, L] bool (sdpa), or:
    mask = block_mask(batch)                       # FlexAttention BlockMask
    logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"],
                   attention_mask=mask).logits
    loss = -(token_logprobs(logits, batch) * batch["loss_weights"]).sum()

A row is one causal sequence; a packed tree or a bin is a tree of segments, and SPEC.md ("Packed
trees") gives the three rules a trainer needs, all of which ``prepare`` turns into tensors:

- positions: ``position_ids`` as given (a row's are 0..n-1);
- attention: query ``q`` sees key ``k`` iff ``k <= q < end[k]``, ``end[k]`` being the ``end`` of
  k's segment (a row is one segment, ``end = n``);
- prediction: token ``k`` is predicted from the output at ``k - 1``, except the first token of a
  segment with a parent, predicted from its parent segment's last token; a root's first token is
  predicted by nothing (``sources[k] == -1``) and gets loss weight 0.

Loss weights are ``loss_mask`` (1.0 where the record trains the token) on every token that has a
source. Summed over records, the masked loss of packed records equals that of rows.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import torch

__all__ = [
    "block_mask",
    "collate",
    "dense_mask",
    "loss_mask",
    "prepare",
    "read_records",
    "token_logprobs",
]


def read_records(path: str | Path) -> list[dict]:
    """The records of a ``callforest rows`` output, as dicts: JSONL (``.jsonl``, ``.ndjson``),
    Parquet (``.parquet``), Arrow IPC file (``.arrow``) or stream (``.arrows``)."""
    path = Path(path)
    if path.suffix in (".jsonl", ".ndjson"):
        with path.open() as f:
            return [json.loads(line) for line in f if line.strip()]
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    if path.suffix == ".parquet":
        table = pq.read_table(path)
    elif path.suffix == ".arrow":
        table = ipc.open_file(path).read_all()
    elif path.suffix == ".arrows":
        table = ipc.open_stream(path).read_all()
    else:
        raise ValueError(f"{path}: not .jsonl, .parquet, .arrow or .arrows")
    return table.to_pylist()


def loss_mask(record: dict) -> torch.Tensor:
    """The record's ``loss_mask`` as a bool tensor [n]: SPEC's base64 bitset (bit i is bit i % 8 of
    byte i // 8), a 0/1 list (``--mask-format ints``) or a list of bools (Parquet and Arrow)."""
    mask, n = record["loss_mask"], record["num_tokens"]
    if isinstance(mask, str):
        bits = torch.tensor(list(base64.b64decode(mask)), dtype=torch.uint8)
        shifts = torch.arange(8, dtype=torch.uint8)
        return ((bits[:, None] >> shifts) & 1).flatten()[:n].bool()
    return torch.tensor(mask, dtype=torch.bool).reshape(n)


def _segments(record: dict) -> list[dict]:
    # A row is one root segment over its whole sequence.
    if "segments" in record:
        return record["segments"]
    n = record["num_tokens"]
    return [{"parent": -1, "start": 0, "length": n, "end": n}]


def prepare(record: dict) -> dict[str, torch.Tensor]:
    """One row, packed tree or bin as tensors of length n = ``num_tokens``:

    ``input_ids``, ``position_ids`` (int64); ``ends`` (each token's segment ``end``, for the
    attention rule); ``sources`` (the index whose output predicts each token, -1 for none);
    ``targets`` (the token each prediction is scored on: ``input_ids``); ``loss_weights``
    (float32: 1 where the record trains the token and it has a source, else 0)."""
    n = record["num_tokens"]
    input_ids = torch.tensor(record["token_ids"], dtype=torch.long).reshape(n)
    if "position_ids" in record:
        position_ids = torch.tensor(record["position_ids"], dtype=torch.long).reshape(n)
    else:
        position_ids = torch.arange(n)
    ends = torch.empty(n, dtype=torch.long)
    sources = torch.arange(n) - 1
    segments = _segments(record)
    for s in segments:
        start = s["start"]
        ends[start : start + s["length"]] = s["end"]
        if s["parent"] >= 0:
            p = segments[s["parent"]]
            sources[start] = p["start"] + p["length"] - 1
        else:
            sources[start] = -1
    weights = loss_mask(record) & (sources >= 0)
    return {
        "input_ids": input_ids,
        "position_ids": position_ids,
        "ends": ends,
        "sources": sources,
        "targets": input_ids.clone(),
        "loss_weights": weights.float(),
    }


def collate(
    records: list[dict],
    pad_to_multiple_of: int = 1,
    length: int | None = None,
    batch_size: int | None = None,
) -> dict[str, torch.Tensor]:
    """Several records (or ``prepare`` results) as one batch of tensors [B, L].

    L is the longest record rounded up to a multiple of ``pad_to_multiple_of``, or ``length``;
    B is the number of records, or ``batch_size`` (extra rows are all padding). Fixed shapes
    spare ``torch.compile`` (FlexAttention) a recompile per shape. A padding token has id 0,
    position 0, no source and weight 0, and attends to itself only (``ends[k] = k + 1``), so no
    row of the mask is empty and no real token sees it."""
    items = [r if "ends" in r else prepare(r) for r in records]
    longest = max((len(item["input_ids"]) for item in items), default=1)
    if length is None:
        length = -(-longest // pad_to_multiple_of) * pad_to_multiple_of
    if batch_size is None:
        batch_size = len(items)
    if longest > length or len(items) > batch_size:
        raise ValueError(f"{len(items)} records of up to {longest} tokens do not fit [{batch_size}, {length}]")
    batch = {
        "input_ids": torch.zeros(batch_size, length, dtype=torch.long),
        "position_ids": torch.zeros(batch_size, length, dtype=torch.long),
        "ends": (torch.arange(length) + 1).repeat(batch_size, 1),
        "sources": torch.full((batch_size, length), -1, dtype=torch.long),
        "targets": torch.zeros(batch_size, length, dtype=torch.long),
        "loss_weights": torch.zeros(batch_size, length),
    }
    for b, item in enumerate(items):
        n = len(item["input_ids"])
        for key, tensor in batch.items():
            tensor[b, :n] = item[key]
    return batch


def dense_mask(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The attention rule as a bool mask [B, 1, L, L], ``mask[b, 0, q, k]`` true where query q
    may attend to key k: what ``scaled_dot_product_attention`` (and transformers' "sdpa") takes.
    ``batch`` is a ``collate`` result (or one ``prepare`` result, for B = 1)."""
    ends = batch["ends"]
    if ends.dim() == 1:
        ends = ends[None]
    i = torch.arange(ends.shape[-1], device=ends.device)
    mask = (i[None, None, :] <= i[None, :, None]) & (i[None, :, None] < ends[:, None, :])
    return mask[:, None]


def block_mask(batch: dict[str, torch.Tensor], block_size: int = 128):
    """The attention rule as a FlexAttention ``BlockMask`` (torch >= 2.5): its ``mask_mod`` is
    ``(kv <= q) & (q < ends[b, kv])``. Blocks with no visible key are skipped by FlexAttention,
    so a packed record costs what its tree's visible keys cost, not L x L."""
    from torch.nn.attention.flex_attention import create_block_mask

    ends = batch["ends"]
    if ends.dim() == 1:
        ends = ends[None]

    def mask_mod(b, h, q, kv):
        return (kv <= q) & (q < ends[b, kv])

    batch_size, length = ends.shape
    return create_block_mask(
        mask_mod, batch_size, None, length, length, device=ends.device, BLOCK_SIZE=block_size
    )


def token_logprobs(logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Each token's log-probability under the model, [B, L] (or [L] for one ``prepare`` result):
    ``log_softmax(logits[sources[k]])[targets[k]]``, 0 where a token has no source. ``logits`` is
    the model's output for ``batch["input_ids"]``, [B, L, V] (or [L, V])."""
    sources, targets = batch["sources"], batch["targets"]
    if sources.dim() == 1:
        return token_logprobs(logits.reshape(1, *logits.shape[-2:]), {"sources": sources[None], "targets": targets[None]})[0]
    logp = logits.log_softmax(-1)
    rows = torch.arange(sources.shape[0], device=sources.device)[:, None]
    picked = logp[rows, sources.clamp(min=0), targets]
    return picked.masked_fill(sources < 0, 0.0)
