"""Pareto sorting, hypervolume and knee: against brute force and against Optuna."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from optuna._hypervolume import compute_hypervolume
from optuna.samplers.nsgaii._elite_population_selection_strategy import _calc_crowding_distance
from optuna.study._multi_objective import _fast_non_domination_rank
from optuna.trial import create_trial

from nas.search.pareto import (
    crowding_distances,
    dominates,
    front_indices,
    hypervolume,
    knee,
    nondominated_ranks,
    pareto_order,
)


def brute_ranks(losses: np.ndarray) -> np.ndarray:
    ranks = np.full(len(losses), -1)
    remaining = set(range(len(losses)))
    rank = 0
    while remaining:
        front = {
            i for i in remaining if not any(dominates(losses[j], losses[i]) for j in remaining)
        }
        for i in front:
            ranks[i] = rank
        remaining -= front
        rank += 1
    return ranks


def brute_hypervolume(losses: np.ndarray, ref: np.ndarray) -> float:
    """Sum the cells of the grid spanned by every coordinate that some point dominates."""
    axes = [np.unique(np.append(losses[:, k], ref[k])) for k in range(losses.shape[1])]
    total = 0.0
    for cell in itertools.product(*(range(len(a) - 1) for a in axes)):
        low = np.array([axes[k][c] for k, c in enumerate(cell)])
        high = np.array([axes[k][c + 1] for k, c in enumerate(cell)])
        if np.any(np.all(losses <= low, axis=1)):
            total += float(np.prod(high - low))
    return total


@pytest.mark.parametrize("dims", [2, 3, 4])
@pytest.mark.parametrize("seed", range(5))
def test_ranks_match_brute_force_and_optuna(dims: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    losses = rng.integers(0, 6, size=(40, dims)).astype(float)  # many ties on purpose
    ranks = nondominated_ranks(losses, ["min"] * dims)
    assert ranks.tolist() == brute_ranks(losses).tolist()
    assert ranks.tolist() == _fast_non_domination_rank(losses).tolist()


@pytest.mark.parametrize("dims", [2, 3, 4])
@pytest.mark.parametrize("seed", range(5))
def test_hypervolume_matches_brute_force_and_optuna(dims: int, seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    losses = rng.random((12, dims))
    ref = np.full(dims, 1.1)
    ours = hypervolume(losses, ["min"] * dims, ref)
    assert ours == pytest.approx(brute_hypervolume(losses, ref), rel=1e-9)
    assert ours == pytest.approx(compute_hypervolume(losses, ref), rel=1e-9)


def test_directions_turn_maximised_objectives_into_losses() -> None:
    # (auc max, flops min): (0.8, 10) dominates (0.7, 20); (0.9, 30) is on the front too.
    values = [[0.8, 10.0], [0.7, 20.0], [0.9, 30.0]]
    assert front_indices(values, ["max", "min"]).tolist() == [0, 2]
    # Dominated area against reference (auc 0.5, flops 40): 0.3 * 30 + 0.1 * 10.
    assert hypervolume(values, ["max", "min"], [0.5, 40.0]) == pytest.approx(0.3 * 30 + 0.1 * 10)


def test_points_beyond_the_reference_add_nothing() -> None:
    assert hypervolume([[2.0, 0.5]], ["min", "min"], [1.0, 1.0]) == 0.0
    assert hypervolume(np.zeros((0, 2)), ["min", "min"], [1.0, 1.0]) == 0.0


def test_knee_is_the_balanced_front_point() -> None:
    values = [[0.0, 1.0], [0.2, 0.2], [1.0, 0.0], [0.5, 0.9]]
    assert knee(values, ["min", "min"]) == 1
    assert knee(np.zeros((0, 2)), ["min", "min"]) is None


def test_bad_shapes_and_directions_are_rejected() -> None:
    with pytest.raises(ValueError, match="shape"):
        nondominated_ranks([[1.0, 2.0]], ["min"])
    with pytest.raises(ValueError, match="direction"):
        nondominated_ranks([[1.0]], ["down"])


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("seed", range(8))
def test_crowding_distances_match_optuna(dims: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    # Distinct values: with ties the distance depends on the order the tied points are met.
    losses = rng.random((int(rng.integers(1, 12)), dims))
    losses[: len(losses) // 4, 0] = 0.5  # but one objective may be equal for many
    trials = [create_trial(values=list(row)) for row in losses]
    for number, trial in enumerate(trials):
        trial.number = number
    theirs = _calc_crowding_distance(list(trials))
    expected = [theirs[number] for number in range(len(trials))]
    np.testing.assert_allclose(crowding_distances(losses), expected)


@pytest.mark.parametrize("seed", range(8))
def test_pareto_order_goes_front_by_front_ends_first(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = rng.random((int(rng.integers(1, 20)), 2))
    directions = ["min", "max"]
    order = pareto_order(values, directions)
    assert sorted(order) == list(range(len(values)))
    ranks = nondominated_ranks(values, directions)[order]
    assert list(ranks) == sorted(ranks)
    front = front_indices(values, directions)
    if len(front) >= 2:  # each objective's best point on the front comes before the rest
        ends = {int(front[np.argmin(values[front, 0])]), int(front[np.argmax(values[front, 1])])}
        assert set(order[: len(ends)]) == ends
    # One objective: plainly sorted.
    assert list(pareto_order(values[:, :1], ["min"])) == list(np.argsort(values[:, 0]))
