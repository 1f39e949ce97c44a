"""Routing replay (R3) on transformers' own MoE class, Qwen3MoeForCausalLM (tiny config, random
weights, float64, CPU): the router's top-k selection is replaced by the record's
``routed_experts`` where they are given, the weights of the selected experts still come from
the live router (as R3 implementations do: the selection is replayed, the gate stays
differentiable); an all -1 entry (not routed) keeps the live top-k.

- The CLI's rows, packed trees and bins of SPEC's worked example with routes on every call
  (conftest: token t, layer l, slot k routed to (7t + 3l + k) % 64) give every trained token the
  same log-probability, and the same loss and gradients, under replay.
- SPEC v4's routes example (records by hand, conftest.routes_refit_v4): the two rows and the one
  packed record whose trie branches where C3's prefill routed token 3 differently give the same
  log-probabilities and gradients; merging C3 into C2's tree by tokens alone (v3's link, what a
  route-blind packer does) replays C1's and C2's route for token 3 under C3 and changes C3's
  log-probability — why the trie branches there (SPEC v4 ``route_mismatch``).

Tolerance 1e-11 (absolute on log-probabilities, relative on the loss and on each parameter's
gradient), as test_equivalence.py: float64 carries ~16 digits and the same sums in another
blocking move the last few (transformers' RMSNorm runs in the model's dtype here, see there).
A wrong route moves a log-probability by far more (test_planted_route_is_caught)."""

from __future__ import annotations

import contextlib
import math

import pytest
import torch
import torch.nn.functional as F
from conftest import routes_refit_v4
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeRMSNorm, Qwen3MoeTopKRouter

import callforest as cf

TOLERANCE = 1e-11
VOCAB = 97
_replay: dict = {"routes": None}  # [B * T, L, K] for the forward pass under way, or None


def replaying_router(self, hidden_states):
    """Qwen3MoeTopKRouter.forward with the selection replayed (in the input's dtype: the shipped
    one takes the softmax in float32)."""
    hidden_states = hidden_states.reshape(-1, self.hidden_dim)
    router_logits = F.linear(hidden_states, self.weight)
    probs = router_logits.softmax(-1)
    _, index = torch.topk(probs, self.top_k, dim=-1)
    routes = _replay["routes"]
    if routes is not None:
        given = routes[:, self.layer_index]  # [N, K]
        index = torch.where((given >= 0).all(-1, keepdim=True), given, index)
    value = probs.gather(-1, index)
    if self.norm_topk_prob:
        value = value / value.sum(-1, keepdim=True)
    return router_logits, value, index


def _rmsnorm_in_input_dtype(self, hidden_states):
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


@pytest.fixture(scope="module", autouse=True)
def patched():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Qwen3MoeTopKRouter, "forward", replaying_router)
        patch.setattr(Qwen3MoeRMSNorm, "forward", _rmsnorm_in_input_dtype)
        yield


@contextlib.contextmanager
def replay(routes: torch.Tensor | None):
    _replay["routes"] = None if routes is None else routes.flatten(0, 1)
    try:
        yield
    finally:
        _replay["routes"] = None


def make_moe(layers: int, top_k: int) -> torch.nn.Module:
    torch.manual_seed(0)
    config = Qwen3MoeConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=32, moe_intermediate_size=8, num_hidden_layers=layers,
        num_attention_heads=2, num_key_value_heads=1, head_dim=8, num_experts=64, num_experts_per_tok=top_k,
        max_position_embeddings=256,
    )  # fmt: skip
    model = Qwen3MoeForCausalLM(config)
    with torch.no_grad():  # unit-scale weights: sharp attention and routers, so differences show
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0, 1 / math.sqrt(p.shape[-1]))
    for i, layer in enumerate(model.model.layers):
        layer.mlp.gate.layer_index = i
    model.set_attn_implementation("sdpa")
    model.set_experts_implementation("eager")  # a loop over experts (grouped_mm takes no float64)
    return model.to(torch.float64).eval()


