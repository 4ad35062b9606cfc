"""Next-item training with HSTU on MovieLens-100k: the data view, and that it learns."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nas.core.errors import ConfigError
from workers.next_item import NextItemConfig, UserSequences, evaluate, fit, seen_items


def test_sequences_follow_the_users_history_in_time(ml100k) -> None:
    data = UserSequences.from_prepared(ml100k)
    assert len(data.items) == 943
    assert all(np.all(np.diff(t) >= 0) for t in data.times)
    assert sum(len(s) for s in data.items) == 100_000
    items = ml100k.schema.history.cardinality  # 0 pads, 1 is out of the train vocabulary
    assert np.array_equal(data.item_ids, np.arange(1, items))


def test_training_ranks_the_next_item_far_above_chance(ml100k) -> None:
    data = UserSequences.from_prepared(ml100k)
    config = NextItemConfig(
        max_len=50, dim=32, num_layers=1, qk_dim=16, value_dim=16, epochs=6, batch_size=32
    )
    model, info = fit(data, config)
    test = evaluate(model, data, cut=1)
    chance = 10 / len(data.item_ids)
    assert test["hr@10"] > 5 * chance, test
    assert 0 < test["ndcg@10"] <= test["hr@10"]
    assert info["valid_ndcg@10"] > 0
    # Leaving the user's rated items out of the ranking can only lift the target.
    assert test["hr@10"] >= test["hr@10_with_seen"] and test["ndcg@10"] > test["ndcg@10_with_seen"]


def test_seen_items_are_every_item_rated_before_the_target(ml100k) -> None:
    data = UserSequences.from_prepared(ml100k)
    candidates = torch.from_numpy(data.item_ids)
    users = range(10, 20)
    seen = seen_items(data, users, 2, candidates)
    for row, u in enumerate(users):
        expected = set(data.items[u][:-2].tolist())
        assert set(candidates[seen[row]].tolist()) == expected


@pytest.mark.parametrize(
    ("field", "value"), [("epochs", 0), ("negatives", -1), ("temperature", 0.0), ("dropout", 1.5)]
)
def test_a_bad_setting_is_refused_by_name(field, value) -> None:
    with pytest.raises(ConfigError, match=field):
        NextItemConfig(**{field: value})
