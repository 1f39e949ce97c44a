"""RL pieces on a :func:`callforest.collate` batch: advantages (GRPO's group baseline built in),
the staleness cut on weight versions, and the token-level PPO/GRPO clipped loss.

Why packed records and rows give the same loss: every generated token is trained (``loss_mask``
1) in exactly one record of either layout, with the same source tokens visible, so its
log-prob, its ``old_logprobs``, its weight version and its rollout's advantage are the same in
both; a loss that is a sum over trained tokens of a function of those (the *summed form*), or
that sum divided by a constant that does not depend on the layout (the number of trained tokens
of the whole batch, a fixed token budget), is the same. A mean per record or per sequence is not:
a row and a packed tree hold different sets of tokens."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

__all__ = [
    "compute_advantages",
    "grpo_advantages",
    "policy_loss",
    "ppo_token_losses",
    "stale_mask",
]


def stale_mask(weight_versions: torch.Tensor, current_version: int, max_staleness: int) -> torch.Tensor:
    """True where a token was sampled by a version older than ``current_version -
    max_staleness``. Tokens with no version (-1: context, or a rollout that gives none) are never
    stale."""
    return (weight_versions >= 0) & (current_version - weight_versions > max_staleness)


def grpo_advantages(source, *, scale: bool = True, eps: float = 1e-6) -> dict[str, float]:
    """GRPO's outcome advantage for each rollout: its reward minus the mean reward of its group,
    divided by the group's standard deviation (unbiased, as verl's
    ``compute_grpo_outcome_advantage``) plus ``eps`` when ``scale`` (Dr. GRPO: ``scale=False``).
    A group of one rollout has mean 0 and standard deviation 1 (verl's convention). A rollout
    with no ``group_id`` is a group of its own.

    ``source``: a :func:`callforest.collate` batch (the rollouts it holds), or records (a whole
    dataset: groups split across batches need this; pass the result to ``collate(...,
    advantages=result)``). Returns ``{rollout_id: advantage}``."""
    if isinstance(source, dict) and "rollout_ids" in source:
        rollouts = list(source["rollout_ids"])
        rewards = source["rollout_rewards"].tolist()
        groups = source["rollout_groups"].tolist()
    else:
        seen: dict[str, tuple[float, object]] = {}
        for record in source:
            rid = record["rollout_id"]
            if rid not in seen:
                group = record.get("group_id")
                seen[rid] = (float(record["reward"]), ("group", group) if group is not None else ("rollout", rid))
        rollouts = list(seen)
        rewards = [seen[r][0] for r in rollouts]
        groups = [seen[r][1] for r in rollouts]
    members: dict[object, list[int]] = {}
    for i, group in enumerate(groups):
        members.setdefault(group, []).append(i)
    values = torch.tensor(rewards, dtype=torch.float64)
    out = torch.empty_like(values)
    for idx in members.values():
        r = values[idx]
        if len(idx) == 1:
            mean, std = torch.tensor(0.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64)
        else:
            mean, std = r.mean(), r.std()
        out[idx] = (r - mean) / (std + eps) if scale else r - mean
    return dict(zip(rollouts, out.tolist()))


def compute_advantages(batch: dict, advantages) -> torch.Tensor:
    """Per-token advantages [B, L] (float32, 0 on padding) for ``collate``'s ``advantages``:
    ``"grpo"``, a ``{rollout_id: value}`` dict, or a callable ``f(batch)`` returning [B, L],
    [R] (one per rollout of ``batch["rollout_ids"]``) or [B] (one per batch row; when B equals R,
    the values are taken per rollout: return [B, L] to be unambiguous)."""
    index = batch["rollout_index"]
    if isinstance(advantages, str):
        if advantages != "grpo":
            raise ValueError(f"unknown advantage estimator {advantages!r} (use 'grpo' or a callable)")
        advantages = grpo_advantages(batch)
    if isinstance(advantages, dict):
        per_rollout = torch.tensor([advantages[r] for r in batch["rollout_ids"]], dtype=torch.float32)
    elif callable(advantages):
        value = torch.as_tensor(advantages(batch), dtype=torch.float32)
        if value.shape == index.shape:
            return value.masked_fill(index < 0, 0.0)
        if value.dim() == 1 and value.shape[0] == index.shape[0] and value.shape[0] != len(batch["rollout_ids"]):
            return value[:, None].expand_as(index).masked_fill(index < 0, 0.0).clone()
        per_rollout = value.reshape(len(batch["rollout_ids"]))
    else:
        raise TypeError("advantages: 'grpo', a dict of rollout_id -> value, or a callable")
    return torch.where(index >= 0, per_rollout[index.clamp(min=0)], 0.0)


def ppo_token_losses(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    clip: float = 0.2,
    clip_high: float | None = None,
) -> torch.Tensor:
    """The clipped surrogate per token, as a loss: ``-min(r * A, clip(r, 1 - clip, 1 + clip_high)
    * A)`` with ``r = exp(logprobs - old_logprobs)`` (``clip_high`` defaults to ``clip``; a
    larger one is DAPO's clip-higher)."""
    high = clip if clip_high is None else clip_high
    ratio = torch.exp(logprobs - old_logprobs.to(logprobs.dtype))
    advantages = advantages.to(logprobs.dtype)
    return -torch.minimum(ratio * advantages, ratio.clamp(1 - clip, 1 + high) * advantages)


def policy_loss(
    logprobs: torch.Tensor,
    batch: dict,
    clip: float = 0.2,
    clip_high: float | None = None,
    normalizer: float | str | None = None,
    advantages: torch.Tensor | None = None,
) -> torch.Tensor:
    """The token-level PPO/GRPO loss of a batch: :func:`ppo_token_losses` summed over the tokens
    of ``batch["loss_mask"]`` (the summed form, ``normalizer=None``), or that sum divided by
    ``normalizer``: a number (a fixed token budget, as Dr. GRPO), or ``"tokens"`` (the batch's
    trained tokens; the same for rows and packed records of the same rollouts, so the loss is
    too). ``logprobs``: :func:`callforest.token_logprobs`; ``advantages`` defaults to
    ``batch["advantages"]``."""
    adv = batch["advantages"] if advantages is None else advantages
    mask = batch["loss_mask"]
    old = batch["old_logprobs"].to(logprobs.dtype)
    # Off the mask the ratio is 1, so no exp() of an untrained token can overflow into the gradient.
    losses = ppo_token_losses(torch.where(mask, logprobs, old), old, adv, clip, clip_high)
    total = torch.where(mask, losses, torch.zeros((), dtype=losses.dtype)).sum()
    if normalizer is None:
        return total
    if normalizer == "tokens":
        return total / mask.sum().clamp(min=1)
    return total / normalizer
