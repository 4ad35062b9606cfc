"""Next-item prediction with HSTU layers: the generative-recommenders MovieLens setting.

Each user's ratings, ordered by (timestamp, file order), form a sequence of items. Leave-
last-out: the last item is the test target, the one before it the validation target, and
training predicts every next item of the rest. The model embeds items (plus a learned
position), runs HSTU layers (causal, with a time-gap bias measured from the time of the event
each position predicts, as the reference implementation does), and scores a position's
output against item embeddings by cosine similarity over a temperature. Training uses a
sampled softmax: each position's true next item against 128 items drawn uniformly for that
position. Evaluation ranks the target among all items of the dataset the user has not rated
yet, as SASRec and the reference do: HR@10 and NDCG@10 (and, beside them, among all items).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from blocks.base import check_fraction, check_int
from blocks.hstu import HSTU, HSTUConfig
from nas.core.errors import ConfigError
from nas.data.prepared import PreparedDataset
from workers.optimizers import Adam


@dataclass(frozen=True)
class NextItemConfig:
    max_len: int = 200
    dim: int = 50
    num_layers: int = 2
    num_heads: int = 1
    qk_dim: int = 25
    value_dim: int = 25
    dropout: float = 0.2
    negatives: int = 128
    temperature: float = 0.05
    lr: float = 1e-3
    batch_size: int = 128
    epochs: int = 50
    seed: int = 0

    def __post_init__(self) -> None:
        counts = ("max_len", "dim", "num_layers", "num_heads", "qk_dim", "value_dim")
        for name in (*counts, "negatives", "batch_size", "epochs"):
            check_int(name, getattr(self, name))
        check_int("seed", self.seed, minimum=0)
        check_fraction("dropout", self.dropout)
        for name in ("temperature", "lr"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(name, f"must be a number > 0, got {value!r}")


@dataclass(frozen=True)
class UserSequences:
    items: list[np.ndarray]  # per user, item ids in order
    times: list[np.ndarray]  # per user, timestamps (seconds)
    item_ids: np.ndarray  # every item id that occurs (>= 1; 0 pads): the ranking's candidates

    @classmethod
    def from_prepared(cls, dataset: PreparedDataset) -> UserSequences:
        item = np.asarray(dataset.array("event_item"), dtype=np.int64)  # the rows, by user
        stamps = np.asarray(dataset.array("event_time"), dtype=np.int64)
        offsets = np.asarray(dataset.array("user_offsets"))
        items = [item[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
        times = [stamps[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
        keep = [i for i, s in enumerate(items) if len(s) >= 3]  # train, valid and test items
        return cls([items[i] for i in keep], [times[i] for i in keep], np.unique(item))


class NextItemModel(nn.Module):
    def __init__(self, num_items: int, config: NextItemConfig):
        super().__init__()
        self.config = config
        self.item = nn.Embedding(num_items, config.dim, padding_idx=0)
        self.position = nn.Embedding(config.max_len, config.dim)
        layer = HSTUConfig(
            num_tokens=config.max_len,
            dim=config.dim,
            num_heads=config.num_heads,
            qk_dim=config.qk_dim,
            value_dim=config.value_dim,
            dropout=config.dropout,
        )
        self.layers = nn.ModuleList(HSTU(layer) for _ in range(config.num_layers))
        self.dropout = nn.Dropout(config.dropout)
        # As the reference: items N(0, 0.02), scaled by sqrt(d) below, and positions
        # N(0, 1/d), the same scale. PyTorch's default N(0, 1) for positions would drown the
        # item signal, and every position would predict the same items.
        nn.init.normal_(self.item.weight, std=0.02)
        nn.init.normal_(self.position.weight, std=config.dim**-0.5)

    def encode(self, items, lengths, times, query_times):
        """items, times: [B, N] (right-padded), query_times: [B, N] the time of the event each
        position predicts; returns unit vectors [B, N, d]."""
        positions = torch.arange(items.shape[1], device=items.device)
        x = self.item(items) * math.sqrt(self.config.dim) + self.position(positions)
        x = self.dropout(x)  # input dropout, as SASRec's
        for layer in self.layers:
            x = layer(x, lengths, times, query_timestamps=query_times)
        return F.normalize(x, dim=-1)

    def item_vectors(self) -> torch.Tensor:
        """Every item's unit vector, by id: [num_items, d]."""
        return F.normalize(self.item.weight, dim=-1)


def _batch(sequences, times, users, max_len: int, cut: int):
    """Inputs and targets for ``users``: each sequence without its last ``cut`` items, its
    last max_len + 1 kept; input = all but the last, target = all but the first (with the
    targets' timestamps: the query times)."""
    b = len(users)
    inputs = np.zeros((b, max_len), dtype=np.int64)
    stamps = np.zeros((b, max_len), dtype=np.int64)
    targets = np.zeros((b, max_len), dtype=np.int64)
    query_times = np.zeros((b, max_len), dtype=np.int64)
    lengths = np.zeros(b, dtype=np.int64)
    for row, u in enumerate(users):
        seq = sequences[u][: len(sequences[u]) - cut][-(max_len + 1) :]
        t = times[u][: len(times[u]) - cut][-(max_len + 1) :]
        n = len(seq) - 1
        inputs[row, :n], stamps[row, :n], targets[row, :n] = seq[:-1], t[:-1], seq[1:]
        query_times[row, :n] = t[1:]
        lengths[row] = n
    return tuple(map(torch.from_numpy, (inputs, lengths, stamps, query_times, targets)))


