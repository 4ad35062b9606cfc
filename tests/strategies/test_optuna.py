"""The optuna strategy's NSGA-II shares one search-space cache among its samplers: it must
ask exactly what Optuna's own sampler, with a cache of its own per ask, would."""

from __future__ import annotations

from pathlib import Path

import optuna

from nas.search.strategies import create_strategy
from nas.search.strategies import optuna as optuna_strategy
from tests.strategies.test_contract import context, run

OBJECTIVES = ("ne", "flops")


def test_nsga2_asks_what_optunas_own_sampler_asks(tmp_path: Path, monkeypatch) -> None:
    options = {"sampler": "nsga2", "population_size": 4}  # six generations in 24 asks
    shared = run(
        create_strategy("optuna", options, context(tmp_path, 5, OBJECTIVES, "s")), 24, OBJECTIVES
    )
    monkeypatch.setattr(
        optuna_strategy,
        "_nsga2",
        lambda _: lambda intersection, **o: optuna.samplers.NSGAIISampler(**o),
    )
    own = run(
        create_strategy("optuna", options, context(tmp_path, 5, OBJECTIVES, "o")), 24, OBJECTIVES
    )
    assert shared == own
    assert len(set(own)) == 24
