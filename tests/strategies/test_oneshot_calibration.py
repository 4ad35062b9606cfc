"""The one-shot strategy's calibrated ranker: it asks ``calibration`` members first,
waits for their results, fits the ranker on them and picks by its estimates. The supernet
here is a rule with a known bias (it scores two-layer members 0.2 worse than they train), so
a ranker that learned nothing leaves that error in its estimates."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from nas.search.objectives import get_objective
from nas.search.strategies import StrategyContext, Waiting, create_strategy, get_strategy
from nas.search.supernet.ranker import spread_over_families
from search_spaces import SpaceInputs, create_space

INPUTS = SpaceInputs(11, 8, 64)
BIAS = 0.2  # the supernet's error on two-layer members


def context() -> StrategyContext:
    return StrategyContext(
        space=create_space("ctr_stack", {"max_depth": 2}, INPUTS),
        objectives=(get_objective("ne"), get_objective("flops")),
        seed=0,
        budget=12,
    )


def alone(spec) -> float:
    """What stand-alone training gives a member: a fixed value per member."""
    return 0.7 + int(spec.arch_id[:6], 16) / 16**6 * 0.2


def supernet(space, spec) -> dict[str, float]:
    deep = space.encode(spec)["depth"] == 2
    return {"ne": alone(spec) + (BIAS if deep else 0.0), "flops": float(len(spec.arch_id))}


def finish_job(strategy) -> None:
    (job,) = strategy.jobs()
    space, rng = strategy.space, np.random.default_rng(1)
    pool = [space.sample(rng) for _ in range(200)]
    calibration = [ArchSpec.from_dict(d) for d in job.settings["calibration"]]
    strategy.job_done(
        job,
        {
            "picks": [{"spec": s.to_dict(), "estimate": supernet(space, s)} for s in pool[:4]],
            "calibration": [supernet(space, s) for s in calibration],
            "pool": [{"spec": s.to_dict(), "estimate": supernet(space, s)} for s in pool],
        },
    )


def test_it_trains_the_calibration_members_then_picks_by_the_ranker() -> None:
    strategy = create_strategy("oneshot", {"calibration": 8, "top_k": 4}, context())
    finish_job(strategy)
    assert strategy.offers() == 12
    first = [strategy.ask() for _ in range(8)]
    assert len({s.arch_id for s in first}) == 8
    with pytest.raises(Waiting, match="8 of its 8 calibration trainings"):
        strategy.ask()
    for spec in first[:-1]:
        strategy.tell(spec, [alone(spec), 1.0])
    with pytest.raises(Waiting, match="1 of its 8"):
        strategy.ask()
    strategy.tell(first[-1], None)  # a failed calibration training: fitted without it
    picks = [strategy.ask() for _ in range(4)]
    assert not {s.arch_id for s in picks} & {s.arch_id for s in first}
    errors = []
    for spec in picks:
        estimate = strategy.estimate(spec)
        assert estimate["supernet_ne"] == pytest.approx(supernet(strategy.space, spec)["ne"])
        errors.append(abs(estimate["ranker_ne"] - alone(spec)))
    assert max(errors) < BIAS / 2  # the ranker took out most of the supernet's bias
    summary = strategy.summary()
    assert summary["ranker"]["used"] and summary["ranker"]["results"] == 7
    assert len(summary["calibration"]) == 8


def test_without_enough_results_the_supernets_picks_stand() -> None:
    strategy = create_strategy("oneshot", {"calibration": 4, "top_k": 4}, context())
    finish_job(strategy)
    for spec in [strategy.ask() for _ in range(4)]:
        strategy.tell(spec, None)
    strategy.ask()
    assert strategy.summary()["ranker"] == {"results": 0, "used": False}


def test_a_search_resumed_while_calibrating_asks_what_an_unbroken_one_does() -> None:
    def run(resume_after: int | None) -> list[str]:
        strategy = create_strategy("oneshot", {"calibration": 6, "top_k": 3}, context())
        finish_job(strategy)
        asked = []
        for i in range(6):
            spec = strategy.ask()
            asked.append(spec.arch_id)
            strategy.tell(spec, [alone(spec), 1.0])
            if i == resume_after:
                state = json.loads(json.dumps(strategy.state_dict()))
                strategy = create_strategy("oneshot", {"calibration": 6, "top_k": 3}, context())
                strategy.load_state_dict(state)
        return asked + [strategy.ask().arch_id for _ in range(3)]

    assert run(2) == run(None)


def test_a_resumed_search_keeps_the_calibration_members_it_started_with(monkeypatch) -> None:
    """Its state holds them: a recnas that chooses them otherwise (here, K random draws)
    resumes the search with the members already asked, and its supernet job's scores stay
    matched to them."""
    from nas.search.strategies import oneshot

    strategy = create_strategy("oneshot", {"calibration": 6, "top_k": 3}, context())
    asked = [strategy.ask() for _ in range(2)]
    state = json.loads(json.dumps(strategy.state_dict()))
    monkeypatch.setattr(oneshot, "CANDIDATES_PER_MEMBER", 1)  # K random draws, as before
    drawn_today = create_strategy("oneshot", {"calibration": 6, "top_k": 3}, context())
    assert [s.arch_id for s in drawn_today.calibration] != [s.arch_id for s in strategy.calibration]
    drawn_today.load_state_dict(state)
    assert [s.arch_id for s in drawn_today.calibration] == [s.arch_id for s in strategy.calibration]
    assert {drawn_today.ask().arch_id for _ in range(4)}.isdisjoint(s.arch_id for s in asked)


@pytest.mark.parametrize(("k", "budget"), [(3, 12), (12, 12), (20, 12)])
def test_a_calibration_that_leaves_no_room_names_the_field(k, budget, ml1m) -> None:
    oneshot = get_strategy("oneshot")
    space = create_space("ctr_stack", {"max_depth": 2}, INPUTS)
    with pytest.raises(ConfigError) as caught:
        oneshot.check(oneshot.Options(calibration=k), space, ml1m.schema, budget)
    assert caught.value.field == "strategy.options.calibration"
    assert "use 0 (no ranker) or 4 to 11" in caught.value.message


def last_blocks(space, specs) -> dict[str, int]:
    counts: dict[str, int] = {}
    for spec in specs:
        block = space.encode(spec)["last.block"]
        counts[block] = counts.get(block, 0) + 1
    return counts


def test_the_calibration_members_cover_the_families_evenly() -> None:
    """Random draws of ``ctr_stack`` leave some last blocks with one member or none; the
    ranker could not correct those. The calibration spreads its members over every value."""
    space = context().space
    (blocks,) = [d.choices for d in space.decisions if d.name == "last.block"]
    for seed in range(3):
        settings = replace(context(), seed=seed, budget=3 * len(blocks))
        strategy = create_strategy("oneshot", {"calibration": 2 * len(blocks)}, settings)
        assert last_blocks(space, strategy.calibration) == {block: 2 for block in blocks}
        depths = [space.encode(s)["depth"] for s in strategy.calibration]
        assert abs(depths.count(1) - depths.count(2)) <= 1


def test_spreading_picks_rare_families_from_a_skewed_draw() -> None:
    space = context().space
    rng = np.random.default_rng(0)
    drawn = {s.arch_id: s for s in (space.sample(rng) for _ in range(600))}.values()
    by_block: dict[str, list] = {}
    for spec in drawn:
        by_block.setdefault(space.encode(spec)["last.block"], []).append(spec)
    common, *rare = sorted(by_block)
    candidates = by_block[common] + [s for block in rare for s in by_block[block][:1]]
    order = np.random.default_rng(1).permutation(len(candidates))
    candidates = [candidates[i] for i in order]  # one of each rare block among ~100 common
    picked = spread_over_families(space, candidates, len(by_block))
    assert last_blocks(space, picked) == {block: 1 for block in by_block}
    assert len({s.arch_id for s in picked}) == len(by_block)
    assert len(spread_over_families(space, candidates[:3], 10)) == 3