def run(model, records, routes=True, grad=False):
    """Per-token log-probabilities [B, T] under replay of the records' routes, and (with grad)
    the summed loss over trained tokens and every parameter's gradient."""
    batch = cf.collate(records, advantages=None)
    with replay(batch["routed_experts"] if routes else None), torch.set_grad_enabled(grad):
        logits = model(
            input_ids=batch["input_ids"] % VOCAB, position_ids=batch["position_ids"], attention_mask=cf.dense_mask(batch)
        ).logits
        lp = cf.token_logprobs(logits, {**batch, "targets": batch["targets"] % VOCAB})
        if not grad:
            return lp, batch
        model.zero_grad()
        loss = -(lp * batch["loss_weights"].to(lp.dtype)).sum()
        loss.backward()
    grads = {n: (p.grad.clone() if p.grad is not None else torch.zeros_like(p)) for n, p in model.named_parameters()}
    return lp.detach(), batch, loss.item(), grads


def keyed(records, lp, prompts):
    """Trained token -> log-probability, keyed by (rollout, call, position in the call's full
    sequence); a row's token belongs to the path call whose generated span holds it."""
    out = {}
    for b, record in enumerate(records):
        trained = cf.loss_mask(record)
        if "segments" in record:
            owner = [None] * record["num_tokens"]
            for s in record["segments"]:
                owner[s["start"] : s["start"] + s["length"]] = [s["call"]] * s["length"]
            positions = list(record["position_ids"])
        else:
            owner = [None] * record["num_tokens"]
            for call in record["calls"]:
                start, end = prompts[record["rollout_id"], call]
                owner[start:end] = [call] * (end - start)
            positions = list(range(record["num_tokens"]))
        for k in torch.nonzero(trained).flatten().tolist():
            key = (record["rollout_id"], owner[k], int(positions[k]))
            assert key not in out, f"{key} trained twice"
            out[key] = lp[b, k].item()
    return out


def assert_close(expected, got, what):
    assert expected.keys() == got.keys(), what
    worst = max(abs(expected[k] - got[k]) for k in expected)
    assert worst <= TOLERANCE, f"{what}: max |logprob difference| {worst:.3g}"
    return worst


def assert_grads(want, got, what):
    (want_loss, want_grads), (loss, grads) = want, got
    assert abs(loss - want_loss) <= TOLERANCE * abs(want_loss), f"{what}: loss {loss!r} vs {want_loss!r}"
    hit = 0
    for name, expected in want_grads.items():
        scale = expected.abs().max().item()
        diff = (grads[name] - expected).abs().max().item()
        assert diff <= TOLERANCE * max(scale, 1e-300), f"{what}: {name} differs by {diff:.3g} (scale {scale:.3g})"
        hit += scale > 0
    assert hit > len(want_grads) // 2, f"{what}: too few parameters with a gradient"


# --- the CLI's records of SPEC's worked example with routes on every call ---------------------


@pytest.fixture(scope="module")
def experts(outputs):
    prompts = {}
    for r in outputs.rollouts:
        for c in r["calls"]:
            p = len(c["prompt_token_ids"])
            prompts[r["rollout_id"], c["id"]] = (p, p + len(c["generation_token_ids"]))
    split = next(n for n in outputs.layouts if n.startswith("bins-") and n != "bins-64")
    layouts = {
        name: [r for r in outputs.jsonl(name) if r["rollout_id"] == "login-bug-experts"]
        for name in ("rows", "trees", "bins-64", split)
    }
    return make_moe(layers=3, top_k=2), layouts, prompts


def test_replay_is_the_same_over_rows_trees_and_bins(experts):
    model, layouts, prompts = experts
    lp, _, loss, grads = run(model, layouts["rows"], grad=True)
    want = keyed(layouts["rows"], lp, prompts)
    assert len(want) == 21
    for name, records in layouts.items():
        if name == "rows":
            continue
        got_lp, _, got_loss, got_grads = run(model, records, grad=True)
        worst = assert_close(want, keyed(records, got_lp, prompts), name)
        assert_grads((loss, grads), (got_loss, got_grads), name)
        print(f"{name}: {len(records)} records, max |logprob difference| {worst:.3g}, loss {got_loss!r} vs {loss!r}")


def test_replay_changes_what_the_live_router_would_do(experts):
    """The replayed routes are not the live router's choice, so replay is what is tested."""
    model, layouts, prompts = experts
    replayed, _ = run(model, layouts["trees"])
    live, _ = run(model, layouts["trees"], routes=False)
    a, b = keyed(layouts["trees"], replayed, prompts), keyed(layouts["trees"], live, prompts)
    assert max(abs(a[k] - b[k]) for k in a) > 1e-3


