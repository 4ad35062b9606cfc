"""Pareto fronts over any number of objectives, each minimised or maximised.

Everything works on a matrix of objective values ``[n_points, n_objectives]`` and a matching
tuple of directions ("min" | "max"). Internally each column is turned into a loss (negated
when maximised), so "a dominates b" always means: no worse in every loss, better in one.

- ``nondominated_ranks``: fast non-dominated sorting (Deb et al. 2002); rank 0 is the front.
- ``hypervolume``: the volume dominated by the front and bounded by a reference point; an
  exact sweep in 2-D, exact recursive slicing over the first objective in n-D (HSO; fine for
  the fronts a search produces, tens of points).
- ``pareto_order``: NSGA-II's selection order (Deb et al. 2002): by front, then by crowding
  distance within a front, so the ends and the sparse parts of each front come first.
- ``knee``: the front point closest to the ideal point after scaling each objective to
  [0, 1] over the front (the compromise solution).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DIRECTIONS = ("min", "max")


def as_losses(values: np.ndarray | Sequence, directions: Sequence[str]) -> np.ndarray:
    """``values`` with every maximised column negated, so lower is always better."""
    points = np.asarray(values, dtype=float)
    if points.ndim != 2 or points.shape[1] != len(directions):
        raise ValueError(
            f"expected values of shape [n, {len(directions)}], got {list(points.shape)}"
        )
    for direction in directions:
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be 'min' or 'max', got {direction!r}")
    signs = np.array([1.0 if d == "min" else -1.0 for d in directions])
    return points * signs


def dominates(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether loss vector ``a`` dominates ``b``."""
    return bool(np.all(a <= b) and np.any(a < b))


def nondominated_ranks(values: np.ndarray | Sequence, directions: Sequence[str]) -> np.ndarray:
    """Rank of each point: 0 for the non-dominated front, 1 for the front once it is removed..."""
    losses = as_losses(values, directions)
    n = len(losses)
    if n == 0:
        return np.zeros(0, dtype=int)
    # leq[i, j]: i is no worse than j everywhere; lt[i, j]: i is better somewhere.
    leq = np.all(losses[:, None, :] <= losses[None, :, :], axis=2)
    lt = np.any(losses[:, None, :] < losses[None, :, :], axis=2)
    dominated_by = leq & lt  # [i, j]: i dominates j
    counts = dominated_by.sum(axis=0)  # how many points dominate j
    ranks = np.full(n, -1, dtype=int)
    current = np.flatnonzero(counts == 0)
    rank = 0
    while current.size:
        ranks[current] = rank
        counts = counts - dominated_by[current].sum(axis=0)
        counts[ranks >= 0] = -1
        current = np.flatnonzero(counts == 0)
        rank += 1
    return ranks


def front_indices(values: np.ndarray | Sequence, directions: Sequence[str]) -> np.ndarray:
    """Indices of the non-dominated points, in input order."""
    return np.flatnonzero(nondominated_ranks(values, directions) == 0)


def crowding_distances(losses: np.ndarray) -> np.ndarray:
    """NSGA-II's crowding distance of each loss vector among ``losses`` (one front): the
    sum over objectives of the gap between its neighbours, scaled by the objective's range;
    infinite at each objective's ends. An objective on which all are equal adds nothing."""
    distance = np.zeros(len(losses))
    for column in losses.T:
        order = np.argsort(column, kind="stable")
        ordered = column[order]
        span = ordered[-1] - ordered[0] if len(ordered) else 0.0
        if span > 0:
            distance[order[[0, -1]]] = np.inf
            distance[order[1:-1]] += (ordered[2:] - ordered[:-2]) / span
    return distance


def pareto_order(values: np.ndarray | Sequence, directions: Sequence[str]) -> np.ndarray:
    """Indices of ``values`` best first, as NSGA-II selects: lower front first, then larger
    crowding distance, then input order. With one objective: sorted by it."""
    losses = as_losses(values, directions)
    ranks = nondominated_ranks(losses, ["min"] * losses.shape[1])
    crowding = np.zeros(len(losses))
    for rank in np.unique(ranks):
        members = np.flatnonzero(ranks == rank)
        crowding[members] = crowding_distances(losses[members])
    return np.lexsort((np.arange(len(losses)), -crowding, ranks))


def hypervolume(
    values: np.ndarray | Sequence, directions: Sequence[str], reference: Sequence[float]
) -> float:
    """Volume dominated by ``values`` and bounded by ``reference`` (given in the objectives'
    own units and directions). Points that do not beat the reference everywhere add nothing."""
    losses = as_losses(values, directions)
    ref = as_losses([list(reference)], directions)[0]
    if len(losses) == 0:
        return 0.0
    inside = losses[np.all(losses < ref, axis=1)]
    if len(inside) == 0:
        return 0.0
    front = inside[nondominated_ranks(inside, ["min"] * len(ref)) == 0]
    return float(_hso(np.unique(front, axis=0), ref))


def _hso(points: np.ndarray, ref: np.ndarray) -> float:
    """Exact hypervolume of mutually non-dominated loss vectors below ``ref``."""
    if points.shape[1] == 1:
        return float(ref[0] - points[:, 0].min())
    if points.shape[1] == 2:
        ordered = points[np.argsort(points[:, 0], kind="stable")]
        volume, best_y = 0.0, ref[1]
        for x, y in ordered:
            if y < best_y:
                volume += (ref[0] - x) * (best_y - y)
                best_y = y
        return volume
    # Slice along the first objective: between consecutive x values, the slab's cross
    # section is the (d-1)-dimensional volume of the points with x at most the slab's start.
    ordered = points[np.argsort(points[:, 0], kind="stable")]
    xs = np.append(ordered[:, 0], ref[0])
    volume = 0.0
    for i in range(len(ordered)):
        width = xs[i + 1] - xs[i]
        if width <= 0:
            continue
        section = ordered[: i + 1, 1:]
        section = section[nondominated_ranks(section, ["min"] * section.shape[1]) == 0]
        volume += width * _hso(np.unique(section, axis=0), ref[1:])
    return volume


def knee(values: np.ndarray | Sequence, directions: Sequence[str]) -> int | None:
    """Index (into ``values``) of the front point closest to the ideal point, each objective
    scaled to [0, 1] over the front. None when there are no points."""
    losses = as_losses(values, directions)
    if len(losses) == 0:
        return None
    front = front_indices(values, directions)
    points = losses[front]
    low, high = points.min(axis=0), points.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    distance = np.linalg.norm((points - low) / span, axis=1)
    return int(front[int(np.argmin(distance))])
