"""Packed trees and bins train the same as rows on transformers' own Qwen3 and Llama classes.

Tiny configs with random weights (nothing downloaded). For every layout, each trained token is
keyed by (rollout, call, index in that call's generation), and must be trained exactly once, with
the same model log-probability as in its row:

- dense mask through "sdpa", float64: per-token log-probabilities within 1e-11, and the summed
  loss and every parameter's gradient within 1e-11 relative — both the plain loss and the RL
  loss (``callforest.policy_loss``: token-level PPO/GRPO, clipped, ratio from the records'
  ``old_logprobs``, GRPO advantages over groups of rollouts, a staleness cut on weight versions) (float64 carries ~16 digits; sums
  over other keys in another order move the last two or three of them: ~5e-15 seen here). transformers' RMSNorm
  rounds its input to float32 whatever the model's dtype, which would make every comparison a
  float32 one (gradients then differ by ~1e-7 relative); the tests run it in the model's dtype
  (``float64_rmsnorm``), the one change to the shipped classes;
- FlexAttention (transformers' "flex_attention", a BlockMask), forward only, float32, since
  FlexAttention on CPU is compiled by inductor, which takes float32 but not float64, and has no
  backward on CPU: within FLEX_TOLERANCE of the float64 rows (float32 keeps ~7 digits; the
  log-probabilities here are O(10), so rounding errors are O(1e-6): ~2e-6 seen here; a wrong
  mask moves them by O(1), see test_wrong_mask_is_caught).

Token ids are mapped into the tiny vocabulary with ``id % VOCAB``, the same for every layout.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from callforest import block_mask, collate, dense_mask, loss_mask, policy_loss, token_logprobs
from conftest import CURRENT_VERSION, with_v4_fields
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM
from transformers.models.llama.modeling_llama import LlamaRMSNorm
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

VOCAB = 257
TOLERANCE = 1e-11
FLEX_TOLERANCE = 1e-4
PACKED = ("trees", "bins-64", "bins-split")
SHAPE = dict(
    vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=1024,
)  # fmt: skip


def _rmsnorm_in_input_dtype(self, hidden_states):
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


@pytest.fixture(scope="module", autouse=True)
def float64_rmsnorm():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Qwen3RMSNorm, "forward", _rmsnorm_in_input_dtype)
        patch.setattr(LlamaRMSNorm, "forward", _rmsnorm_in_input_dtype)
        yield


def make_model(family: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if family == "qwen3":
        model = Qwen3ForCausalLM(Qwen3Config(**SHAPE))
    else:
        model = LlamaForCausalLM(LlamaConfig(**SHAPE))
    # Weights of unit scale (not the 0.02 of a fresh init), so attention is sharp and a token that
    # sees one key more or less gets a visibly different log-probability.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0, 1 / math.sqrt(p.shape[-1]))
    return model.to(torch.float64).eval()


def layout_name(outputs, layout: str) -> str:
    if layout == "bins-split":
        return next(name for name in outputs.layouts if name.startswith("bins-") and name != "bins-64")
    return layout


def keyed(outputs, records: list[dict], values: torch.Tensor) -> dict[tuple, float | None]:
    """Each trained token (mask 1) of the records -> its value, None when it has no source (a
    root's first token). Keys: (rollout, call, index in that call's generation)."""
    spans = {}
    for r in outputs.rollouts:
        for c in r["calls"]:
            spans[r["rollout_id"], c["id"]] = (len(c["prompt_token_ids"]), len(c["generation_token_ids"]))
    out: dict[tuple, float | None] = {}
    for b, record in enumerate(records):
        rid, trained = record["rollout_id"], loss_mask(record)
        if "segments" in record:  # packed: a token's call is its segment's, its index its position
            owner = [None] * record["num_tokens"]
            for s in record["segments"]:
                owner[s["start"] : s["start"] + s["length"]] = [s["call"]] * s["length"]
            positions = record["position_ids"]
        else:  # a row: the path call whose generated span holds the index
            owner = [None] * record["num_tokens"]
            for call in record["calls"]:
                prompt, generated = spans[rid, call]
                owner[prompt : prompt + generated] = [call] * generated
            positions = range(record["num_tokens"])
        for k in torch.nonzero(trained).flatten().tolist():
            prompt, generated = spans[rid, owner[k]]
            key = (rid, owner[k], positions[k] - prompt)
            assert 0 <= key[2] < generated, f"{rid}: mask 1 at {k}, not a generated token of {owner[k]}"
            assert key not in out, f"{key} trained twice"
            out[key] = None if (positions[k] == 0) else values[b, k].item()
    return out


def forward(model, records, attention: str, mask_of, shape: tuple[int, int] | None = None):
    batch = collate(records) if shape is None else collate(records, batch_size=shape[0], length=shape[1])
    model.set_attn_implementation(attention)
    logits = model(
        input_ids=batch["input_ids"] % VOCAB, position_ids=batch["position_ids"], attention_mask=mask_of(batch)
    ).logits
    return token_logprobs(logits, {**batch, "targets": batch["targets"] % VOCAB}), batch


@pytest.fixture(scope="module", params=["qwen3", "llama"])
def family(request, outputs, float64_rmsnorm):
    """A model family, its float64 model, and the float64 log-probabilities of the rows."""
    model = make_model(request.param)
    rows = outputs.jsonl("rows")
    with torch.no_grad():
        lp, _ = forward(model, rows, "sdpa", dense_mask)
    return request.param, model, keyed(outputs, rows, lp)


def compare(expected: dict, got: dict, tolerance: float) -> float:
    assert got.keys() == expected.keys(), (
        f"trained in rows only: {sorted(expected.keys() - got.keys())[:5]}, "
        f"in packed only: {sorted(got.keys() - expected.keys())[:5]}"
    )
    worst = 0.0
    for key, want in expected.items():
        assert (want is None) == (got[key] is None), key
        if want is not None:
            worst = max(worst, abs(want - got[key]))
    assert worst <= tolerance, f"max |logprob difference| {worst:.3g} > {tolerance:g}"
    print(f"max |logprob difference| {worst:.3g} over {len(expected)} trained tokens")
    return worst


def test_rows_train_every_generated_token_once(outputs, family):
    _, _, expected = family
    generated = {
        (r["rollout_id"], c["id"], j)
        for r in outputs.rollouts
        for c in r["calls"]
        if c.get("kept", True) is not False
        for j in range(len(c["generation_token_ids"]))
    }
    assert expected.keys() == generated
    assert sum(v is None for v in expected.values()) < len(expected) // 10


@pytest.mark.parametrize("layout", PACKED)
def test_dense_mask_logprobs(outputs, family, layout):
    _, model, expected = family
    records = outputs.jsonl(layout_name(outputs, layout))
    with torch.no_grad():
        lp, _ = forward(model, records, "sdpa", dense_mask)
    compare(expected, keyed(outputs, records, lp), TOLERANCE)


@pytest.fixture(scope="module")
def flex_shape(outputs) -> tuple[int, int]:
    """One batch shape [B, L] for every FlexAttention call, so that torch.compile compiles it once
    (a compile takes ~30 s here, and inductor 2.13's CPU FlexAttention kernel with dynamic shapes,
    which a second shape would bring, fails to build)."""
    packed = [outputs.jsonl(layout_name(outputs, layout)) for layout in PACKED]
    longest = max(r["num_tokens"] for records in packed for r in records)
    return max(len(records) for records in packed), -(-longest // 128) * 128


@pytest.mark.parametrize("layout", PACKED)
def test_flex_attention_logprobs(outputs, family, layout, flex_shape):
    _, model, expected = family
    records = outputs.jsonl(layout_name(outputs, layout))
    model32 = copy.deepcopy(model).to(torch.float32)
    with torch.no_grad():
        lp, _ = forward(model32, records, "flex_attention", block_mask, flex_shape)
    compare(expected, keyed(outputs, records, lp.double()), FLEX_TOLERANCE)


#: The RL step's staleness cut: tokens of versions older than CURRENT_VERSION - 1 leave the loss.
MAX_STALENESS = 1


def rl_batch(outputs, records, **options):
    """The records with v4's group_id and weight_versions, collated for the RL step."""
    options = {"current_version": CURRENT_VERSION, "max_staleness": MAX_STALENESS, **options}
    return collate(with_v4_fields(outputs, records), **options)


