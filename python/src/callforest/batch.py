"""Training tensors from callforest's records: one record (:func:`prepare`), a padded batch
(:func:`collate`), a batch whose rows are filled with whole records up to a token budget
(:func:`pack_collate`), and the attention masks of each style (:func:`dense_mask`,
:func:`block_mask`, :func:`varlen`).

Every per-token tensor is indexed by the token ``k`` it describes, which is also the prediction
target at ``k``: ``sources[k]`` is the index whose output predicts it (SPEC's prediction rule),
``old_logprobs[k]`` the behaviour log-prob it was sampled with, ``loss_mask[k]`` whether the loss
counts it, and so on. SPEC's three rules:

- positions: ``position_ids`` as given (a row's are 0..n-1);
- attention: query ``q`` sees key ``k`` iff ``k <= q < ends[k]`` (a row is one segment, ``end = n``);
- prediction: token ``k`` from the output at ``k - 1``, except the first token of a segment with a
  parent, predicted from the parent segment's last token; a root's first token has no source
  (``sources[k] == -1``) and is never in the loss."""

from __future__ import annotations

import numpy as np
import torch

from .codecs import decode_loss_mask, decode_routed_experts
from .io import layout_of

__all__ = [
    "TOKEN_FIELDS",
    "block_mask",
    "collate",
    "dense_mask",
    "pack_collate",
    "prepare",
    "token_logprobs",
    "varlen",
]

#: The per-token tensors of a batch, with their padding values.
TOKEN_FIELDS = {
    "input_ids": 0,
    "position_ids": 0,
    "targets": 0,
    "old_logprobs": 0.0,
    "trained": False,
    "loss_mask": False,
    "loss_weights": 0.0,
    "rewards": 0.0,
    "weight_versions": -1,
}


def _array(values, dtype, n: int) -> torch.Tensor:
    return torch.tensor(np.asarray(values, dtype=dtype)).reshape(n)


def _segments(record: dict) -> list[dict]:
    if "segments" in record:
        return record["segments"]
    n = record["num_tokens"]
    return [{"parent": -1, "start": 0, "length": n, "end": n}]


def prepare(record: dict) -> dict:
    """One row, packed tree or bin (SPEC v3 or v4) as tensors [n], n = ``num_tokens``:

    - ``input_ids``, ``position_ids``, ``targets`` (= ``input_ids``): int64;
    - ``ends`` (the ``end`` of each token's segment), ``sources`` (-1: none): int64;
    - ``trained``: the record's ``loss_mask`` bits; ``loss_mask``: trained and with a source;
      ``loss_weights``: the same as float32;
    - ``old_logprobs``: the record's ``logprobs`` (float32; 0 on context tokens);
    - ``rewards``: the record's ``reward`` on every token (float32);
    - ``weight_versions``: int64, -1 where none (all -1 when the record has none);
    - ``routed_experts``: int64 [n, L, K], -1 where not routed, only when the record has them;

    and the record's ``rollout_id``, ``group_id`` (None when it names none), ``reward`` and
    ``layout`` (``"row"``, ``"tree"``, ``"bin"``) as plain values."""
    n = int(record["num_tokens"])
    input_ids = _array(record["token_ids"], np.int64, n)
    position_ids = _array(record["position_ids"], np.int64, n) if "position_ids" in record else torch.arange(n)
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
    trained = decode_loss_mask(record["loss_mask"], n)
    mask = trained & (sources >= 0)
    versions = record.get("weight_versions")
    out = {
        "input_ids": input_ids,
        "position_ids": position_ids,
        "ends": ends,
        "sources": sources,
        "targets": input_ids.clone(),
        "old_logprobs": _array(record["logprobs"], np.float32, n),
        "trained": trained,
        "loss_mask": mask,
        "loss_weights": mask.float(),
        "rewards": torch.full((n,), float(record["reward"]), dtype=torch.float32),
        "weight_versions": torch.full((n,), -1, dtype=torch.long) if versions is None else _array(versions, np.int64, n),
        "rollout_id": record["rollout_id"],
        "group_id": record.get("group_id"),
        "reward": float(record["reward"]),
        "layout": layout_of(record),
    }
    experts = record.get("routed_experts")
    if experts is not None:
        routes = decode_routed_experts(experts)
        if routes.shape[0] < n:  # (v4 rows may stop one short: the last token is routed by no one)
            pad = torch.full((n - routes.shape[0], *routes.shape[1:]), -1, dtype=torch.long)
            routes = torch.cat([routes, pad])
        out["routed_experts"] = routes[:n]
    return out


