#!/usr/bin/env python3
"""A trainer computes the same thing from callforest's packed records as from its rows.

    check_packed.py ROLLOUTS.jsonl ROWS.jsonl PACKED.jsonl [PACKED.jsonl ...]

ROLLOUTS is the canonical input (`callforest convert` output), ROWS the output of `callforest rows`,
each PACKED the output of `callforest rows --layout packed` (trees) or of `... --capacity N`
(bins). A small random causal transformer (float64, fixed seed) scores every trained token (loss
mask 1) of every record. Rows use plain causal attention over positions 0..n-1, token i predicted
from output i-1; packed records use SPEC's rules, as the `callforest` Python package
(`pip install ./python`) turns them into tensors (`callforest.prepare`, `callforest.dense_mask`):

  attention   q attends k  iff  k <= q < end(segment(k))
  prediction  inside a segment token k is predicted from k-1; the first token of a non-root
              segment from its parent segment's last token, start(p) + length(p) - 1

Each trained token is keyed by (rollout, call id, position in that call's generation). Every key
must be trained exactly once in the rows and once in each packed file, with the same token, the
same sampled logprob and a model log-probability within 1e-9; the summed masked loss must agree.
Prints one summary line; exits 1 on any mismatch (the first ones go to stderr).
"""
import json
import math
import sys

import torch

import callforest