def loss_and_gradients(model, batch):
    """The plain loss (every trained token's -log p) and the RL loss (policy_loss, summed form)
    from one forward pass, each with every parameter's gradient."""
    logits = model(
        input_ids=batch["input_ids"] % VOCAB, position_ids=batch["position_ids"], attention_mask=dense_mask(batch)
    ).logits
    lp = token_logprobs(logits, {**batch, "targets": batch["targets"] % VOCAB})
    trained = batch["trained"] & (batch["sources"] >= 0)
    plain = -(lp * trained.to(lp.dtype)).sum()
    rl = policy_loss(lp, batch)
    params = [p for _, p in model.named_parameters()]
    out = {"trained": int(batch["loss_mask"].sum())}
    for name, loss in (("plain", plain), ("rl", rl)):
        grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
        out[name] = loss.item(), {n: g for (n, _), g in zip(model.named_parameters(), grads)}
    return out


@pytest.fixture(scope="module")
def rows_gradients(outputs, family):
    return loss_and_gradients(family[1], rl_batch(outputs, outputs.jsonl("rows")))


def assert_same(name, got, want, tolerance=TOLERANCE):
    (loss, grads), (want_loss, want_grads) = got, want
    assert abs(loss - want_loss) <= tolerance * abs(want_loss), f"{name} loss {loss!r} vs rows {want_loss!r}"
    worst = 0.0
    for param, expected in want_grads.items():
        scale = expected.abs().max().item() if expected is not None else 0.0
        assert scale > 0, f"{name}: {param}: no gradient"
        diff = (grads[param] - expected).abs().max().item()
        assert diff <= tolerance * scale, f"{name}: {param}: gradient differs by {diff:.3g} (scale {scale:.3g})"
        worst = max(worst, diff / scale)
    return worst