def train_epoch(model, data: UserSequences, optimizer, rng: np.random.Generator) -> float:
    config = model.config
    model.train()
    order = rng.permutation(len(data.items))
    total, count = 0.0, 0
    for start in range(0, len(order), config.batch_size):
        users = order[start : start + config.batch_size]
        items, lengths, times, query_times, targets = _batch(
            data.items, data.times, users, config.max_len, 2
        )
        valid = targets > 0
        queries = model.encode(items, lengths, times, query_times)[valid]  # [P, d]
        truth = targets[valid]  # [P]
        # Negatives drawn per position, as the reference samples them. Scoring every item
        # and gathering the drawn ones is one GEMM ([P, I], ~0.2 GB at P = 13.7k); gathering
        # the drawn vectors instead would materialise [P, K, d] twice (values and gradient).
        scores = queries @ model.item_vectors().T  # [P, num_items]
        negatives = torch.from_numpy(rng.choice(data.item_ids, (len(truth), config.negatives)))
        negative = scores.gather(1, negatives)  # [P, K]
        negative = negative.masked_fill(negatives == truth.unsqueeze(1), -1e9)  # the target
        positive = scores.gather(1, truth.unsqueeze(1))
        logits = torch.cat([positive, negative], dim=1) / config.temperature
        loss = F.cross_entropy(logits, torch.zeros(len(logits), dtype=torch.long))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total, count = total + loss.item() * len(logits), count + len(logits)
    return total / count


@torch.no_grad()
def evaluate(model, data: UserSequences, cut: int, k: int = 10) -> dict[str, float]:
    """HR@k and NDCG@k of predicting item -cut of each sequence (cut 1: test, 2: valid)
    from the items before it, ranked among every item of the dataset.

    ``hr@k`` / ``ndcg@k`` leave out the items the user has already rated (the protocol of
    SASRec and of the generative-recommenders evaluation, whose figures we compare with);
    ``..._with_seen`` rank against every item."""
    model.eval()
    config = model.config
    candidates = torch.from_numpy(data.item_ids)
    vectors = model.item_vectors()[candidates]  # [I, d]
    totals = dict.fromkeys(
        (f"hr@{k}", f"ndcg@{k}", f"hr@{k}_with_seen", f"ndcg@{k}_with_seen"), 0.0
    )
    for start in range(0, len(data.items), 512):
        users = range(start, min(start + 512, len(data.items)))
        items, lengths, times, query_times, targets = _batch(
            data.items, data.times, users, config.max_len, cut - 1
        )
        out = model.encode(items, lengths, times, query_times)
        rows = torch.arange(len(users))
        truth = targets[rows, lengths - 1]
        scores = out[rows, lengths - 1] @ vectors.T  # [B, I]
        column = torch.searchsorted(candidates, truth)
        above = scores > scores[rows, column].view(-1, 1)
        seen = seen_items(data, users, cut, candidates)
        seen[rows, column] = False  # the target stays ranked
        for suffix, rank in (("", (above & ~seen).sum(1)), ("_with_seen", above.sum(1))):
            hit = rank < k  # rank 0 = first
            totals[f"hr@{k}{suffix}"] += hit.sum().item()
            totals[f"ndcg@{k}{suffix}"] += (hit / torch.log2(rank.float() + 2)).sum().item()
    return {name: total / len(data.items) for name, total in totals.items()}


def seen_items(data: UserSequences, users, cut: int, candidates: torch.Tensor) -> torch.Tensor:
    """[B, I] bool: which candidates each user rated before the item at -cut."""
    before = [data.items[u][: len(data.items[u]) - cut] for u in users]
    rows = np.repeat(np.arange(len(before)), [len(b) for b in before])
    cols = torch.searchsorted(candidates, torch.from_numpy(np.concatenate(before)))
    seen = torch.zeros(len(before), len(candidates), dtype=torch.bool)
    seen[torch.from_numpy(rows), cols] = True
    return seen


def fit(data: UserSequences, config: NextItemConfig, on_epoch=None) -> tuple[nn.Module, dict]:
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    model = NextItemModel(int(data.item_ids.max()) + 1, config)
    optimizer = Adam(model.parameters(), lr=config.lr, betas=(0.9, 0.98))
    start = time.perf_counter()
    best, best_state = -1.0, None
    for epoch in range(1, config.epochs + 1):
        loss = train_epoch(model, data, optimizer, rng)
        valid = evaluate(model, data, cut=2) if epoch % 5 == 0 or epoch == config.epochs else None
        if valid is not None and valid["ndcg@10"] > best:
            best = valid["ndcg@10"]
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
        if on_epoch is not None:
            on_epoch(epoch, loss, valid, time.perf_counter() - start)
    model.load_state_dict(best_state)
    return model, {"valid_ndcg@10": best, "seconds": time.perf_counter() - start}
