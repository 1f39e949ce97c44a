"""Short adapters from callforest's records and batches to other trainers' batch shapes.

docs/trainers.md maps every field and says what each trainer needs that callforest gives and what
it does not. Nothing here imports a trainer: the outputs are plain dicts, lists, numpy arrays and
tensors of the shapes those trainers document (TRL's collator is tested against directly)."""

from __future__ import annotations

import numpy as np
import torch

from .batch import varlen
from .codecs import decode_loss_mask, decode_routed_experts
from .io import layout_of

__all__ = [
    "megatron_packed_seq_params",
    "nemo_rl_batch",
    "tree_segments",
    "trl_examples",
    "verl_agent_loop_output",
]


def _row(record: dict) -> dict:
    if layout_of(record) != "row":
        raise ValueError("this trainer takes rows (callforest rows without --layout packed or --capacity)")
    return record


def verl_agent_loop_output(record: dict) -> dict:
    """One row as the fields of verl's ``AgentLoopOutput`` (verl/experimental/agent_loop/
    agent_loop.py): ``prompt_ids`` (the tokens before the first trained token), ``response_ids``
    (the rest), ``response_mask`` (1 on the tokens this row trains: the row's ``loss_mask``, so a
    context call's answer, trained in another row, is 0 like a tool response), ``response_logprobs``
    (the behaviour log-probs on the response, 0 where not sampled), ``routed_experts`` (an int16
    array [len(prompt) + len(response), L, K] for the total tokens, -1 where not routed, or None),
    ``reward_score``, ``num_turns`` (two per call on the path: its prompt and its answer) and
    ``extra_fields`` (``rollout_id``, ``group_id``, ``weight_versions``, ``calls``)."""
    row = _row(record)
    n = int(row["num_tokens"])
    mask = decode_loss_mask(row["loss_mask"], n).numpy()
    tokens = np.asarray(row["token_ids"], dtype=np.int64)
    logprobs = np.asarray(row["logprobs"], dtype=np.float32)
    start = int(np.argmax(mask)) if mask.any() else n
    experts = row.get("routed_experts")
    routes = None
    if experts is not None:
        routes = decode_routed_experts(experts)[:n].numpy().astype(np.int16)
    versions = row.get("weight_versions")
    return {
        "prompt_ids": tokens[:start].tolist(),
        "response_ids": tokens[start:].tolist(),
        "response_mask": mask[start:].astype(np.int64).tolist(),
        "response_logprobs": logprobs[start:].tolist(),
        "routed_experts": routes,
        "reward_score": float(row["reward"]),
        "num_turns": 2 * len(row["calls"]),
        "extra_fields": {
            "rollout_id": row["rollout_id"],
            "group_id": row.get("group_id"),
            "weight_versions": None if versions is None else np.asarray(versions, dtype=np.int32).tolist(),
            "calls": list(row["calls"]),
        },
    }


def trl_examples(records) -> list[dict]:
    """Rows as TRL's language-modeling examples, ``{"input_ids", "labels"}`` with ``labels`` -100
    where the row does not train the token: what ``trl.trainer.sft_trainer.
    DataCollatorForLanguageModeling`` collates, padding-free (``padding_free=True``: one sequence,
    ``position_ids`` restarting per row) or padded. TRL has no tree attention: give it rows."""
    out = []
    for record in records:
        row = _row(record)
        n = int(row["num_tokens"])
        tokens = np.asarray(row["token_ids"], dtype=np.int64)
        labels = np.where(decode_loss_mask(row["loss_mask"], n).numpy(), tokens, -100)
        out.append({"input_ids": tokens.tolist(), "labels": labels.tolist()})
    return out


def nemo_rl_batch(batch: dict) -> dict:
    """A :func:`callforest.collate` batch of rows as the keys of NeMo RL's ``ClippedPGLossDataDict``
    (nemo_rl/algorithms/loss_functions.py) and its routed-experts batch (nemo_rl/utils/
    routed_experts_ref.py): ``input_ids`` [B, S], ``input_lengths`` [B], ``token_mask`` [B, S]
    (float: the loss mask, staleness cut included), ``sample_mask`` [B] (1 for a real row),
    ``advantages`` [B, S], ``generation_logprobs`` [B, S] (the behaviour log-probs), and
    ``routed_experts`` [B, S, L, K] int16 with -1 where no route was captured. NeMo RL computes
    ``prev_logprobs`` and ``reference_policy_logprobs`` itself."""
    if any(layout != "row" for layout in batch["layouts"]):
        raise ValueError("NeMo RL takes rows: one record per batch row, causal")
    real = batch["doc_ids"] >= 0
    out = {
        "input_ids": batch["input_ids"],
        "input_lengths": real.sum(1).to(torch.int32),
        "token_mask": batch["loss_mask"].float(),
        "sample_mask": real.any(1).float(),
        "generation_logprobs": batch["old_logprobs"],
    }
    if "advantages" in batch:
        out["advantages"] = batch["advantages"]
    if "routed_experts" in batch:
        out["routed_experts"] = batch["routed_experts"].to(torch.int16)
    return out


def tree_segments(record: dict) -> dict[str, torch.Tensor]:
    """A packed tree or bin's segment table as int32 tensors [S], in depth-first pre-order (SPEC's
    order): ``start``, ``length``, ``parent`` (-1 for a root) and ``end`` (just past the
    segment's subtree) — the parameters a tree-packed attention kernel takes (Megatron-based tree
    trainers, AReaL's tries: a node is ``[start, start + length)`` and its ancestors are the
    ``parent`` chain). A row is one segment."""
    n = int(record["num_tokens"])
    segments = record.get("segments") or [{"parent": -1, "start": 0, "length": n, "end": n}]
    return {
        key: torch.tensor([int(s[key]) for s in segments], dtype=torch.int32)
        for key in ("start", "length", "parent", "end")
    }


def megatron_packed_seq_params(batch: dict) -> dict:
    """A batch of rows as the fields of Megatron core's ``PackedSeqParams``
    (megatron/core/packed_seq_params.py) for the ``thd`` (packed, padding-free) format:
    ``PackedSeqParams(**megatron_packed_seq_params(batch))``, with the tokens of
    :func:`callforest.varlen`. Rows only: a packed tree needs the tree rule
    (:func:`tree_segments`, :func:`callforest.block_mask`)."""
    flat = varlen(batch)
    return {
        "qkv_format": "thd",
        "cu_seqlens_q": flat["cu_seqlens"],
        "cu_seqlens_kv": flat["cu_seqlens"],
        "max_seqlen_q": flat["max_seqlen"],
        "max_seqlen_kv": flat["max_seqlen"],
    }
