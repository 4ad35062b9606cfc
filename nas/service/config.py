"""A search, as the user writes it: one YAML file, validated with pydantic.

    name: ctr_quick
    dataset: movielens-1m
    space: {name: ctr_stack, options: {max_depth: 2}}
    strategy: {name: evolution, options: {population_size: 8}}
    objectives: [ne, flops]            # or {name: flops, reference: 5.0e5}
    budget: {candidates: 20, steps: 500, max_minutes: 30}
    train: {batch_size: 1024}
    resources: {concurrency: 2, cpus_per_trial: 1, memory_gb_per_trial: 4}
    scheduler: {name: asha, options: {grace_steps: 250}}   # optional early stopping
    seed: 0
    include_baselines: true
    reuse_baselines: true              # baselines trained before with the same settings

Everything is checked before anything starts: names against the registries (space, strategy,
objective, dataset), each space's and strategy's own options, numbers against their ranges.
An error names the file and the field and says what would be valid (``ConfigError``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from nas.core.errors import ConfigError, config_error_from_pydantic, shown
from nas.core.names import NAME_RULE, is_name
from nas.core.paths import BASELINES_DIR, registry_file, tracking_file
from nas.search.early_stopping import DEFAULT_EVAL_ROWS
from nas.search.objectives import PER_LABEL, Objective, check_cost_options, get_objective
from workers.train_settings import MAX_BATCH, MAX_STEPS, TRAIN_PRECISIONS

SEED_MAX = 2**32 - 1  # numpy's and torch's seed range


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Named(Strict):
    """A registered thing chosen by name, with its options: ``{name: ..., options: {...}}``,
    or the name alone (``space: ctr_stack``) where the defaults will do."""

    name: str
    options: dict[str, Any] = {}

    @model_validator(mode="before")
    @classmethod
    def _name_alone(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value


class SpaceConfig(Named):
    pass


class StrategyConfig(Named):
    name: str = "evolution"


class SchedulerConfig(Named):
    pass  # asha | median (nas/search/early_stopping.py)


class ObjectiveConfig(Strict):
    name: str
    direction: str | None = None  # must agree with the objective's own direction
    reference: float | None = None  # hypervolume bound; default: the objective's own
    # latency and serving_latency only (nas.search.objectives, nas/arch/cost):
    target: str | None = None  # h100-sxm, h200, or cpu (this machine, measured)
    precision: str | None = None  # bf16 or fp8 on a GPU (default bf16); fp32 on cpu
    batch: int | None = Field(default=None, ge=1, le=1 << 20)  # latency: serving batch
    candidates: int | None = Field(default=None, ge=1, le=1 << 20)  # serving_latency


class SelectBest(Strict):
    """Keep each candidate's weights at its best validation check, not its last step's, and
    optionally stop it once it stops improving (``workers/trial.py``): early stopping as
    Keras's ``restore_best_weights`` and Lightning's ``EarlyStopping`` + ``ModelCheckpoint``
    do it. Its NE is then measured with those weights."""

    every_steps: int = Field(default=250, ge=1)  # steps between checks (and one at the end)
    patience: int | None = Field(default=None, ge=1, le=10_000)  # checks without a new best
    # Validation rows checked on (a fixed subsample); default: the scheduler's eval_rows,
    # else 50,000.
    eval_rows: int | None = Field(default=None, ge=1000, le=10_000_000)


class Budget(Strict):
    candidates: int = Field(
        default=20, ge=1, le=100_000
    )  # searched candidates; baselines come on top
    steps: int = Field(default=500, ge=1, le=MAX_STEPS)  # optimizer steps per candidate
    max_minutes: float | None = Field(
        default=None, gt=0, le=60 * 24 * 30
    )  # wall-clock limit of the search
    select_best: SelectBest | None = None  # default: every candidate ends at its last step


class TrainOptions(Strict):
    batch_size: int = Field(default=1024, ge=1, le=MAX_BATCH)
    lr: float = Field(default=2e-3, gt=0, lt=10)
    embedding_lr: float = Field(default=1e-2, gt=0, lt=10)
    precision: Literal[TRAIN_PRECISIONS] = "fp32"  # bf16: mixed precision (workers/train.py)


class Resources(Strict):
    concurrency: int = Field(default=2, ge=1, le=4096)  # candidates trained at once
    cpus_per_trial: int = Field(default=1, ge=1, le=1024)  # also the trial's torch thread count
    # a trial above it fails; a trial's process holds about 0.4 GiB (Python, torch, Ray)
    # before its model, so less than a quarter GiB is a slip (of units), not a budget
    memory_gb_per_trial: float = Field(default=4.0, ge=0.25, le=4096)
    max_retries: int = Field(default=2, ge=0, le=10)  # a candidate whose worker died
    # GPUs each trial (and each setup job: supernet, DNAS) trains on: a share of one (0.25:
    # four trials to a GPU) or whole ones; 0 (the default): the CPU
    gpus_per_trial: float = Field(default=0.0, ge=0, le=64)
    # processes that train one candidate together, data parallel, each with cpus_per_trial
    # CPUs (on any nodes); CPUs only for now
    workers_per_trial: int = Field(default=1, ge=1, le=256)
    # a trial still running after this many minutes is killed and fails (a hung one: a
    # stalled disk, a stopped process, a deadlock), and so is a setup job that reports no
    # progress for that long (it reports every second); none by default
    max_trial_minutes: float | None = Field(default=None, ge=0.05, le=10_080)

    @field_validator("gpus_per_trial")
    @classmethod
    def _whole_past_one(cls, value: float) -> float:
        if value > 1 and value != int(value):
            raise ValueError(
                f"a trial takes a share of one GPU (at most 1) or whole GPUs, got {value}"
            )
        return value


class RetrainPick(Strict):
    label: str  # a baseline's name, else the candidate's short arch_id
    spec: dict[str, Any]
    picked_as: list[str]  # knee, best, front, trial N, arch_id, baseline
    trial: int | None = None  # its trial number in the search that found it
    # the sites its FP8 probe planned in FP8 (None: not probed); precision fp8 trains those
    fp8_sites: list[str] | None = None


class RegisterConfig(Strict):
    """Where ``nas retrain --register`` puts its best model in MLflow's Model Registry."""

    name: str
    alias: str = "champion"