V, D, HEADS, LAYERS = 61, 32, 4, 2  # token ids are mapped into the small vocabulary with id % V
TOLERANCE = 1e-9
torch.set_default_dtype(torch.float64)


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def loss_mask(record):
    """SPEC's bitset (bit i = bit i % 8 of byte i // 8), or a 0/1 list (--mask-format ints)."""
    return callforest.loss_mask(record).tolist()


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        self.qkv, self.out = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(D, 4 * D), torch.nn.GELU(), torch.nn.Linear(4 * D, D))

    def forward(self, x, mask):  # x [n, D]; mask [n, n] bool, mask[q, k]: q may attend to k
        n = x.shape[0]
        q, k, v = self.qkv(self.norm1(x)).view(n, 3, HEADS, D // HEADS).permute(1, 2, 0, 3)  # [H, n, d]
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(D // HEADS)
        attended = scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.out(attended.transpose(0, 1).reshape(n, D))
        return x + self.mlp(self.norm2(x))


class Model(torch.nn.Module):
    def __init__(self, max_position):
        super().__init__()
        self.tokens = torch.nn.Embedding(V, D)
        self.positions = torch.nn.Embedding(max_position, D)  # learned, indexed by position_ids
        self.blocks = torch.nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm, self.head = torch.nn.LayerNorm(D), torch.nn.Linear(D, V)

    def forward(self, token_ids, position_ids, mask):
        x = self.tokens(token_ids % V) + self.positions(position_ids)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.norm(x)).log_softmax(-1)  # [n, V]


def row_layout(row):
    """A row: causal mask, positions 0..n-1, token i predicted from i-1 (token 0 from nothing)."""
    n = row["num_tokens"]
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    return torch.arange(n), mask, list(range(-1, n - 1))


def packed_layout(record):
    """A packed record: SPEC's attention rule and prediction rule, from its segments."""
    prepared = callforest.prepare(record)
    # q attends k iff k <= q < end[k]. With FlexAttention this is the block mask's mask_mod:
    #   def mask_mod(b, h, q, kv): return (kv <= q) & (q < end[kv])
    mask = callforest.dense_mask(prepared)[0, 0]
    return prepared["position_ids"], mask, prepared["sources"].tolist()


def score(model, record, layout):
    """Model log-probabilities of the record's trained tokens, and its summed masked loss."""
    positions, mask, source = layout
    tokens = torch.tensor(record["token_ids"])
    with torch.no_grad():
        logp = model(tokens, positions, mask)
    trained = [k for k, bit in enumerate(loss_mask(record)) if bit]
    # A trainer gathers the logits at each trained token's source; a token with no source (a root's
    # first token, at position 0) is not predicted by anything and is left out of the loss.
    predicted = [k for k in trained if source[k] >= 0]
    gathered = logp[[source[k] for k in predicted], tokens[predicted] % V]
    scores = dict(zip(predicted, gathered.tolist()))
    return {k: scores.get(k) for k in trained}, -gathered.sum().item()


def main(rollouts_path, rows_path, packed_paths):
    prompt, generated = {}, {}  # (rollout_id, call id) -> len(prompt(call)), len(generation(call))
    for r in read_jsonl(rollouts_path):
        for c in r["calls"]:
            prompt[r["rollout_id"], c["id"]] = len(c["prompt_token_ids"])
            if c.get("kept", True) is not False:
                generated[r["rollout_id"], c["id"]] = len(c["generation_token_ids"])
    rows = read_jsonl(rows_path)
    packed = {path: read_jsonl(path) for path in packed_paths}
    max_position = max(
        [r["num_tokens"] for r in rows]
        + [max(p["position_ids"], default=0) + 1 for recs in packed.values() for p in recs]
    )
    torch.manual_seed(0)
    model = Model(max_position).eval()
    problems = []

    def put(table, key, value, where):
        if key in table:
            problems.append(f"{where}: {key} trained twice")
        table[key] = value

    # Rows: attribute each trained token to (call, generation position) with the input's lengths.
    expected, rows_loss, rows_tokens = {}, 0.0, 0
    for row in rows:
        lp, loss = score(model, row, row_layout(row))
        rows_loss, rows_tokens = rows_loss + loss, rows_tokens + row["num_tokens"]
        spans = {}  # row index -> the path call that generated that token
        for call in row["calls"]:
            start = prompt[row["rollout_id"], call]
            spans.update({i: call for i in range(start, start + generated[row["rollout_id"], call])})
        for i, value in lp.items():
            call = spans.get(i)
            if call not in row["trained"]:
                problems.append(f"row {row['rollout_id']}/{row['row']}: mask 1 at {i}, not a trained call's token")
                continue
            key = (row["rollout_id"], call, i - prompt[row["rollout_id"], call])
            put(
                expected,
                key,
                (row["token_ids"][i], row["logprobs"][i], value),
                f"rows {row['rollout_id']}/{row['row']}",
            )

    # Every generated token of every eligible call of the rollouts the rows come from: once.
    planned = {row["rollout_id"] for row in rows}
    everything = {(*call, j) for call, n in generated.items() if call[0] in planned for j in range(n)}
    for key in sorted(everything ^ expected.keys()):
        problems.append(f"rows: {key} {'not trained' if key in everything else 'is no generated token'}")

    summary, worst = [], 0.0
    for path, records in packed.items():
        got, loss, tokens = {}, 0.0, 0
        for rec in records:
            lp, rec_loss = score(model, rec, packed_layout(rec))
            loss, tokens = loss + rec_loss, tokens + rec["num_tokens"]
            for s in rec["segments"]:
                for k in range(s["start"], s["start"] + s["length"]):
                    if k in lp:
                        call = (rec["rollout_id"], s["call"])
                        key = (*call, rec["position_ids"][k] - prompt[call])
                        if not 0 <= key[2] < generated[call]:
                            problems.append(
                                f"{path} {rec['rollout_id']}: mask 1 at {k}, not a generated token of {s['call']}"
                            )
                        put(got, key, (rec["token_ids"][k], rec["logprobs"][k], lp[k]), f"{path} {rec['rollout_id']}")
        for key in sorted(expected.keys() ^ got.keys()):
            problems.append(f"{path}: {key} trained in {'rows only' if key in expected else 'packed only'}")
        for key in sorted(expected.keys() & got.keys()):
            (t1, s1, m1), (t2, s2, m2) = expected[key], got[key]
            if t1 != t2 or s1 != s2 or (m1 is None) != (m2 is None):
                problems.append(
                    f"{path}: {key} rows (token {t1}, logprob {s1}, scored {m1 is not None}) "
                    f"vs packed ({t2}, {s2}, {m2 is not None})"
                )
            elif m1 is not None:
                worst = max(worst, abs(m1 - m2))
                if abs(m1 - m2) > TOLERANCE:
                    problems.append(f"{path}: {key} model logprob {m2!r} packed vs {m1!r} rows")
        if abs(loss - rows_loss) > TOLERANCE * max(1.0, abs(rows_loss)):
            problems.append(f"{path}: summed loss {loss!r} vs rows {rows_loss!r}")
        summary.append(f"{path.rsplit('/', 1)[-1]} {len(records)} records {tokens} tokens")

    rollouts = len({key[0] for key in expected})
    if problems:
        for p in problems[:20]:
            print(p, file=sys.stderr)
        print(
            f"check_packed: MISMATCH, {len(problems)} problems over {len(packed)} packed files "
            f"({len(expected)} trained tokens of {rollouts} rollouts)"
        )
        return 1
    print(
        f"check_packed: ok, {len(expected)} trained tokens of {rollouts} rollouts score the same from rows "
        f"({len(rows)} rows {rows_tokens} tokens) and from {'; '.join(summary)}: "
        f"max |diff| {worst:.1e}, loss {rows_loss:.6f}"
    )
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
