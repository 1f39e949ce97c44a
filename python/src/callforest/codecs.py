"""SPEC's encodings: the ``loss_mask`` bitset and the ``routed_experts`` envelope.

- ``loss_mask``: base64 of a bitset (bit i is bit ``i % 8`` of byte ``i // 8``), a 0/1 list
  (``--mask-format ints``) or a list of bools (Parquet, Arrow).
- ``routed_experts``: NeMo RL's envelope ``nrlre1:<dtype>:<S>x<L>x<K>:<base64>`` (dtype int8,
  int16 or int32; little-endian C-order bytes), or nested lists ``[S][L][K]``. An entry whose
  ``L x K`` values are all -1 is not routed (nothing to replay there)."""

from __future__ import annotations

import base64
import re

import numpy as np
import torch

__all__ = ["decode_loss_mask", "decode_routed_experts", "encode_loss_mask", "encode_routed_experts"]

_ENVELOPE = re.compile(r"^nrlre1:(int8|int16|int32):(\d+)x(\d+)x(\d+):([A-Za-z0-9+/]*={0,2})$")
_DTYPES = {"int8": "<i1", "int16": "<i2", "int32": "<i4"}


def decode_loss_mask(mask, n: int) -> torch.Tensor:
    """A record's ``loss_mask`` (any of SPEC's forms) as a bool tensor [n]."""
    if isinstance(mask, str):
        bits = np.unpackbits(np.frombuffer(base64.b64decode(mask), np.uint8), bitorder="little")
        if len(bits) < n:
            raise ValueError(f"loss_mask holds {len(bits)} bits, fewer than num_tokens {n}")
        return torch.from_numpy(bits[:n].astype(np.bool_))
    return torch.tensor(np.asarray(mask, dtype=np.bool_).reshape(n))


def encode_loss_mask(mask) -> str:
    """Bools or 0/1 values as SPEC's base64 bitset."""
    bits = np.asarray(mask, dtype=np.bool_)
    return base64.b64encode(np.packbits(bits, bitorder="little").tobytes()).decode()


def decode_routed_experts(value) -> torch.Tensor:
    """``routed_experts`` (an envelope or ``[S][L][K]`` lists) as an int64 tensor [S, L, K]."""
    if isinstance(value, str):
        match = _ENVELOPE.match(value)
        if match is None:
            raise ValueError(f"not an nrlre1 envelope: {value[:40]!r}")
        dtype, s, l, k, payload = match.groups()
        shape = (int(s), int(l), int(k))
        data = np.frombuffer(base64.b64decode(payload, validate=True), dtype=_DTYPES[dtype])
        if data.size != shape[0] * shape[1] * shape[2]:
            raise ValueError(f"routed_experts holds {data.size} values, not {shape}")
        return torch.tensor(data.reshape(shape).astype(np.int64))
    array = np.asarray(value, dtype=np.int64)
    if array.size == 0:
        return torch.zeros((0, 0, 0), dtype=torch.long)
    if array.ndim != 3:
        raise ValueError(f"routed_experts must be [S][L][K], got shape {array.shape}")
    return torch.from_numpy(array)


def encode_routed_experts(experts) -> str:
    """An integer array [S, L, K] as the envelope: int16 unless a value needs int32 (as the CLI
    writes it)."""
    array = np.asarray(experts.cpu() if isinstance(experts, torch.Tensor) else experts, dtype=np.int64)
    if array.ndim != 3:
        raise ValueError(f"routed_experts must be [S, L, K], got shape {array.shape}")
    small = array.size == 0 or (array.min() >= -(2**15) and array.max() < 2**15)
    dtype = "int16" if small else "int32"
    payload = base64.b64encode(array.astype(_DTYPES[dtype]).tobytes()).decode()
    s, l, k = array.shape
    return f"nrlre1:{dtype}:{s}x{l}x{k}:{payload}"
