"""Every registered sampling strategy passes these: determinism, dedup, exact resume, and it
finds the optimum of a toy space. A new strategy is tested the moment it is registered.
(Strategies that first run setup jobs have their own contract: test_job_contract.py.)"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from nas.arch.spec import ArchSpec
from nas.search.objectives import get_objective
from nas.search.strategies import SpaceExhausted, StrategyContext, create_strategy, list_strategies
from search_spaces import SpaceInputs, create_space

TOY = {  # 4 dims x 4 last layers x 3 top MLPs x 2 top inputs = 96 architectures
    "embedding_dims": [4, 8, 16, 32],
    "max_depth": 1,
    "blocks": ["fm", "dot", "mlp"],
    "block_params": {"mlp": {"widths": [[8], [16]]}},
    "top_mlps": [[], [8], [16]],
    "top_inputs": ["last", "all"],
}
TOY_SIZE = 96


def toy_loss(spec: ArchSpec) -> float:
    """A smooth bowl with one minimum (0.0): dim 8, fm, no top MLP, top input 'all'."""
    layer = spec.interaction[-1]
    block_cost = {"fm": 0.0, "dot": 0.5, "mlp": 1.0}[layer.block]
    return (
        abs(math.log2(spec.embedding_dim) - 3)
        + block_cost
        + 0.5 * len(spec.top_mlp)
        + (0.3 if spec.top_input == "last" else 0.0)
    )


def toy_flops(spec: ArchSpec) -> float:
    return float(spec.embedding_dim)


def context(tmp_path: Path, seed: int, objectives=("ne",), tag: str = "a") -> StrategyContext:
    return StrategyContext(
        space=create_space("ctr_stack", TOY, SpaceInputs(6)),
        objectives=tuple(get_objective(o) for o in objectives),
        seed=seed,
        storage_url=f"sqlite:///{tmp_path / f'{tag}.db'}",
        study_name="toy",
    )


def values_of(spec: ArchSpec, objectives) -> list[float]:
    return [toy_loss(spec) if o == "ne" else toy_flops(spec) for o in objectives]


def run(strategy, n: int, objectives=("ne",)) -> list[str]:
    ids = []
    for _ in range(n):
        spec = strategy.ask()
        ids.append(spec.arch_id)
        strategy.tell(spec, values_of(spec, objectives))
    return ids


def runs_jobs(name: str) -> bool:
    ctx = StrategyContext(create_space("ctr_stack", TOY, SpaceInputs(6)), (get_objective("ne"),), 0)
    return bool(create_strategy(name, {}, ctx).jobs())


STRATEGIES = [name for name in list_strategies() if not runs_jobs(name)]


@pytest.mark.parametrize("name", STRATEGIES)
def test_same_seed_same_sequence(name: str, tmp_path: Path) -> None:
    a = run(create_strategy(name, {}, context(tmp_path, seed=3, tag="a")), 20)
    b = run(create_strategy(name, {}, context(tmp_path, seed=3, tag="b")), 20)
    c = run(create_strategy(name, {}, context(tmp_path, seed=4, tag="c")), 20)
    assert a == b
    assert a != c


@pytest.mark.parametrize("name", STRATEGIES)
def test_never_asks_an_architecture_twice(name: str, tmp_path: Path) -> None:
    ids = run(create_strategy(name, {}, context(tmp_path, seed=0)), 60)
    assert len(set(ids)) == 60


@pytest.mark.parametrize("name", STRATEGIES)
def test_says_when_the_space_is_spent(name: str, tmp_path: Path) -> None:
    tiny = {**TOY, "embedding_dims": [4, 8], "blocks": ["fm"], "top_mlps": [[]]}  # 4 archs
    ctx = context(tmp_path, seed=0)
    ctx = StrategyContext(
        create_space("ctr_stack", tiny, SpaceInputs(6)), ctx.objectives, 0, ctx.storage_url, "tiny"
    )
    strategy = create_strategy(
        name, {"population_size": 2, "sample_size": 1} if name == "evolution" else {}, ctx
    )
    assert len(set(run(strategy, 4))) == 4
    with pytest.raises(SpaceExhausted, match="spent"):
        strategy.ask()


@pytest.mark.parametrize("name", STRATEGIES)
def test_resume_from_state_continues_exactly(name: str, tmp_path: Path) -> None:
    unbroken = run(create_strategy(name, {}, context(tmp_path, seed=7, tag="whole")), 30)
    first = create_strategy(name, {}, context(tmp_path, seed=7, tag="parts"))
    head = run(first, 12)
    pending = first.ask()  # asked, then the process dies before the result comes back
    state = first.state_dict()
    del first
    second = create_strategy(name, {}, context(tmp_path, seed=7, tag="parts"))
    second.load_state_dict(state)
    second.tell(pending, values_of(pending, ("ne",)))  # the re-run trial reports
    tail = run(second, 17)
    assert head + [pending.arch_id] + tail == unbroken


@pytest.mark.parametrize("name", STRATEGIES)
def test_failures_are_told_and_the_search_goes_on(name: str, tmp_path: Path) -> None:
    strategy = create_strategy(name, {}, context(tmp_path, seed=1))
    ids = []
    for i in range(15):
        spec = strategy.ask()
        ids.append(spec.arch_id)
        strategy.tell(spec, None if i % 3 == 0 else values_of(spec, ("ne",)))
    assert len(set(ids)) == 15


@pytest.mark.parametrize("name", STRATEGIES)
def test_finds_the_optimum_of_a_toy_space(name: str, tmp_path: Path) -> None:
    """Dedup alone guarantees this for a budget of the whole space; a guided strategy must
    find it in well under half the space, for every one of three seeds."""
    budget = 40 if name != "random" else TOY_SIZE
    for seed in range(3):
        strategy = create_strategy(name, {}, context(tmp_path, seed=seed, tag=f"s{seed}"))
        best = float("inf")
        for _ in range(budget):
            spec = strategy.ask()
            best = min(best, toy_loss(spec))
            strategy.tell(spec, values_of(spec, ("ne",)))
        assert best == 0.0, f"{name} seed {seed}: best {best} after {budget} candidates"


@pytest.mark.parametrize("name", STRATEGIES)
def test_two_objectives(name: str, tmp_path: Path) -> None:
    strategy = create_strategy(name, {}, context(tmp_path, seed=0, objectives=("ne", "flops")))
    ids = run(strategy, 25, ("ne", "flops"))
    assert len(set(ids)) == 25
