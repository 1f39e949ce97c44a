"""The RL batch of the ``callforest`` package: what ``collate`` and ``pack_collate`` return for
rows, packed trees and bins, GRPO advantages, the staleness cut, routed experts, and the varlen
(padding-free) form of rows, checked on transformers' Qwen3 (tiny, float64, CPU).

SPEC v4 fields are tested on records written by hand from SPEC v4 (conftest.routes_refit_v4) and
on today's CLI records with v4 fields added (conftest.with_v4_fields)."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import CURRENT_VERSION, routes_refit_v4, with_v4_fields

import callforest as cf

LAYOUTS = ("rows", "trees", "bins-64")


def test_import_prints_nothing():
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", "import callforest"], capture_output=True, text=True)
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")
    assert "site-packages" in cf.__file__, "the tests use the installed package (scripts/ensure-python.sh)"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_collate_aligns_every_field_to_the_targets(outputs, layout):
    records = outputs.jsonl(layout)
    batch = cf.collate(records)
    for b, record in enumerate(records):
        n = record["num_tokens"]
        assert batch["input_ids"][b, :n].tolist() == record["token_ids"]
        assert torch.equal(batch["old_logprobs"][b, :n], torch.tensor(record["logprobs"], dtype=torch.float32))
        assert batch["trained"][b, :n].tolist() == cf.loss_mask(record).tolist()
        assert batch["loss_mask"][b, :n].tolist() == (cf.loss_mask(record) & (batch["sources"][b, :n] >= 0)).tolist()
        assert (batch["rewards"][b, :n] == torch.tensor(record["reward"], dtype=torch.float32)).all()
        assert (batch["weight_versions"][b, :n] == -1).all()  # v3 records: no versions
        assert not batch["loss_mask"][b, n:].any() and (batch["doc_ids"][b, n:] == -1).all()
        assert batch["rollout_ids"][batch["rollout_index"][b, 0]] == record["rollout_id"]
    assert batch["group_names"] == [None] * len(batch["rollout_ids"])  # v3: no group, each its own


def test_routed_experts_per_packed_token(outputs):
    """[B, T, L, K] per token, -1 on padding and on records without routes; the login-bug rollout
    with experts routes token t of every call to (7t + 3l + k) % 64."""
    for layout in LAYOUTS:
        records = outputs.jsonl(layout)
        batch = cf.collate(records)
        routes = batch["routed_experts"]
        assert routes.shape[2:] == (3, 2)
        for b, record in enumerate(records):
            n = record["num_tokens"]
            if record["rollout_id"] != "login-bug-experts":
                assert (routes[b] == -1).all()
                continue
            positions = batch["position_ids"][b, :n]
            want = (7 * positions[:, None, None] + 3 * torch.arange(3)[None, :, None] + torch.arange(2)) % 64
            # SPEC v4: a call's last token is routed only by a continuation's prefill, so it is all
            # -1 where none shared it: a row's last token, a packed record's segment ends.
            unrouted = (routes[b, :n] == -1).all(dim=(1, 2))
            ends = torch.zeros(n, dtype=torch.bool)
            if "segments" in record:
                for s in record["segments"]:
                    ends[s["start"] + s["length"] - 1] = True
            else:
                ends[n - 1] = True
            assert unrouted[n - 1] and not (unrouted & ~ends).any()
            assert torch.equal(routes[b, :n][~unrouted], want[~unrouted]) and (routes[b, n:] == -1).all()


def test_v4_records_read_in_every_format(tmp_path):
    """Records with SPEC v4's fields (roots, group_id, weight_versions, routes with -1 where not
    routed) read the same from JSONL, Parquet, Arrow file and stream, and collate to SPEC's
    values for the routes example."""
    from conftest import write_v4

    v4 = routes_refit_v4()
    for layout, records in v4.items():
        for suffix in (".jsonl", ".parquet", ".arrow", ".arrows"):
            read = cf.read_records(write_v4(records, layout, tmp_path / f"{layout}{suffix}"))
            assert [r["group_id"] for r in read] == ["task-42"] * len(records)
            batch = cf.collate(read, advantages=None)
            want = cf.collate(records, advantages=None)
            for key in ("input_ids", "position_ids", "ends", "sources", "weight_versions", "routed_experts", "loss_mask"):
                assert torch.equal(batch[key], want[key]), (layout, suffix, key)
    rows = cf.collate(v4["rows"], current_version=8, max_staleness=0)
    assert rows["weight_versions"][0, :8].tolist() == [-1, -1, -1, 7, 7, -1, 7, 8]
    assert rows["stale"][0, :8].tolist() == [False] * 3 + [True, True, False, True, False]
    assert rows["loss_mask"][0, :8].tolist() == [False] * 7 + [True]
    assert rows["routed_experts"][0, 7].tolist() == [[-1], [-1]]  # a row's last token: routed by none
    assert rows["routed_experts"][1, 3].tolist() == [[6], [63]]
    trees = cf.collate(v4["trees"])
    assert trees["sources"][0, 8].item() == 2 and trees["sources"][0, 3].item() == 2  # both after the system prompt
    assert cf.normalize(v4["trees"][0])["roots"] == ["C1", "C3"]


def test_v3_records_normalize_to_v4_defaults(outputs):
    # A v3 packed tree (`root` and `agent`, no group or versions), as older outputs hold them.
    v4 = outputs.jsonl("trees")[0]
    v3 = {k: v for k, v in v4.items() if k not in ("roots", "group_id", "weight_versions")}
    v3 |= {"root": v4["roots"][0], "agent": "L"}
    tree = cf.normalize(v3)
    assert tree["roots"] == [v3["root"]] and tree["group_id"] is None and tree["weight_versions"] is None
    assert cf.normalize(v4)["roots"] == v4["roots"]
    assert cf.layout_of(tree) == "tree" and cf.layout_of(outputs.jsonl("rows")[0]) == "row"
    assert cf.layout_of(outputs.jsonl("bins-64")[0]) == "bin"


def record(rid, reward, group, n=3):
    return {
        "rollout_id": rid, "reward": reward, "group_id": group, "num_tokens": n, "token_ids": [1] * n,
        "logprobs": [0.0] + [-0.5] * (n - 1), "loss_mask": [False] + [True] * (n - 1),
    }  # fmt: skip


def test_grpo_advantages():
    records = [record("a", 1.0, "g"), record("b", 0.0, "g"), record("c", 0.5, "g"), record("a", 1.0, "g"),
               record("d", 0.25, None), record("e", 2.0, "h")]  # fmt: skip
    rewards = torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64)
    std = rewards.std().item()  # unbiased, as verl
    want = {"a": (1 - 0.5) / (std + 1e-6), "b": -0.5 / (std + 1e-6), "c": 0.0, "d": 0.25 / (1 + 1e-6), "e": 2.0 / (1 + 1e-6)}
    got = cf.grpo_advantages(records)
    assert got.keys() == want.keys() and all(math.isclose(got[k], want[k], abs_tol=1e-12) for k in want)
    batch = cf.collate(records)
    # Per token: a rollout's advantage on every token of each of its records (rollout a twice).
    for b, r in enumerate(records):
        assert batch["advantages"][b].tolist() == pytest.approx([want[r["rollout_id"]]] * 3, abs=1e-6)
    assert cf.grpo_advantages(records, scale=False)["a"] == pytest.approx(0.5)
    # A dict (over a whole dataset), or a callable of the batch: per rollout, per row, per token.
    assert batch["advantages"].tolist() == cf.collate(records, advantages=got)["advantages"].tolist()
    per_rollout = cf.collate(records, advantages=lambda b: torch.arange(len(b["rollout_ids"])) + 1.0)
    assert per_rollout["advantages"][:, 0].tolist() == [1, 2, 3, 1, 4, 5]
    per_row = cf.collate(records[:2], advantages=lambda b: torch.tensor([7.0, 9.0]), batch_size=3)
    assert per_row["advantages"][:, 0].tolist() == [7, 9, 0]
    assert "advantages" not in cf.collate(records, advantages=None)


def test_staleness_cut():
    r = {**record("a", 1.0, None, n=5), "weight_versions": [-1, 3, 4, 5, -1]}
    r["loss_mask"] = [False, True, True, True, True]
    batch = cf.collate([r], current_version=5, max_staleness=1)
    assert batch["stale"][0].tolist() == [False, True, False, False, False]
    assert batch["loss_mask"][0].tolist() == [False, False, True, True, True]  # -1: never stale
    assert batch["input_ids"][0].tolist() == [1] * 5  # a stale target stays as input
    with pytest.raises(ValueError, match="current_version"):
        cf.collate([r], max_staleness=1)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_pack_collate_fills_a_budget(outputs, layout):
    records = with_v4_fields(outputs, outputs.jsonl(layout))
    budget = max(r["num_tokens"] for r in records) + 40
    packed = cf.pack_collate(records, budget, current_version=CURRENT_VERSION, max_staleness=1)
    single = cf.collate(records, current_version=CURRENT_VERSION, max_staleness=1)
    assert packed["input_ids"].shape[0] < len(records) and packed["input_ids"].shape[1] == budget
    # Each record's tokens, masks and per-token fields are the same; its sources and ends move with it.
    for d, ((b, at, n), (b1, at1, n1)) in enumerate(zip(packed["doc_placement"], single["doc_placement"])):
        assert n == n1 and at1 == 0
        for key in ("input_ids", "position_ids", "old_logprobs", "loss_mask", "stale", "advantages", "weight_versions"):
            assert torch.equal(packed[key][b, at : at + n], single[key][b1, :n]), key
        assert torch.equal(packed["ends"][b, at : at + n] - at, single["ends"][b1, :n])
        src = packed["sources"][b, at : at + n]
        assert torch.equal(torch.where(src >= 0, src - at, -1), single["sources"][b1, :n])
    assert (cf.dense_mask(packed).sum() - cf.dense_mask(single).sum()).item() == (
        packed["input_ids"].numel() - int((packed["doc_ids"] >= 0).sum())
    ) - (single["input_ids"].numel() - int((single["doc_ids"] >= 0).sum()))  # padding sees itself only
    with pytest.raises(ValueError, match="does not fit"):
        cf.pack_collate(records, budget - 41)


def test_varlen_rows_only(outputs):
    rows = outputs.jsonl("rows")
    batch = cf.pack_collate(rows, 256)
    flat = cf.varlen(batch)
    lengths = [r["num_tokens"] for r in rows]
    assert flat["cu_seqlens"].tolist() == [sum(lengths[:i]) for i in range(len(rows) + 1)]
    assert flat["max_seqlen"] == max(lengths)
    assert flat["input_ids"][0].tolist() == [t for r in rows for t in r["token_ids"]]
    assert flat["position_ids"][0].tolist() == [p for n in lengths for p in range(n)]
    # Sources: the previous token inside each row, none at a row's start.
    starts = set(flat["cu_seqlens"][:-1].tolist())
    assert flat["sources"][0].tolist() == [-1 if i in starts else i - 1 for i in range(sum(lengths))]
    with pytest.raises(ValueError, match="rows only"):
        cf.varlen(cf.collate(outputs.jsonl("trees")))


@pytest.fixture(scope="module")
def qwen3():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=257, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=1024)  # fmt: skip
    model = Qwen3ForCausalLM(config).to(torch.float64).eval()
    model.set_attn_implementation("sdpa")
    return model


def logprobs(model, batch, **inputs):
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"] % 257, position_ids=batch["position_ids"], **inputs).logits
    return cf.token_logprobs(logits, {**batch, "targets": batch["targets"] % 257})


def test_padding_free_rows_on_qwen3(outputs, qwen3):
    """Rows packed padding-free (varlen: one sequence, position_ids restarting at each row, no
    mask: transformers finds the rows from position_ids, as TRL's padding_free does) score every
    trained token as the padded batch does."""
    rows = outputs.jsonl("rows")[:12]
    padded = cf.collate(rows)
    want = logprobs(qwen3, padded, attention_mask=cf.dense_mask(padded))
    flat = cf.varlen(cf.pack_collate(rows, sum(r["num_tokens"] for r in rows)))
    got = logprobs(qwen3, flat, use_cache=False)  # (a cache turns the detection off)
    assert torch.allclose(got[0], want.flatten()[_flat_index(padded)], atol=1e-11, rtol=0)


def _flat_index(batch):
    """The padded batch's real tokens, in order: flat indices into [B * L]."""
    length = batch["input_ids"].shape[1]
    return torch.cat([torch.arange(b * length, b * length + n) for b, _, n in batch["doc_placement"]])


def test_pack_collate_trees_on_qwen3(outputs, qwen3):
    """Packed trees several to a batch row (pack_collate) score as one to a row (collate)."""
    trees = outputs.jsonl("trees")
    single = cf.collate(trees)
    packed = cf.pack_collate(trees, 256)
    want = logprobs(qwen3, single, attention_mask=cf.dense_mask(single))
    got = logprobs(qwen3, packed, attention_mask=cf.dense_mask(packed))
    for (b, at, n), (b1, _, _) in zip(packed["doc_placement"], single["doc_placement"]):
        assert torch.allclose(got[b, at : at + n], want[b1, :n], atol=1e-11, rtol=0)


def test_the_wheel_depends_on_torch_pyarrow_and_numpy_only(tmp_path):
    """The package as pip builds it from python/ (offline: setuptools is in .venv): its runtime
    dependencies are torch, pyarrow and numpy, and it holds every module."""
    import shutil
    import subprocess
    import sys
    import zipfile

    from conftest import ROOT

    source = tmp_path / "python"
    shutil.copytree(ROOT / "python", source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    run = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-cache-dir",
         "--disable-pip-version-check", "-q", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    (wheel,) = (tmp_path / "dist").glob("callforest-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        metadata = z.read(next(n for n in names if n.endswith("METADATA"))).decode()
    import re

    requires = sorted(
        re.match(r"[A-Za-z0-9_.-]+", line.split(":", 1)[1].strip()).group(0)
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:")
    )
    assert requires == ["numpy", "pyarrow", "torch"]
    modules = {p.name for p in (ROOT / "python" / "src" / "callforest").glob("*.py")}
    assert {f"callforest/{m}" for m in modules} <= names


def test_policy_loss_by_hand():
    """The clipped surrogate on three tokens, by hand: ratio inside the clip range, above it with
    a positive advantage (clipped: no gradient), below it with a negative one (clipped)."""
    old = torch.tensor([[-1.0, -1.0, -1.0, 0.0]])
    new = torch.tensor([[-0.9, -0.5, -2.0, -7.0]], dtype=torch.float64, requires_grad=True)
    batch = {
        "old_logprobs": old,
        "advantages": torch.tensor([[2.0, 1.0, -1.0, 5.0]]),
        "loss_mask": torch.tensor([[True, True, True, False]]),  # the last token is not trained
    }
    ratio = torch.exp(torch.tensor([0.1, 0.5, -1.0], dtype=torch.float64))
    want = -(ratio[0] * 2.0) - (1.2 * 1.0) - (0.8 * -1.0)
    loss = cf.policy_loss(new, batch, clip=0.2)
    assert torch.isclose(loss, want, rtol=1e-12)
    loss.backward()
    assert torch.allclose(new.grad[0], torch.tensor([-2.0 * ratio[0], 0.0, 0.0, 0.0], dtype=torch.float64))
    assert torch.isclose(cf.policy_loss(new, batch, normalizer="tokens"), want / 3, rtol=1e-12)
    assert torch.isclose(cf.policy_loss(new, batch, normalizer=10.0), want / 10, rtol=1e-12)
    high = -(ratio[0] * 2.0) - (ratio[1] * 1.0) - (0.8 * -1.0)  # DAPO's clip-higher lets 1.65 through
    assert torch.isclose(cf.policy_loss(new, batch, clip=0.2, clip_high=0.7), high, rtol=1e-12)


def test_v4_columns_with_nulls(tmp_path):
    """A v4 file where some rollouts give no versions, routes or group (null columns) reads to the
    defaults: versions -1, no routes (-1), a group of its own."""
    from conftest import write_v4

    rows = routes_refit_v4()["rows"]
    bare = {**rows[1], "rollout_id": "bare", "group_id": None, "weight_versions": None, "routed_experts": None}
    for suffix in (".parquet", ".arrows"):
        read = cf.read_records(write_v4([rows[0], bare], "rows", tmp_path / f"nulls{suffix}"))
        assert read[1]["weight_versions"] is None and read[1]["group_id"] is None
        batch = cf.collate(read)
        assert (batch["weight_versions"][1] == -1).all() and (batch["routed_experts"][1] == -1).all()
        assert batch["group_names"] == ["task-42", None]
        assert batch["advantages"][1, 0].item() == pytest.approx(1.0 / (1 + 1e-6))  # alone: mean 0, std 1
