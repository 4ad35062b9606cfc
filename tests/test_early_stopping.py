"""Early stopping in searches (ASHA, the median rule): where the rungs fall, what a trial
measures at them, what Tune's scheduler decides, and what a search records and resumes.

The searches are real (`nas submit` on a local Ray, MovieLens-100k); the scheduler tests
drive Ray Tune's own schedulers directly."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import optuna
import pytest
from mlflow import MlflowClient

from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from nas.search.early_stopping import create_scheduler
from nas.service.config import validate_config
from nas.service.plan import Plan
from nas.service.tune_glue import tune_scheduler
from search_spaces import SpaceInputs, create_space
from tests.conftest import runs_with_store
from tests.test_search import (
    baselines_yaml,
    mlflow_children,
    nas,
    registry_of,
    start_submit,
    wait_for,
)
from workers.train import TrainConfig
from workers.trial import Rungs, evaluate
from workers.trial_data import TrialData

REPO = Path(__file__).resolve().parent.parent

SEARCH = """\
name: early
dataset: movielens-100k
space: {{name: ctr_stack, options: {{max_depth: 2, embedding_dims: [8, 16]}}}}
strategy: {{name: {strategy}}}
objectives: {objectives}
budget: {{candidates: {candidates}, steps: 160}}
train: {{batch_size: 256}}
scheduler: {{name: {scheduler}, options: {{grace_steps: 20, eval_rows: 4000{extra}}}}}
resources: {{concurrency: 1, cpus_per_trial: 1}}
{baselines}
seed: {seed}
"""


def write(folder: Path, strategy="evolution", scheduler="asha", candidates=10, **kw) -> Path:
    path = folder / "search.yaml"
    path.write_text(
        SEARCH.format(
            strategy=strategy,
            scheduler=scheduler,
            candidates=candidates,
            objectives=kw.get("objectives", "[ne, flops]"),
            extra=kw.get("extra", ", reduction_factor: 2"),
            baselines=baselines_yaml(kw.get("baselines", "two")),
            seed=kw.get("seed", 0),
        )
    )
    return path


# --- configuration -------------------------------------------------------------------------


def test_asha_rungs_grow_by_the_reduction_factor_from_the_grace_steps() -> None:
    for grace, rf, steps in [(25, 2.0, 200), (100, 3.0, 4000), (7, 1.5, 100), (1, 4.0, 2)]:
        rungs = create_scheduler(
            "asha", {"grace_steps": grace, "reduction_factor": rf}, steps
        ).rung_steps()
        assert rungs[0] == grace and rungs == sorted(set(rungs)) and rungs[-1] < steps
        assert rungs[-1] * rf >= steps - 1  # no rung is left out below the budget
        for a, b in zip(rungs, rungs[1:], strict=False):
            assert abs(b / a - rf) < 1 / a + 1e-9


def test_median_rungs_and_default_grace() -> None:
    median = create_scheduler("median", {"every_steps": 30}, 200)
    assert median.grace == 25  # 1/8 of the budget
    assert median.rung_steps() == [25, 55, 85, 115, 145, 175]
    assert create_scheduler("median", {}, 400).rung_steps() == [50, 150, 250, 350]


@pytest.mark.parametrize(
    ("scheduler", "words"),
    [
        ({"name": "hyperband"}, "scheduler.name: unknown scheduler 'hyperband'"),
        ({"name": "asha", "options": {"grace_steps": 500}}, "is not below budget.steps (500)"),
        (
            {"name": "asha", "options": {"reduction_factor": 1}},
            "scheduler.options.reduction_factor",
        ),
        ({"name": "median", "options": {"eval_rows": 10}}, "scheduler.options.eval_rows"),
        ({"name": "asha", "options": {"grace": 5}}, "scheduler.options.grace"),
    ],
)
def test_bad_scheduler_settings_are_named(scheduler: dict, words: str) -> None:
    data = {"name": "t", "space": {"name": "ctr_stack"}, "budget": {"steps": 500}}
    with pytest.raises(ConfigError) as err:
        validate_config({**data, "scheduler": scheduler}, "s.yaml")
    assert words in str(err.value)


def test_a_bad_scheduler_exits_2_before_anything_starts(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: t\nspace: {name: ctr_stack}\nscheduler: {name: ashaa}\n")
    result = nas(tmp_path / "runs", "submit", str(bad))
    assert result.returncode == 2, result.stderr
    said = " ".join(result.stderr.split())
    assert "scheduler.name: unknown scheduler 'ashaa'. Did you mean 'asha'?" in said
    assert "Valid schedulers: asha, median" in said and "Traceback" not in said
    assert not (tmp_path / "runs").exists()


# --- the trial -----------------------------------------------------------------------------


def test_measuring_at_the_rungs_does_not_change_what_is_learned(ml100k) -> None:
    data = TrialData.from_prepared(ml100k, "valid")
    spec = ArchSpec.load(REPO / "examples" / "specs" / "dcnv2.json")
    config = TrainConfig(steps=60, batch_size=256, seed=3)
    plain = evaluate(spec, data, config)
    heard = []
    probed = evaluate(spec, data, config, rungs=Rungs((10, 35), 3000, heard.append))
    assert probed.ne == plain.ne and probed.train_loss == plain.train_loss
    assert [r.steps for r in heard] == [10, 35]
    assert [f["step"] for f in probed.rungs] == [10, 35, 60]  # the end is the last rung
    assert heard[1].rungs == probed.rungs[:2] and heard[0].flops == plain.flops
    assert heard[0].ne == probed.rungs[0]["ne"] != plain.ne  # the rung rows, not the split
    assert "3000 rows" in heard[0].split and plain.rungs == []
    assert all(f["ne"] > 0 for f in probed.rungs)


# --- Ray Tune's scheduler ------------------------------------------------------------------


class _Stops:
    """Stands in for the controller: hears which trials the scheduler stopped, and says which
    are baselines (the reports below carry their losses, as a replayed report does)."""

    def __init__(self, baselines=()):
        self.ids: list[str] = []
        self.baselines = set(baselines)

    def stopped_early(self, tune_id: str) -> None:
        self.ids.append(tune_id)

    def yardstick(self, tune_id: str) -> bool:
        return tune_id in self.baselines


def _report(step: int, ne: float, flops: float = 1000.0, **extra) -> dict:
    return {"step": step, "rung_ne": ne, "rung_losses": [ne, flops], **extra}


def _rung(scheduler, trial_id: str, report: dict) -> str:
    trial = _tune_trial(trial_id)
    scheduler.on_trial_add(None, trial)
    return scheduler.on_trial_result(None, trial, report)


def _tune_trial(trial_id: str):
    from ray.tune.experiment import Trial

    return Trial("run_candidate", trial_id=trial_id, stub=True)


def test_a_resumed_scheduler_remembers_what_earlier_sessions_measured() -> None:
    scheduler = create_scheduler("asha", {"grace_steps": 10, "reduction_factor": 2}, 80)
    fresh, resumed = tune_scheduler(scheduler, _Stops()), tune_scheduler(scheduler, _Stops())
    for k, ne in enumerate([0.80, 0.81, 0.82]):
        resumed.remember(f"trial{k}", [_report(10, ne), _report(20, ne - 0.01), _report(80, 0.7)])
    for scheduler_ in (fresh, resumed):
        decision = _rung(scheduler_, "late", _report(10, 0.9))
        assert decision == ("STOP" if scheduler_ is resumed else "CONTINUE")
    assert resumed.controller.ids == ["late"] and fresh.controller.ids == []
    # A final report is never a stop at a rung, whatever the scheduler answers.
    _rung(resumed, "done", _report(80, 0.9, outcome="completed"))
    assert resumed.controller.ids == ["late"]


@pytest.mark.parametrize("rank", ["pareto", "ne"])
def test_asha_keeps_a_cheap_candidate_by_pareto_rank_but_not_by_ne(rank: str) -> None:
    options = {"grace_steps": 10, "reduction_factor": 3, "rank": rank}
    asha = tune_scheduler(create_scheduler("asha", options, 90), _Stops())
    for k, (ne, flops) in enumerate([(0.80, 9000.0), (0.81, 8000.0), (0.82, 7000.0)]):
        assert _rung(asha, f"t{k}", _report(10, ne, flops)) == ("CONTINUE" if k == 0 else "STOP")
    # Worst NE of the four, but the cheapest: an end of the front.
    cheap = _rung(asha, "cheap", _report(10, 0.83, 100.0))
    assert cheap == ("CONTINUE" if rank == "pareto" else "STOP")
    # Dominated by the first: stopped whichever way the rung is ranked.
    assert _rung(asha, "dominated", _report(10, 0.815, 9500.0)) == "STOP"
    assert asha.controller.ids == ["t1", "t2", *(["cheap"] if rank == "ne" else []), "dominated"]


def test_asha_files_a_baselines_rungs_but_never_stops_it() -> None:
    options = {"grace_steps": 10, "reduction_factor": 2, "rank": "ne"}
    asha = tune_scheduler(create_scheduler("asha", options, 80), _Stops(baselines={"base"}))
    assert _rung(asha, "first", _report(10, 0.80)) == "CONTINUE"
    # Worse than the candidate before it: a candidate would stop; the baseline trains on.
    assert _rung(asha, "base", _report(10, 0.85)) == "CONTINUE"
    base = _tune_trial("base")
    asha.on_trial_result(None, base, _report(20, 0.70))
    assert asha.controller.ids == []
    # Its figures are on the rungs: a candidate worse than the baseline at 20 steps stops.
    assert _rung(asha, "late", _report(20, 0.75)) == "STOP"
    assert asha.controller.ids == ["late"]


@pytest.mark.parametrize("name", ["asha", "median"])
def test_a_failed_trials_final_report_is_not_ranked(name: str) -> None:
    """A trial that failed before any rung (over its memory, say) reports its reason alone."""
    scheduler = tune_scheduler(create_scheduler(name, {"grace_steps": 10}, 80), _Stops())
    failed = {"payload": "used 0.41 GiB at step 1, over the limit", "outcome": "failed"}
    assert _rung(scheduler, "failed", failed) == "CONTINUE"
    assert _rung(scheduler, "next", _report(10, 0.80)) == "CONTINUE"
    assert scheduler.controller.ids == []


def test_a_bad_rank_is_named() -> None:
    with pytest.raises(ConfigError) as err:
        create_scheduler("asha", {"rank": "auc"}, 80)
    assert "scheduler.options.rank" in str(err.value) and "pareto" in str(err.value)


# --- searches ------------------------------------------------------------------------------


def _check_recorded(runs: Path, search_id: str, budget_steps: int = 160) -> list:
    registry = registry_of(runs)
    search = registry.get_search(search_id)
    trials = registry.trials(search.id)
    stopped = [t for t in trials if t.status == "stopped"]
    assert stopped, "ASHA stopped nobody"
    front = json.loads(nas(runs, "pareto", search.id, "--json").stdout)["front"]
    assert not {r["arch_id"] for r in front} & {t.arch_id for t in stopped}
    for t in trials:
        rungs = t.metrics["rungs"]
        if t.status == "stopped":
            assert t.kind == "searched" and t.metrics["steps"] < budget_steps
            assert rungs[-1]["step"] == t.metrics["steps"] and t.values[0] == rungs[-1]["ne"]
            assert t.error.startswith("stopped by asha at step")
        else:
            assert t.status == "completed", (t.number, t.status, t.error)
            assert [f["step"] for f in rungs] == [20, 40, 80, 160]
    assert all(t.status == "completed" for t in trials if t.is_baseline)
    return trials


@pytest.mark.slow
def test_an_asha_search_stops_candidates_and_keeps_them_off_the_front(tmp_path: Path) -> None:
    runs = runs_with_store(tmp_path)
    done = nas(runs, "submit", str(write(tmp_path)))
    assert done.returncode == 0, done.stderr
    (search,) = registry_of(runs).list_searches()
    assert registry_of(runs).get_search(search.id).status == "completed"
    trials = _check_recorded(runs, search.id)
    # The strategy was told: evolution's population holds what it heard, stopped included.
    state = registry_of(runs).get_search(search.id).strategy_state
    heard = {ArchSpec.from_dict(s).arch_id for s, _ in state["population"]}
    assert heard & {t.arch_id for t in trials if t.status == "stopped"}
    # MLflow: a stopped trial's run is KILLED, with its NE at each rung as a history.
    client = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}")
    by_trial = {int(r.data.tags["trial"]): r for r in mlflow_children(runs, search)}
    for t in trials:
        run = by_trial[t.number]
        assert run.info.status == ("KILLED" if t.status == "stopped" else "FINISHED")
        history = client.get_metric_history(run.info.run_id, "rung_ne")
        assert [m.step for m in sorted(history, key=lambda m: m.step)] == [
            f["step"] for f in t.metrics["rungs"]
        ]
    parent = registry_of(runs).get_search(search.id).mlflow_run_id
    assert "pareto.html" in {a.path for a in client.list_artifacts(parent)}
    status = nas(runs, "status", search.id)
    assert "stopped early" in status.stdout and "rungs at steps 20, 40, 80" in status.stdout


@pytest.mark.slow
def test_the_median_rule_runs_a_search_to_its_end_and_optuna_hears_its_stops_as_pruned(
    tmp_path: Path,
) -> None:
    runs = runs_with_store(tmp_path)
    path = write(
        tmp_path,
        strategy="optuna",
        scheduler="median",
        candidates=8,
        objectives="[ne]",
        baselines="false",
        seed=1,
        extra=", every_steps: 40, min_samples: 2",
    )
    done = nas(runs, "submit", str(path))
    assert done.returncode == 0, done.stderr
    (search,) = registry_of(runs).list_searches()
    assert registry_of(runs).get_search(search.id).status == "completed"
    trials = registry_of(runs).trials(search.id)
    assert {t.status for t in trials} == {"completed", "stopped"}
    for t in trials:  # the median rule's rungs: the grace, then every 40 steps, and the end
        steps = [f["step"] for f in t.metrics["rungs"]]
        assert steps == ([20, 60, 100, 140, 160] if t.status == "completed" else steps)
        assert set(steps) <= {20, 60, 100, 140, 160}
    # Optuna keeps a stopped candidate as pruned, with the rungs it reached.
    stopped = [t for t in trials if t.status == "stopped"]
    study = optuna.load_study(
        study_name=f"recnas-{search.id}", storage=f"sqlite:///{runs / 'registry.db'}"
    )
    pruned = study.get_trials(states=(optuna.trial.TrialState.PRUNED,))
    assert len(pruned) == len(stopped)
    for frozen in pruned:
        assert frozen.intermediate_values  # the rungs it reached, as Optuna keeps them
        assert max(frozen.intermediate_values) in {t.metrics["steps"] for t in stopped}
    complete = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert len(complete) == sum(t.status == "completed" for t in trials)


@pytest.mark.slow
def test_sigkill_then_resume_finishes_the_budget_once_each_and_asha_remembers(
    tmp_path: Path, ml100k
) -> None:
    """kill -9 of the controller mid-search (Ray must fate-share), then ``nas resume``: the
    budget is met with each candidate trained and logged once, what the first session
    finished stays as it was, and the architectures are those an unbroken search asks."""
    runs = runs_with_store(tmp_path)
    path = write(tmp_path, strategy="random", candidates=12, seed=2)
    process = start_submit(runs, path, start_new_session=True)
    try:
        wait_for(runs, lambda trials: sum(t.status == "stopped" for t in trials) >= 2)
    finally:
        os.kill(process.pid, signal.SIGKILL)  # the controller only
        process.communicate()
    registry = registry_of(runs)
    (search,) = registry.list_searches()
    before = {t.number: t.status for t in registry.trials(search.id)}
    assert nas(runs, "list", "--json").stdout.count('"crashed"') == 1
    done = nas(runs, "resume", search.id)
    assert done.returncode == 0, done.stderr
    search = registry.get_search(search.id)
    assert search.status == "completed" and search.sessions == 2
    trials = _check_recorded(runs, search.id)
    assert sum(not t.is_baseline for t in trials) == 12
    assert len({t.arch_id for t in trials}) == len(trials)
    for t in trials:  # what the first session finished stays as it was
        if before.get(t.number) in ("completed", "stopped"):
            assert t.status == before[t.number] and t.attempts == 1
    children = mlflow_children(runs, search)
    assert sorted(int(r.data.tags["trial"]) for r in children) == list(range(len(trials)))
    # Random search asks regardless of the results: its strategy, made as the search makes
    # it, asks for the same architectures (the search skips those that are its baselines).
    config = validate_config(search.config)
    space = create_space(config.space.name, config.space.options, SpaceInputs.of(ml100k.schema))
    checked = Plan(config, ml100k, space, [], "", None, None)
    strategy = checked.strategy(f"sqlite:///{tmp_path / 'unbroken.db'}", "unbroken")
    baselines = {t.arch_id for t in trials if t.is_baseline}
    asked: list[str] = []
    while len(asked) < 12:
        arch_id = strategy.ask().arch_id
        if arch_id not in baselines:
            asked.append(arch_id)
    assert set(asked) == {t.arch_id for t in trials if t.kind == "searched"}