@pytest.mark.parametrize("layout", PACKED)
def test_loss_and_gradients(outputs, family, rows_gradients, layout):
    _, model, _ = family
    batch = rl_batch(outputs, outputs.jsonl(layout_name(outputs, layout)))
    # Each generated token is trained once in any layout, so a loss over the batch's trained tokens
    # (normalizer="tokens") is the summed loss over the same count.
    assert int(batch["loss_mask"].sum()) == rows_gradients["trained"]
    got = loss_and_gradients(model, batch)
    for name in ("plain", "rl"):
        worst = assert_same(name, got[name], rows_gradients[name])
        print(f"{name}: loss {got[name][0]!r} vs rows {rows_gradients[name][0]!r}; worst relative gradient difference {worst:.3g}")


def test_rl_batch_is_not_trivial(outputs):
    """What the RL equivalence is about is in the batch: distinct non-zero advantages, a
    staleness cut that removes trained tokens (but keeps them as input), and versions that
    change inside a generation."""
    batch = rl_batch(outputs, outputs.jsonl("rows"))
    trained = batch["trained"] & (batch["sources"] >= 0)
    advantages = batch["advantages"][batch["loss_mask"]]
    assert len(set(advantages.tolist())) > 10 and (advantages > 0).any() and (advantages < 0).any()
    assert 0 < int((batch["stale"] & trained).sum()) < int(trained.sum())
    assert (batch["input_ids"][batch["stale"]] != 0).any()  # stale targets stay in the input
    assert len(set(batch["weight_versions"][trained].tolist())) >= 4


def rl_loss(model, batch) -> float:
    with torch.no_grad():
        logits = model(
            input_ids=batch["input_ids"] % VOCAB, position_ids=batch["position_ids"], attention_mask=dense_mask(batch)
        ).logits
        return policy_loss(token_logprobs(logits, {**batch, "targets": batch["targets"] % VOCAB}), batch).item()


def test_planted_errors_are_caught(outputs, family, rows_gradients):
    """The RL check can fail: on the packed trees, (a) advantages normalised per record instead of
    per rollout (a trainer that takes each packed record for one sample), (b) weight versions
    attributed one token late (to the source instead of the target), and (c) a staleness cut one
    version off each move the loss far beyond the tolerance."""
    name, model, _ = family
    records = outputs.jsonl("trees")
    want = rows_gradients["rl"][0]

    def per_record(batch):  # GRPO over the batch's records instead of its rollouts
        rewards = torch.tensor([batch["rollout_rewards"][batch["rollout_index"][b][0]].item() for b in range(len(records))])
        return (rewards - rewards.mean()) / (rewards.std() + 1e-6)

    late = []
    for record in with_v4_fields(outputs, records):
        versions = record["weight_versions"]
        late.append({**record, "weight_versions": [-1] + versions[:-1]})
    planted = {
        "advantages per record": rl_batch(outputs, records, advantages=per_record),
        "versions one token late": collate(late, current_version=CURRENT_VERSION, max_staleness=MAX_STALENESS),
        "staleness cut off by one": rl_batch(outputs, records, max_staleness=MAX_STALENESS + 1),
    }
    for what, batch in planted.items():
        got = rl_loss(model, batch)
        assert abs(got - want) > 1e3 * TOLERANCE * abs(want), what
        print(f"{name}: {what}: RL loss {got:.6f} vs rows {want:.6f}")


def test_wrong_mask_is_caught(outputs, family):
    """The check can fail: packed trees under plain causal attention (siblings see each other)
    differ from the rows by far more than either tolerance."""
    _, model, expected = family
    records = outputs.jsonl("trees")

    def causal(batch):
        n = batch["input_ids"].shape[1]
        return torch.ones(n, n, dtype=torch.bool).tril().expand(len(records), 1, n, n)

    with torch.no_grad():
        lp, _ = forward(model, records, "sdpa", causal)
    got = keyed(outputs, records, lp)
    worst = max(abs(expected[k] - got[k]) for k in expected if expected[k] is not None)
    assert worst > 100 * FLEX_TOLERANCE
    print(f"{family[0]}: a causal mask over packed trees moves a log-probability by up to {worst:.3g}")


def test_inputs_cover_the_cases(outputs):
    """The batch has what the equivalence is about: forks and parallel samples (segments with
    siblings), twins, compaction (several trees a rollout), and bins that split trees (a call
    repeated as context, trained in another bin)."""
    trees = outputs.jsonl("trees")
    siblings = any(
        sum(s["parent"] == i for s in t["segments"]) >= 2 for t in trees for i in range(len(t["segments"]))
    )
    twins = any(a["id"].startswith("T") for r in outputs.rollouts for a in r["agents"])
    several_trees = any(t["tree"] >= 1 for t in trees)
    split = outputs.jsonl(layout_name(outputs, "bins-split"))
    context = any(not s["trained"] for b in split for s in b["segments"])
    shared = any(len(b["roots"]) >= 2 for b in outputs.jsonl("bins-64"))
    assert (siblings, twins, several_trees, context, shared) == (True, True, True, True, True)