def _items(records) -> list[dict]:
    return [r if "ends" in r else prepare(r) for r in records]


def _finish(batch: dict, advantages, current_version, max_staleness) -> dict:
    """Staleness cut and advantages on an assembled batch."""
    from .rl import compute_advantages, stale_mask

    if max_staleness is not None:
        if current_version is None:
            raise ValueError("max_staleness needs current_version")
        batch["stale"] = stale_mask(batch["weight_versions"], current_version, max_staleness)
        batch["loss_mask"] = batch["loss_mask"] & ~batch["stale"]
        batch["loss_weights"] = batch["loss_mask"].float()
    if advantages is not None:
        batch["advantages"] = compute_advantages(batch, advantages)
    return batch


def _empty_batch(batch_size: int, length: int, routes_shape) -> dict:
    batch = {
        "input_ids": torch.zeros(batch_size, length, dtype=torch.long),
        "position_ids": torch.zeros(batch_size, length, dtype=torch.long),
        # A padding token attends to itself only, so no mask row is empty and no real token sees it.
        "ends": (torch.arange(length) + 1).repeat(batch_size, 1),
        "sources": torch.full((batch_size, length), -1, dtype=torch.long),
        "targets": torch.zeros(batch_size, length, dtype=torch.long),
        "old_logprobs": torch.zeros(batch_size, length),
        "trained": torch.zeros(batch_size, length, dtype=torch.bool),
        "loss_mask": torch.zeros(batch_size, length, dtype=torch.bool),
        "loss_weights": torch.zeros(batch_size, length),
        "rewards": torch.zeros(batch_size, length),
        "weight_versions": torch.full((batch_size, length), -1, dtype=torch.long),
        "doc_ids": torch.full((batch_size, length), -1, dtype=torch.long),
        "rollout_index": torch.full((batch_size, length), -1, dtype=torch.long),
        "group_ids": torch.full((batch_size, length), -1, dtype=torch.long),
    }
    if routes_shape is not None:
        batch["routed_experts"] = torch.full((batch_size, length, *routes_shape), -1, dtype=torch.long)
    return batch


def _routes_shape(items):
    shapes = {tuple(item["routed_experts"].shape[1:]) for item in items if "routed_experts" in item}
    if len(shapes) > 1:
        raise ValueError(f"records route with different [L, K]: {sorted(shapes)}")
    return shapes.pop() if shapes else None


def _assemble(items: list[dict], placement: list[tuple[int, int]], batch_size: int, length: int) -> dict:
    """Items placed at (batch row, offset): a batch [batch_size, length] with the metadata."""
    batch = _empty_batch(batch_size, length, _routes_shape(items))
    rollout_ids, rewards, rollout_groups, groups = [], [], [], []
    rollout_at, group_at = {}, {}
    for d, (item, (b, at)) in enumerate(zip(items, placement)):
        n = len(item["input_ids"])
        span = slice(at, at + n)
        for key in TOKEN_FIELDS:
            batch[key][b, span] = item[key]
        batch["ends"][b, span] = item["ends"] + at
        batch["sources"][b, span] = torch.where(item["sources"] >= 0, item["sources"] + at, -1)
        batch["doc_ids"][b, span] = d
        if "routed_experts" in item:
            batch["routed_experts"][b, span] = item["routed_experts"]
        rid = item["rollout_id"]
        if rid not in rollout_at:
            # A rollout that names no group is a group of its own.
            group = ("group", item["group_id"]) if item["group_id"] is not None else ("rollout", rid)
            if group not in group_at:
                group_at[group] = len(groups)
                groups.append(item["group_id"])
            rollout_at[rid] = len(rollout_ids)
            rollout_ids.append(rid)
            rewards.append(item["reward"])
            rollout_groups.append(group_at[group])
        batch["rollout_index"][b, span] = rollout_at[rid]
        batch["group_ids"][b, span] = rollout_groups[rollout_at[rid]]
    batch["rollout_ids"] = rollout_ids
    batch["rollout_rewards"] = torch.tensor(rewards, dtype=torch.float64)
    batch["rollout_groups"] = torch.tensor(rollout_groups, dtype=torch.long)
    batch["group_names"] = groups
    batch["layouts"] = [item["layout"] for item in items]
    batch["doc_placement"] = [(b, at, len(item["input_ids"])) for item, (b, at) in zip(items, placement)]
    return batch


