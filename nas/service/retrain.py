"""Retrain what a search found, with the search's baselines, properly: ``nas retrain``.

    nas retrain SEARCH_ID --pick knee --steps 4000 --seeds 3

A retrain is a search of its own in the registry (``nas list``, ``nas status``, ``nas
cancel`` and ``nas resume`` work on it), whose config is the searched one's with a
``retrain`` section that fixes, when it is created, what it trains: the picked
architectures (``knee``, ``best``, ``front``, a trial number, an arch_id) and the search's
baselines, each with seeds 0..S-1, on the train split (or train+valid), measured on the
test split, which the search never saw. Its trials are of kind ``retrain``, one per
(architecture, seed), with ``arch_id`` ``<arch_id>-s<seed>`` (one row per pair). They run
as any candidate does, through the controller's Ray Tune loop: the same concurrency,
memory limit, retries of dead workers, heartbeat and resume.

Its report is ``nas/service/retrain_report.py``'s.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError, NasError
from nas.core.paths import weights_file
from nas.service.baselines import BaselineSchedule, load_baseline
from nas.service.config import (
    RegisterConfig,
    RetrainConfig,
    RetrainPick,
    SearchConfig,
    validate_config,
)
from nas.service.controller import INTERRUPTED, Controller
from nas.service.recording import Recording
from nas.service.registry import Registry, Search, Trial
from nas.service.registry.models import FINISHED, RETRAIN_KIND
from nas.service.retrain_report import retrain_report
from nas.service.summary import summarize
from workers.fp8_probe import fp8_plan_sites
from workers.messages import TrialRequest, TrialSettings

TRAIN_ON = {"train": ("train",), "train+valid": ("train", "valid")}


def plan_retrain(
    registry: Registry,
    search: Search,
    picks: list[str],
    steps: int | None,
    seeds: int,
    train_on: str,
    baselines: bool,
    register: RegisterConfig | None = None,
    select_every: int | None = None,
    spec_baselines: list[Path] = (),
) -> SearchConfig:
    """The config of a retrain of ``search``: checked, nothing written. ``ConfigError``
    names the flag at fault and what would be valid. ``select_every``: check every N steps
    and keep the best weights (0: keep the last step's; None: as the search did).
    ``spec_baselines``: spec files trained as baselines too (a search run without baselines
    can still be held against DCNv2)."""
    if register is not None:
        from nas.service.serving import check_name

        check_name(register.name, register.alias)
    if seeds < 1 or seeds > 100:
        raise ConfigError("--seeds", f"must be between 1 and 100, got {seeds}")
    if train_on not in TRAIN_ON:
        raise ConfigError("--train-on", f"must be one of {', '.join(TRAIN_ON)}, got {train_on!r}")
    config = validate_config(search.config, f"search {search.id}")
    if config.retrain is not None:
        raise NasError(f"{search.id} is itself a retrain; retrain the search it came from")
    trials = registry.trials(search.id)
    chosen = resolve_picks(config, trials, picks or ["knee"])
    if baselines:
        for t in trials:
            if t.is_baseline and t.arch_id not in {p.trial.arch_id for p in chosen}:
                chosen.append(_Picked(t, "baseline"))
    extra = _spec_baselines(spec_baselines, config.dataset, {p.trial.arch_id for p in chosen})
    if not chosen and not extra:
        raise NasError(f"search {search.id} has nothing to retrain")
    data = config.to_dict()
    budget = {**data["budget"], "steps": steps or config.budget.steps, "max_minutes": None}
    if select_every is not None and select_every < 0:
        raise ConfigError("--select-every", f"must be 0 or a positive integer, got {select_every}")
    if select_every == 0:
        budget["select_best"] = None
    elif select_every:
        budget["select_best"] = {**(budget["select_best"] or {}), "every_steps": select_every}
    if train_on == "train+valid" and budget["select_best"]:
        raise ConfigError(
            "--train-on",
            "train+valid leaves no validation rows to select the best weights on "
            "(budget.select_best); train on train, or add --select-every 0 to keep the "
            "last step's weights",
        )
    data.update(
        budget=budget,
        scheduler=None,
        include_baselines=False,
        retrain=RetrainConfig(
            of=search.id,
            picks=[p.pick() for p in chosen] + extra,
            seeds=seeds,
            train_on=train_on,
            register_as=register,
        ).model_dump(),
    )
    data["budget"]["candidates"] = (len(chosen) + len(extra)) * seeds
    return validate_config(data, f"the retrain of {search.id}")


def _spec_baselines(paths: list[Path], dataset: str, taken: set[str]) -> list[RetrainPick]:
    """``--baseline`` spec files as baseline picks, each checked against the search's
    dataset; one already picked (or given twice) is trained once."""
    if not paths:
        return []
    from nas.data import load_dataset

    schema = load_dataset(dataset).schema
    out = []
    for path in paths:
        spec = load_baseline(path, schema, "--baseline", f"{path} (--baseline, on {dataset})")
        if spec.arch_id not in taken:
            taken.add(spec.arch_id)
            out.append(RetrainPick(label=spec.name, spec=spec.to_dict(), picked_as=["baseline"]))
    return out


@dataclass
class _Picked:
    trial: Trial
    why: str

    def pick(self) -> RetrainPick:
        t = self.trial
        return RetrainPick(
            label=t.label or t.arch_id[:12],
            spec=t.spec,
            picked_as=[self.why],
            trial=t.number,
            fp8_sites=fp8_plan_sites(t.metrics),
        )


def resolve_picks(config: SearchConfig, trials: list[Trial], picks: list[str]) -> list[_Picked]:
    """``knee``, ``best`` (the first objective's), ``front`` (its searched points), a trial
    number or an arch_id (or a unique prefix of one), each a completed candidate; in order,
    each architecture once (a later pick adds its reason to the earlier one's)."""
    summary = summarize(config, trials)
    done = [t for t in trials if t.is_candidate and t.status == "completed"]
    by_number = {t.number: t for t in done}
    chosen: dict[str, _Picked] = {}

    def add(trial: Trial, why: str) -> None:
        if trial.arch_id in chosen:
            chosen[trial.arch_id].why += f", {why}"
        else:
            chosen[trial.arch_id] = _Picked(trial, why)

    valid = (
        "knee, best, front, the number of a completed trial "
        f"({', '.join(map(str, sorted(by_number))) or 'none yet'}), or its arch_id"
    )
    for pick in picks:
        if pick in ("knee", "best"):
            point = summary.knee if pick == "knee" else (summary.front or [None])[0]
            if point is None:
                raise ConfigError("--pick", f"the search has no {pick} yet: no completed candidate")
            add(by_number[point.number], pick)
        elif pick == "front":
            searched = [c for c in summary.front if not c.is_baseline]
            if not searched:
                raise ConfigError("--pick", "front: no searched candidate is on the front")
            for c in searched:
                add(by_number[c.number], "front")
        elif pick.isdigit():
            if int(pick) not in by_number:
                raise ConfigError("--pick", f"{pick} is not a completed trial; use {valid}")
            add(by_number[int(pick)], f"trial {pick}")
        else:
            found = [t for t in done if t.arch_id.startswith(pick.lower())] if pick else []
            if len(found) != 1:
                what = "matches no" if not found else "matches more than one"
                raise ConfigError("--pick", f"{pick!r} {what} completed candidate; use {valid}")
            add(found[0], "arch_id")
    return list(chosen.values())


class RetrainRecording(Recording):
    """A retrain's records: its comparison instead of a front, and the best model
    registered when ``register_as`` asks for it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.registered = None  # nas.service.serving.Registered, once registered
        self.register_error: str | None = None

    def progress(self, trials: list[Trial]):
        return retrain_report(self.config, trials)

    def log_end(self, search: Search, trials: list[Trial]) -> None:
        report = retrain_report(self.config, trials).to_dict()
        self.tracker.log_retrain(search.mlflow_run_id, report)
        if report["rows"]:
            from dashboards.pareto_html import page, retrain_figure

            html = page(search.id, retrain_figure(report))
            self.tracker.log_text(search.mlflow_run_id, html, "retrain.html")
        register = self.config.retrain.register_as
        if search.status == "completed" and register is not None:
            from nas.service.serving import register_retrain

            try:
                self.registered = register_retrain(
                    self.registry, search, register.name, register.alias
                )
            except NasError as err:  # the retrain stands; registering can be done again
                self.register_error = str(err)


class RetrainController(Controller):
    """The controller's Ray Tune loop, over the retrain's (architecture, seed) pairs: no
    strategy, no setup jobs, no front; each trial measured on the test split."""

    recording_class = RetrainRecording

    def _strategy(self):
        return None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.retrain: RetrainConfig = self.config.retrain  # its config has no scheduler

    def _total(self) -> int:
        return len(self.retrain.picks) * self.retrain.seeds

    def begin(self, search: Search) -> list[Trial]:
        self.search = self.recording.open(search)
        self.tracker.tag_run(self.search.mlflow_run_id, {"retrain_of": self.retrain.of})
        trials = self.registry.trials(search.id)
        self.recording.log_unlogged(trials)
        self.rerun = [t for t in trials if t.status in ("running", "cancelled")]
        done = {t.arch_id for t in trials}
        self.todo = [
            (i, seed)
            for i, pick in enumerate(self.retrain.picks)
            for seed in range(self.retrain.seeds)
            if _pair_id(pick, seed) not in done
        ]
        self.baselines = BaselineSchedule([], self.config.resources.concurrency)
        self.known = {t.arch_id: t for t in trials}
        return trials

    @functools.cached_property
    def trial_data(self):
        from workers.trial_data import TrialData

        train_on, mapped = TRAIN_ON[self.retrain.train_on], self.plan.ray_address is None
        return TrialData.from_prepared(self.plan.dataset, "test", train_on, mapped=mapped)

    def _run_phases(self, search: Search, time_budget_s: float | None) -> None:
        self.reporter.phase("retraining", self._total())
        self._fit(search, None)

    def next_config(self, tune_id: str) -> dict[str, Any] | None:
        if self.should_stop():
            return None
        if self.rerun:
            trial = self.registry.restart_trial(self.rerun.pop(0).id)
        elif self.todo:
            index, seed = self.todo.pop(0)
            pick = self.retrain.picks[index]
            trial = self.registry.add_trial(
                self.search.id,
                pick.spec,
                _pair_id(pick, seed),
                f"{pick.label} s{seed}",
                RETRAIN_KIND,
                job={"pick": index, "seed": seed},
            )
        else:
            return None
        self.known[trial.arch_id] = trial
        return self.start(tune_id, trial, self.settings(trial.job["seed"], None))

    def request(self, trial: Trial, settings: TrialSettings) -> TrialRequest:
        """A retrain trial keeps its trained weights (for ``--register``)."""
        arch_id = ArchSpec.from_dict(trial.spec).arch_id
        path = weights_file(self.search.id, arch_id, settings.train.seed)
        sites = self.retrain.picks[trial.job["pick"]].fp8_sites
        if settings.train.precision == "fp8" and sites is not None:  # its plan's sites only
            train = dataclasses.replace(settings.train, fp8_sites=tuple(sites))
            settings = dataclasses.replace(settings, train=train)
        return dataclasses.replace(super().request(trial, settings), save_weights=str(path))

    def _estimate(self, trial: Trial) -> dict[str, float]:
        return {}

    def _heard(self, trial, outcome) -> None:
        return None

    def _final_status(self, search, time_budget, seconds) -> tuple[str, str | None]:
        if self.cancelled:
            return "cancelled", "cancelled by nas cancel"
        trials = self.registry.trials(search.id)
        if not self.todo and not self.rerun and all(t.status in FINISHED for t in trials):
            return "completed", None
        return "interrupted", INTERRUPTED


def _pair_id(pick: RetrainPick, seed: int) -> str:
    return f"{ArchSpec.from_dict(pick.spec).arch_id}-s{seed}"
