"""callforest for PyTorch trainers: read callforest's rows, packed trees and bins, and turn them
into RL batches (behaviour log-probs, loss masks, rewards, groups, advantages, weight versions,
routed experts) with the attention masks of each style and a token-level PPO/GRPO loss.

    import callforest as cf

    batch = cf.collate(cf.read_records("trees.parquet"), current_version=8, max_staleness=1)
    logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"],
                   attention_mask=cf.dense_mask(batch)).logits
    loss = cf.policy_loss(cf.token_logprobs(logits, batch), batch)
    loss.backward()

SPEC.md (in the callforest repository) defines the records; docs/trainers.md maps them to verl,
TRL, NeMo RL, AReaL and Megatron batches."""

from .batch import (
    TOKEN_FIELDS,
    block_mask,
    collate,
    dense_mask,
    pack_collate,
    prepare,
    token_logprobs,
    varlen,
)
from .codecs import decode_loss_mask, decode_routed_experts, encode_loss_mask, encode_routed_experts
from .io import (
    IterableRecordDataset,
    RecordDataset,
    dataset_files,
    iter_record_batches,
    iter_records,
    layout_of,
    normalize,
    read_records,
)
from .rl import compute_advantages, grpo_advantages, policy_loss, ppo_token_losses, stale_mask
from .trainers import megatron_packed_seq_params, nemo_rl_batch, tree_segments, trl_examples, verl_agent_loop_output

__version__ = "0.1.0"


def loss_mask(record: dict):
    """A record's ``loss_mask`` as a bool tensor [num_tokens] (any of SPEC's forms)."""
    return decode_loss_mask(record["loss_mask"], int(record["num_tokens"]))


__all__ = [
    "TOKEN_FIELDS",
    "IterableRecordDataset",
    "RecordDataset",
    "block_mask",
    "collate",
    "compute_advantages",
    "dataset_files",
    "decode_loss_mask",
    "decode_routed_experts",
    "dense_mask",
    "encode_loss_mask",
    "encode_routed_experts",
    "grpo_advantages",
    "iter_record_batches",
    "iter_records",
    "layout_of",
    "loss_mask",
    "megatron_packed_seq_params",
    "nemo_rl_batch",
    "normalize",
    "pack_collate",
    "policy_loss",
    "ppo_token_losses",
    "prepare",
    "read_records",
    "stale_mask",
    "token_logprobs",
    "tree_segments",
    "trl_examples",
    "varlen",
    "verl_agent_loop_output",
]