def collate(
    records,
    pad_to_multiple_of: int = 1,
    length: int | None = None,
    batch_size: int | None = None,
    *,
    advantages="grpo",
    current_version: int | None = None,
    max_staleness: int | None = None,
) -> dict:
    """Records (or :func:`prepare` results) as one RL batch, one record per batch row, [B, L]:

    the tensors of :func:`prepare` padded (a padding token has id 0, position 0, no source, mask
    0, version -1, routes -1, and attends to itself only), and

    - ``doc_ids`` [B, L]: the record each token belongs to (-1: padding);
    - ``rollout_index``, ``group_ids`` [B, L]: each token's rollout and group, indices into
      ``rollout_ids`` (list of str), ``rollout_rewards`` [R] and ``group_names`` (the group names,
      None for a rollout that names none: a group of its own); ``rollout_groups`` [R];
    - ``stale`` [B, L] (with ``max_staleness``): targets whose weight version is older than
      ``current_version - max_staleness``; they leave ``loss_mask`` and stay as context;
    - ``advantages`` [B, L] (float32, 0 on padding): ``"grpo"`` (default) normalises each
      rollout's reward within its group (:func:`callforest.grpo_advantages`); a dict gives each
      rollout's advantage; a callable takes the batch and returns [B, L], [B] or [R] values;
      ``None`` adds none;
    - ``routed_experts`` [B, L, L_moe, K] when any record has routes (-1 where not routed).

    L is the longest record rounded up to ``pad_to_multiple_of``, or ``length``; B the number of
    records, or ``batch_size``. Fixed shapes spare ``torch.compile`` (FlexAttention) recompiles."""
    items = _items(records)
    longest = max((len(item["input_ids"]) for item in items), default=1)
    if length is None:
        length = -(-longest // pad_to_multiple_of) * pad_to_multiple_of
    if batch_size is None:
        batch_size = len(items)
    if longest > length or len(items) > batch_size:
        raise ValueError(f"{len(items)} records of up to {longest} tokens do not fit [{batch_size}, {length}]")
    batch = _assemble(items, [(b, 0) for b in range(len(items))], batch_size, length)
    return _finish(batch, advantages, current_version, max_staleness)


def pack_collate(
    records,
    token_budget: int,
    batch_size: int | None = None,
    *,
    advantages="grpo",
    current_version: int | None = None,
    max_staleness: int | None = None,
) -> dict:
    """Records (rows, packed trees or bins) packed whole into batch rows of ``token_budget``
    tokens, first fit in the records' order: the same fields as :func:`collate`, [B,
    token_budget]. Records in one batch row are independent trees of one packed sequence (each
    record's ``ends`` and ``sources`` shifted by its offset), so the attention rule, the masks and
    the prediction rule hold as they are; ``position_ids`` restart at each record. A record
    longer than ``token_budget`` is an error."""
    items = _items(records)
    room: list[int] = []
    placement = []
    for item in items:
        n = len(item["input_ids"])
        if n > token_budget:
            raise ValueError(f"a record of {n} tokens does not fit a budget of {token_budget}")
        b = next((i for i, left in enumerate(room) if left >= n), None)
        if b is None:
            b = len(room)
            room.append(token_budget)
        placement.append((b, token_budget - room[b]))
        room[b] -= n
    if batch_size is None:
        batch_size = len(room)
    if len(room) > batch_size:
        raise ValueError(f"{len(items)} records need {len(room)} rows of {token_budget} tokens, more than {batch_size}")
    batch = _assemble(items, placement, batch_size, token_budget)
    return _finish(batch, advantages, current_version, max_staleness)


def dense_mask(batch: dict) -> torch.Tensor:
    """The attention rule as a bool mask [B, 1, L, L], ``mask[b, 0, q, k]`` true where query q
    may attend to key k: what ``scaled_dot_product_attention`` (transformers' "sdpa") takes.
    ``batch``: a :func:`collate` result, or one :func:`prepare` result (B = 1)."""
    ends = batch["ends"]
    if ends.dim() == 1:
        ends = ends[None]
    i = torch.arange(ends.shape[-1], device=ends.device)
    mask = (i[None, None, :] <= i[None, :, None]) & (i[None, :, None] < ends[:, None, :])
    return mask[:, None]


def block_mask(batch: dict, block_size: int = 128):
    """The attention rule as a FlexAttention ``BlockMask``: its ``mask_mod`` is
    ``(kv <= q) & (q < ends[b, kv])``. FlexAttention skips blocks with no visible key, so a
    packed record costs its tree's visible keys, not L x L."""
    from torch.nn.attention.flex_attention import create_block_mask

    ends = batch["ends"]
    if ends.dim() == 1:
        ends = ends[None]

    def mask_mod(b, h, q, kv):
        return (kv <= q) & (q < ends[b, kv])

    batch_size, length = ends.shape
    return create_block_mask(mask_mod, batch_size, None, length, length, device=ends.device, BLOCK_SIZE=block_size)


def varlen(batch: dict) -> dict:
    """A batch of rows, padding-free, as varlen attention kernels take it (flash-attn's
    ``cu_seqlens``; transformers' and TRL's padding-free ``position_ids``): every real token of
    the batch in one sequence [1, N], records one after the other.

    Returns ``input_ids``, ``position_ids``, ``targets``, ``sources`` (indices into the flat
    sequence), ``cu_seqlens`` (int32 [D+1]: record d is ``[cu_seqlens[d], cu_seqlens[d+1])``),
    ``max_seqlen``, ``index`` (each flat token's index into ``B * L``, to gather any other
    per-token tensor: ``batch[name].flatten()[index]``) and the per-token tensors of the batch
    gathered so. Packed trees and bins have no varlen form (a varlen kernel is causal inside a
    record): they raise ValueError; use :func:`dense_mask` or :func:`block_mask`."""
    placement = batch["doc_placement"]
    length = batch["input_ids"].shape[1]
    ends = batch["ends"]
    index, starts = [], [0]
    for b, at, n in placement:
        if not bool((ends[b, at : at + n] == at + n).all()):
            raise ValueError("varlen takes rows only: a packed tree or bin needs the tree attention rule")
        index.append(torch.arange(b * length + at, b * length + at + n))
        starts.append(starts[-1] + n)
    index = torch.cat(index) if index else torch.zeros(0, dtype=torch.long)
    flat_of = torch.full((ends.numel(),), -1, dtype=torch.long)
    flat_of[index] = torch.arange(len(index))
    rows = torch.arange(ends.shape[0])[:, None] * length
    flat_sources = torch.where(batch["sources"] >= 0, flat_of[(batch["sources"] + rows).clamp(min=0)], -1)
    out = {
        name: batch[name].flatten(0, 1)[index][None]
        for name in (*TOKEN_FIELDS, "doc_ids", "rollout_index", "group_ids", "advantages", "stale", "routed_experts")
        if name in batch
    }
    out["sources"] = flat_sources.flatten()[index][None]
    out["cu_seqlens"] = torch.tensor(starts, dtype=torch.int32)
    out["max_seqlen"] = max((n for _, _, n in placement), default=0)
    out["index"] = index
    return out


def token_logprobs(logits: torch.Tensor, batch: dict) -> torch.Tensor:
    """Each token's log-probability under the model, [B, L] (or [L] for one :func:`prepare`
    result): ``log_softmax(logits[sources[k]])[targets[k]]``, 0 where a token has no source.
    ``logits``: the model's output for ``batch["input_ids"]``, [B, L, V] (or [L, V])."""
    sources, targets = batch["sources"], batch["targets"]
    if sources.dim() == 1:
        one = {"sources": sources[None], "targets": targets[None]}
        return token_logprobs(logits.reshape(1, *logits.shape[-2:]), one)[0]
    rows = torch.arange(sources.shape[0], device=sources.device)[:, None]
    picked_logits = logits[rows, sources.clamp(min=0)]  # [B, L, V]: only the sources' rows
    logp = picked_logits.log_softmax(-1).gather(-1, targets[..., None])[..., 0]
    return logp.masked_fill(sources < 0, 0.0)
