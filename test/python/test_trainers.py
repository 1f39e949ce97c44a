"""The adapters to other trainers' batches (docs/trainers.md): TRL against its own collator and
transformers' loss; verl, NeMo RL and Megatron against the shapes their code documents (none of
them installs from the local wheel store)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import routes_refit_v4, with_v4_fields

import callforest as cf


def test_trl_padding_free_collator_and_loss(outputs):
    """TRL's own DataCollatorForLanguageModeling (padding_free) over cf.trl_examples gives the
    sequence, positions and trained tokens of cf.varlen, and transformers' loss on it (mean over
    TRL's labels) is callforest's masked log-probability mean on the same logits."""
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    rows = outputs.jsonl("rows")[:10]
    collated = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)(cf.trl_examples(rows))
    flat = cf.varlen(cf.pack_collate(rows, 10**6))
    assert torch.equal(collated["input_ids"], flat["input_ids"])
    assert torch.equal(collated["position_ids"], flat["position_ids"])
    assert torch.equal(collated["labels"] != -100, flat["loss_mask"])

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=257, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=512)  # fmt: skip
    model = Qwen3ForCausalLM(config).to(torch.float64).eval()
    labels = torch.where(collated["labels"] >= 0, collated["labels"] % 257, -100)
    with torch.no_grad():
        out = model(input_ids=collated["input_ids"] % 257, position_ids=collated["position_ids"], labels=labels, use_cache=False)
        lp = cf.token_logprobs(out.logits, {**flat, "targets": flat["targets"] % 257})
    ours = -(lp[flat["loss_mask"]]).mean()
    # transformers takes the loss in float32 (ForCausalLMLoss upcasts the logits): ~1e-7 relative.
    assert abs(out.loss.item() - ours.item()) <= 1e-6 * abs(ours.item())


def test_verl_agent_loop_output(outputs):
    rows = with_v4_fields(outputs, outputs.jsonl("rows"))
    for row in rows:
        out = cf.verl_agent_loop_output(row)
        n, mask = row["num_tokens"], cf.loss_mask(row)
        assert out["prompt_ids"] + out["response_ids"] == row["token_ids"]
        assert len(out["response_mask"]) == len(out["response_ids"]) == len(out["response_logprobs"])
        assert sum(out["response_mask"]) == int(mask.sum()) and not mask[: len(out["prompt_ids"])].any()
        assert out["reward_score"] == row["reward"] and out["extra_fields"]["group_id"] == row["group_id"]
        assert out["extra_fields"]["weight_versions"] == row["weight_versions"]
        if row["rollout_id"] == "login-bug-experts":
            assert out["routed_experts"].shape == (n, 3, 2) and out["routed_experts"].dtype == np.int16
        else:
            assert out["routed_experts"] is None
    refit = cf.verl_agent_loop_output(routes_refit_v4()["rows"][1])
    assert refit["prompt_ids"] == [1, 2, 3, 10, 11, 20, 30, 31, 40] and refit["response_ids"] == [50]
    assert refit["routed_experts"][-1].tolist() == [[-1], [-1]] and refit["extra_fields"]["group_id"] == "task-42"
    with pytest.raises(ValueError, match="rows"):
        cf.verl_agent_loop_output(outputs.jsonl("trees")[0])


def test_nemo_rl_batch(outputs):
    rows = with_v4_fields(outputs, outputs.jsonl("rows"))
    batch = cf.collate(rows, batch_size=len(rows) + 1, current_version=10, max_staleness=1)
    out = cf.nemo_rl_batch(batch)
    B, S = len(rows) + 1, max(r["num_tokens"] for r in rows)
    assert out["input_ids"].shape == out["token_mask"].shape == out["advantages"].shape == (B, S)
    assert out["input_lengths"].tolist() == [r["num_tokens"] for r in rows] + [0]
    assert out["sample_mask"].tolist() == [1.0] * len(rows) + [0.0]
    assert torch.equal(out["token_mask"].bool(), batch["loss_mask"])
    assert out["routed_experts"].shape == (B, S, 3, 2) and out["routed_experts"].dtype == torch.int16
    assert (out["routed_experts"][-1] == -1).all()
    with pytest.raises(ValueError, match="rows"):
        cf.nemo_rl_batch(cf.collate(outputs.jsonl("trees")))


def test_tree_segments_and_megatron_params(outputs):
    for record in outputs.jsonl("bins-64") + outputs.jsonl("trees"):
        seg = cf.tree_segments(record)
        assert seg["start"].tolist() == [s["start"] for s in record["segments"]]
        assert seg["parent"].tolist() == [s["parent"] for s in record["segments"]]
        # Pre-order: a parent comes before its children, and a subtree is one interval.
        for i, (p, end) in enumerate(zip(seg["parent"].tolist(), seg["end"].tolist())):
            assert p < i and (p < 0 or seg["start"][p] < seg["start"][i] <= end <= seg["end"][p])
    rows = outputs.jsonl("rows")
    params = cf.megatron_packed_seq_params(cf.pack_collate(rows, 256))
    lengths = [r["num_tokens"] for r in rows]
    assert params["qkv_format"] == "thd" and params["max_seqlen_q"] == max(lengths)
    assert params["cu_seqlens_q"].tolist() == np.cumsum([0] + lengths).tolist()