def test_planted_route_is_caught(experts):
    """One token's route changed in one layer of the packed trees moves the log-probabilities of
    tokens that see it far beyond the tolerance."""
    model, layouts, prompts = experts
    rows_lp, _ = run(model, layouts["rows"])
    want = keyed(layouts["rows"], rows_lp, prompts)
    trees = [dict(r) for r in layouts["trees"]]
    routes = cf.decode_routed_experts(trees[0]["routed_experts"]).clone()
    routes[2, 1] = (routes[2, 1] + 5) % 64
    trees[0]["routed_experts"] = cf.encode_routed_experts(routes)
    lp, _ = run(model, trees)
    got = keyed(trees, lp, prompts)
    worst = max(abs(want[k] - got[k]) for k in want)
    assert worst > 1e6 * TOLERANCE, worst
    print(f"a planted route moves a log-probability by {worst:.3g}")


# --- SPEC v4's routes example: the trie branches where the routes part ------------------------

REFIT_PROMPTS = {("routes-refit", "C1"): (3, 5), ("routes-refit", "C2"): (6, 8), ("routes-refit", "C3"): (9, 10)}


@pytest.fixture(scope="module")
def refit():
    return make_moe(layers=2, top_k=1), routes_refit_v4()


def test_v4_trie_record_replays_as_the_rows(refit):
    model, v4 = refit
    rows_lp, _, loss, grads = run(model, v4["rows"], grad=True)
    tree_lp, _, tree_loss, tree_grads = run(model, v4["trees"], grad=True)
    want = keyed(v4["rows"], rows_lp, REFIT_PROMPTS)
    assert sorted(k[1:] for k in want) == [("C1", 3), ("C1", 4), ("C2", 6), ("C2", 7), ("C3", 9)]
    assert_close(want, keyed(v4["trees"], tree_lp, REFIT_PROMPTS), "v4 packed record")
    assert_grads((loss, grads), (tree_loss, tree_grads), "v4 packed record")


def test_merging_across_a_route_mismatch_changes_the_replayed_logits(refit):
    """By tokens alone C3 continues C2 (v3 links it so): one tree C1 > C2 > C3 holding tokens 0-7
    once, with C1's and C2's routes. Replaying that record gives C3's sampled token another
    log-probability than its row (where token 3 went to expert 63 in layer 1), so the records
    cannot be merged there: the v4 trie branches at token 3 instead."""
    model, v4 = refit
    rows_lp, _ = run(model, v4["rows"])
    want = keyed(v4["rows"], rows_lp, REFIT_PROMPTS)
    tree = v4["trees"][0]
    routes = cf.decode_routed_experts(tree["routed_experts"])
    merged_routes = torch.cat([routes[:8], routes[13:15]])  # C1, C2 as in the trie; C3's last two tokens
    merged = {
        **tree, "roots": ["C1"], "num_tokens": 10, "token_ids": [1, 2, 3, 10, 11, 20, 30, 31, 40, 50],
        "position_ids": list(range(10)), "logprobs": [0, 0, 0, -0.5, -0.25, 0, -1.0, -0.125, 0, -0.75],
        "loss_mask": cf.encode_loss_mask([0, 0, 0, 1, 1, 0, 1, 1, 0, 1]),
        "segments": [
            {"call": "C1", "parent": -1, "start": 0, "length": 5, "end": 10},
            {"call": "C2", "parent": 0, "start": 5, "length": 3, "end": 10},
            {"call": "C3", "parent": 1, "start": 8, "length": 2, "end": 10},
        ],
        "routed_experts": cf.encode_routed_experts(merged_routes), "weight_versions": [-1] * 7 + [8, -1, 8],
    }  # fmt: skip
    assert routes[3].tolist() == [[6], [7]] and routes[8].tolist() == [[6], [63]]
    lp, _ = run(model, [merged])
    got = keyed([merged], lp, REFIT_PROMPTS)
    c3 = ("routes-refit", "C3", 9)
    same = [k for k in want if k != c3]
    assert max(abs(want[k] - got[k]) for k in same) <= TOLERANCE  # C1's and C2's tokens: unchanged
    assert abs(want[c3] - got[c3]) > 1e-4, (want[c3], got[c3])
    print(f"C3's token under merged routes: {got[c3]:.6f}, in its row: {want[c3]:.6f}")
