"""A search's hand-designed baselines: which are left to train, when the next may start, and
which this registry has trained before with the same settings.

Baselines train beside the candidates, not before them, so a search starts on its
candidates at once: while the strategy has candidates to give, the baselines hold at most
half the workers (at least one; with one worker they come first). Trained before with the
same training key (``nas/service/trained_before.py``), a baseline is not trained again:
the search records that training's figures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from nas.search.objectives import COST_OBJECTIVES
from nas.service.registry import Registry, Trial


def load_baseline(path: Path, schema, field: str, source: str) -> ArchSpec:
    """A baseline's spec file, named after the file unless it names itself, checked to build
    on ``schema``. A missing file is a ``ConfigError`` on ``field``; a bad spec one from
    ``source``."""
    from nas.arch.model import model_configs

    if not path.is_file():
        raise ConfigError(field, f"no spec file at {path}")
    try:
        spec = ArchSpec.load(path)
        if spec.name is None:
            spec = ArchSpec(**{**spec.__dict__, "name": path.stem})
        model_configs(spec, schema)
    except ConfigError as err:
        raise err.within(source=source) from None
    return spec


class BaselineSchedule:
    def __init__(self, specs: list[ArchSpec], concurrency: int):
        self.left = list(specs)  # in the order they train
        self.slots = max(1, concurrency // 2)  # workers they may hold beside the candidates

    def __bool__(self) -> bool:
        return bool(self.left)

    def pending(self) -> set[str]:
        """The arch_ids still to train."""
        return {spec.arch_id for spec in self.left}

    def due(self, running: int) -> ArchSpec | None:
        """The next baseline, if ``running`` baselines leave it a slot beside the candidates."""
        return self.left.pop(0) if self.left and running < self.slots else None

    def next(self) -> ArchSpec | None:
        """The next baseline, whatever is running (the candidates' budget is spent)."""
        return self.left.pop(0) if self.left else None

    def trained_before(
        self,
        registry: Registry,
        key: Callable[[dict[str, Any]], str],
        costs: Callable[[dict[str, Any], dict[str, Any]], dict[str, float]],
        objectives: list[str],
    ) -> Iterator[tuple[ArchSpec, Trial, dict[str, Any], list[float]]]:
        """The baselines ``registry`` has trained before under the same ``key``: each with
        that trial, its metrics (the figures as trained, the costs as ``costs`` prices them
        now) and its objective values. Each one yielded is no longer left to train."""
        for spec in list(self.left):
            as_dict = spec.to_dict()
            earlier = registry.trained_before(spec.arch_id, key(as_dict))
            if earlier is None:
                continue
            metrics = {k: v for k, v in earlier.metrics.items() if k not in COST_OBJECTIVES}
            metrics |= costs(as_dict, metrics)
            if any(o not in metrics for o in objectives):  # filed by an older recnas
                continue
            self.left.remove(spec)
            yield spec, earlier, metrics, [float(metrics[o]) for o in objectives]
