"""A search checked before anything is written or started: its dataset, space, strategy
and baselines built, and the services it will talk to (MLflow, Ray) checked reachable.

    plan(config, config_dir, ray_address) -> Plan     # ConfigError naming the field, if not
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError, NasError
from nas.core.paths import artifacts_dir
from nas.search.objectives import COST_OBJECTIVES, CostSettings, split_label
from nas.search.strategies import Strategy, StrategyContext, create_strategy
from nas.service.baselines import load_baseline
from nas.service.config import SearchConfig
from search_spaces.base import SearchSpace
from workers.device import gpu_count
from workers.metrics import GROUPED

if TYPE_CHECKING:
    from nas.data import Progress


@dataclass
class Plan:
    """A checked search: what it needs, built before anything is written or started."""

    config: SearchConfig
    dataset: Any  # PreparedDataset
    space: SearchSpace
    baselines: list[ArchSpec]
    tracking_uri: str  # checked reachable
    artifact_root: Path | None  # for the default local store; a server chooses its own
    ray_address: str | None  # checked reachable; None: a local Ray
    # the built-in baselines that do not build on the dataset (DeepFM on one categorical
    # field): each one's name and why, left out (a baseline the config lists is refused)
    baselines_left_out: list[tuple[str, str]] = field(default_factory=list)

    def strategy(self, registry_url: str, search_id: str) -> Strategy:
        """The search's strategy (Optuna's keeps its study in the registry database)."""
        context = StrategyContext(
            space=self.space,
            objectives=self.config.objective_list(),
            seed=self.config.seed,
            storage_url=registry_url,
            study_name=f"recnas-{search_id}",
            train={
                **self.config.train.model_dump(),
                "threads": self.config.resources.cpus_per_trial,
            },
            budget=self.config.budget.candidates,
            concurrency=self.config.resources.concurrency,
            costs=tuple(
                CostSettings(o.name, o.target, o.precision, o.batch, o.candidates)
                for o in self.config.objectives
                if o.name in COST_OBJECTIVES
            ),
        )
        return create_strategy(self.config.strategy.name, self.config.strategy.options, context)


def tracking_store(config: SearchConfig) -> tuple[str, Path | None]:
    """The search's MLflow tracking URI, checked, and the artifact root for the default local
    store (None for a server, which chooses its own)."""
    from nas.service import endpoints

    if config.tracking_uri is None:
        return endpoints.local_tracking_uri(), artifacts_dir()
    return endpoints.tracking_uri(config.tracking_uri), None


def plan(
    config: SearchConfig,
    config_dir: Path,
    ray_address: str | None = None,
    progress: Progress | None = None,
) -> Plan:
    """Build everything a search needs from its config (``ray_address``: the command line's,
    over the config's and RAY_ADDRESS); errors name the field. The services it will talk to
    are checked reachable: a search never starts to find out it cannot record anything.
    ``progress`` hears the dataset's preparation, where it is not prepared yet."""
    from nas.data import load_dataset
    from nas.service import endpoints
    from search_spaces import SpaceInputs, create_space

    if ray_address is not None:
        address = endpoints.ray_address(ray_address, "--address")
    elif config.ray_address is not None:
        address = endpoints.ray_address(config.ray_address)
    elif os.environ.get("RAY_ADDRESS"):
        address = endpoints.ray_address(os.environ["RAY_ADDRESS"], "RAY_ADDRESS")
    else:
        address = None
    tracking, artifacts = tracking_store(config)
    cpus = os.cpu_count() or 1
    if address is None and config.resources.cpus_per_trial > cpus:
        raise ConfigError(
            "resources.cpus_per_trial",
            f"{config.resources.cpus_per_trial} CPUs per trial, but this machine has {cpus}; "
            "no trial could ever start (use at most the machine's CPUs, or a Ray cluster)",
        )
    resources = config.resources
    if resources.workers_per_trial > 1:
        if resources.gpus_per_trial > 0:
            raise ConfigError(
                "resources.workers_per_trial",
                "data-parallel candidates train on CPUs only for now; set gpus_per_trial: 0",
            )
        group = resources.workers_per_trial * resources.cpus_per_trial
        if address is None and group > cpus:
            raise ConfigError(
                "resources.workers_per_trial",
                f"{resources.workers_per_trial} workers x {resources.cpus_per_trial} CPUs is "
                f"{group} CPUs a candidate, and this machine has {cpus}; no candidate could "
                "start (use fewer, or a Ray cluster)",
            )
    gpus, visible = resources.gpus_per_trial, gpu_count()
    if address is None and gpus > visible:
        raise ConfigError(
            "resources.gpus_per_trial",
            f"{gpus:g} GPUs per trial, but this machine has {visible} that torch can use; "
            "no trial could ever start (use 0 to train on the CPU, or a Ray cluster with GPUs)",
        )
    from nas.arch.cost import get_target
    from nas.search.strategies import check_options, get_strategy

    dataset = load_dataset(config.dataset, progress=progress)
    for i, o in enumerate(config.objectives):  # the cpu target is measured here once, cached
        if o.name in COST_OBJECTIVES:
            get_target(o.target, config.resources.cpus_per_trial)
        base, label = split_label(o.name)
        if label is not None and label not in dataset.schema.labels:
            named = dataset.schema.labels
            raise ConfigError(
                f"objectives[{i}]",
                f"{o.name!r} names label {label!r}, but dataset {dataset.name!r} "
                + (
                    f"has labels {', '.join(named)} ({base}:{named[0]}, or {base} for their mean)"
                    if named
                    else f"has one label: write {base}"
                ),
            )
        by = GROUPED.get(base)
        if by is not None and dataset.groups("valid", by) is None:
            raise ConfigError(
                f"objectives[{i}]",
                f"{base} needs each row's {by}, and dataset {dataset.name!r} has none "
                f"(declare keys.{by} in its schema file)",
            )
    space = create_space(config.space.name, config.space.options, SpaceInputs.of(dataset.schema))
    strategy = config.strategy
    get_strategy(strategy.name).check(
        check_options(strategy.name, strategy.options),
        space,
        dataset.schema,
        config.budget.candidates,
    )
    baselines, seen, left_out = [], set(), []
    for i, path in enumerate(config.baseline_paths(config_dir)):
        where = f"{path} (on {dataset.name})"
        try:
            spec = load_baseline(path, dataset.schema, f"baselines[{i}]", where)
        except ConfigError as err:
            if config.baselines is not None:  # listed by the config: its author's to mend
                raise
            left_out.append(
                (path.stem, f"{err.field}: {err.message}" if err.field else err.message)
            )
            continue
        if spec.arch_id not in seen:
            seen.add(spec.arch_id)
            baselines.append(spec)
    return Plan(config, dataset, space, baselines, tracking, artifacts, address, left_out)


def same_data(search: Any, dataset: Any) -> None:
    """Refuse to resume ``search`` on a dataset prepared again since it started (another
    schema, changed source files): its candidates so far were measured on the other data,
    and a front mixing the two compares nothing. Searches older than the record pass."""
    if search.data_version is None or dataset.version == search.data_version:
        return
    from nas.data import prepare_command

    again = prepare_command(search.config["dataset"])
    raise NasError(
        f"search {search.id} ran on {dataset.name} as prepared then (version "
        f"{search.data_version}), and it has been prepared again since (version "
        f"{dataset.version}: another schema, or changed source files); its candidates so "
        f"far were measured on the earlier data. Prepare it as it was ({again}, with the "
        "schema and files the search started on) to resume it, or start a new search on "
        "the data as it is now (nas submit)"
    )