class RetrainConfig(Strict):
    """What ``nas retrain`` trains: written when the retrain is created, so a resumed one
    trains exactly the same (``nas/service/retrain.py``)."""

    of: str  # the search its architectures come from
    picks: list[RetrainPick]
    seeds: int = Field(default=3, ge=1, le=100)
    train_on: str = "train"  # or "train+valid"; the test split is always the one measured
    register_as: RegisterConfig | None = None  # register the best model when it completes


class SearchConfig(Strict):
    name: str
    dataset: str = "movielens-1m"
    space: SpaceConfig
    strategy: StrategyConfig = StrategyConfig()
    objectives: list[ObjectiveConfig] = [ObjectiveConfig(name="ne"), ObjectiveConfig(name="flops")]
    budget: Budget = Budget()
    train: TrainOptions = TrainOptions()
    resources: Resources = Resources()
    scheduler: SchedulerConfig | None = None  # early stopping; default: every candidate trains
    seed: int = Field(default=0, ge=0, le=SEED_MAX)
    include_baselines: bool = True
    # A baseline this registry trained before with the same settings, data and code is
    # recorded from that training, not trained again (nas/service/trained_before.py).
    reuse_baselines: bool = True
    fp8_probe: bool = False  # probe every trial's FP8 safety and plan (implied by fp8-dispatch)
    baselines: list[str] | None = None  # spec files; default: examples/specs/*.json
    tracking_uri: str | None = None  # MLflow; default: sqlite under the runs folder
    registry_url: str | None = None  # SQLAlchemy URL; default: sqlite under the runs folder
    ray_address: str | None = None  # default: RAY_ADDRESS, else a local Ray
    retrain: RetrainConfig | None = None  # set on a retrain (``nas retrain``), never by hand

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not is_name(value):
            raise ValueError(
                f"{shown(value)} is not a search name: use 1-100 {NAME_RULE} (it names the "
                "MLflow experiment and the id)"
            )
        return value

    @field_validator("objectives", mode="before")
    @classmethod
    def _names_to_objects(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    # --- derived ------------------------------------------------------------------------

    def objective_list(self) -> tuple[Objective, ...]:
        return tuple(get_objective(o.name) for o in self.objectives)

    def references(self) -> list[float | None]:
        return [
            o.reference if o.reference is not None else get_objective(o.name).reference
            for o in self.objectives
        ]

    def early_stopping(self):
        """The search's early-stopping scheduler (``nas.search.early_stopping``), or None."""
        from nas.search.early_stopping import create_scheduler

        if self.scheduler is None:
            return None
        return create_scheduler(self.scheduler.name, self.scheduler.options, self.budget.steps)

    @property
    def ne_objective(self) -> str:
        """The NE this search ranks by where it needs one figure (best weights, a retrain):
        its first NE objective (``ne``, or one label's, ``ne:click``), else ``ne``."""
        names = [o.name for o in self.objectives]
        return next((n for n in names if n.partition(":")[0] == "ne"), "ne")

    def selection(self) -> dict[str, int | str | None] | None:
        """How trials select their best weights (``budget.select_best``), as the worker
        reads it: ``{"every_steps", "patience", "rows", "metric"}``; None when they keep
        the last."""
        select = self.budget.select_best
        if select is None:
            return None
        if select.every_steps >= self.budget.steps:
            raise ConfigError(
                "budget.select_best.every_steps",
                f"{select.every_steps} is not below budget.steps ({self.budget.steps}): the "
                f"only check would be the last step's; use fewer, e.g. "
                f"{max(1, self.budget.steps // 8)}",
            )
        scheduled = self.early_stopping()
        rows = scheduled.options.eval_rows if scheduled else None
        if select.eval_rows is not None and rows is not None and select.eval_rows != rows:
            raise ConfigError(
                "budget.select_best.eval_rows",
                f"{select.eval_rows} differs from scheduler.options.eval_rows ({rows}): the "
                "checks and the rungs measure on the same validation rows; set the number "
                "in scheduler.options.eval_rows only",
            )
        rows = select.eval_rows or rows or DEFAULT_EVAL_ROWS
        return {
            "every_steps": select.every_steps,
            "patience": select.patience,
            "rows": rows,
            "metric": self.ne_objective,
        }

    def baseline_paths(self, base: Path) -> list[Path]:
        if not self.include_baselines:
            return []
        if self.baselines is None:
            return sorted(BASELINES_DIR.glob("*.json"))
        return [(base / p).resolve() for p in self.baselines]

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def validate_config(data: Any, source: str | None = None) -> SearchConfig:
    """A mapping (parsed YAML) as a SearchConfig, every name and option checked."""
    import nas.search.strategies
    import search_spaces
    from nas.data import check_dataset

    if not isinstance(data, dict):
        raise ConfigError(
            "", f"a search config must be a mapping, got {type(data).__name__}", source
        )
    try:
        _check_label_objectives(data.get("objectives"))
        config = SearchConfig.model_validate(data)
    except ValidationError as err:
        raise config_error_from_pydantic(err, source, model=SearchConfig) from None
    except ConfigError as err:
        raise err.within(source=source) from None
    try:
        check_dataset(config.dataset)
    except ConfigError as err:  # a schema file's own error: named with its file
        raise err.within("dataset" if err.source else "", source) from None
    try:
        search_spaces.check_options(config.space.name, config.space.options)
        nas.search.strategies.check_options(config.strategy.name, config.strategy.options)
        config.early_stopping()
        config.selection()
        names = [o.name for o in config.objectives]
        if not names:
            raise ConfigError("objectives", "needs at least one objective, e.g. [ne, flops]")
        if len(set(names)) != len(names):
            raise ConfigError("objectives", f"lists an objective twice: {names}")
        for i, o in enumerate(config.objectives):
            objective = get_objective(o.name, f"objectives[{i}].name")
            if o.direction is not None and o.direction != objective.direction:
                raise ConfigError(
                    f"objectives[{i}].direction",
                    f"{o.name} is always {objective.direction}imised; "
                    f"drop the field or write {objective.direction!r}",
                )
            check_cost_options(o, f"objectives[{i}]")
    except ConfigError as err:
        raise err.within(source=source) from None
    return config


def _check_label_objectives(objectives: Any) -> None:
    """YAML reads ``ne: click`` (a space after the colon) in a list as a mapping: say so."""
    for i, item in enumerate(objectives if isinstance(objectives, list) else ()):
        if isinstance(item, dict) and len(item) == 1 and "name" not in item:
            ((key, label),) = item.items()
            if key in PER_LABEL and isinstance(label, str):
                raise ConfigError(
                    f"objectives[{i}]",
                    f"'{key}: {label}' reads as a mapping in YAML; write {key}:{label} "
                    "(no space after the colon)",
                )


def stored_config(data: dict[str, Any], source: str | None = None) -> SearchConfig:
    """The config a search keeps in the registry, read back for showing it: checked against
    the schema only. It was checked in full (space, strategy, dataset) when the search was
    submitted, and loading those would cost the commands that only show a search (``nas
    list``, ``status``, ``pareto``, ``dashboard``) seconds of torch and Ray imports."""
    try:
        return SearchConfig.model_validate(data)
    except ValidationError as err:
        raise config_error_from_pydantic(err, source, model=SearchConfig) from None


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> SearchConfig:
    """Read a YAML file and apply ``overrides`` (dotted keys, e.g. ``budget.candidates``)."""
    from nas.core.user_files import parse_yaml, read_text

    path = Path(path)
    data = parse_yaml(read_text(path, "search config"), str(path))
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if not isinstance(data, dict):
            break
        node = data
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {}) if isinstance(node.get(part), dict | None) else {}
        node[leaf] = value
    if isinstance(data, dict) and isinstance(data.get("dataset"), str):
        from nas.data import is_schema_path

        if is_schema_path(data["dataset"]):  # a schema file's path: from the config's folder
            data["dataset"] = str((path.parent / Path(data["dataset"]).expanduser()).resolve())
    return validate_config(data, str(path))


def default_registry_url() -> str:
    return f"sqlite:///{registry_file()}"


def default_tracking_uri() -> str:
    return f"sqlite:///{tracking_file()}"
