"""budget.select_best: a trial checks itself on validation rows as it trains, keeps the
weights of its best check (and may stop on its patience); searches record and log it.

Real trainings on MovieLens-100k; the search is `nas submit` on a local Ray."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from mlflow import MlflowClient

from nas.arch.model import build_model
from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError, TrainingError
from nas.service.config import validate_config
from tests.conftest import runs_with_store
from tests.test_search import mlflow_children, nas, registry_of
from workers.train import TrainConfig, train
from workers.train import evaluate as evaluate_model
from workers.trial import Rungs, SelectBest, evaluate
from workers.trial_data import TrialData

REPO = Path(__file__).resolve().parent.parent
DCNV2 = ArchSpec.load(REPO / "examples" / "specs" / "dcnv2.json")
# A learning rate high enough that validation NE is best well before the last step.
NOISY = TrainConfig(steps=120, batch_size=256, lr=3e-2, embedding_lr=0.3, warmup_steps=5, seed=1)


def trained_until(data: TrialData, config: TrainConfig, stop_at: int) -> float:
    """NE on the held-out split of DCNv2 trained as ``evaluate`` does, ended at ``stop_at``."""
    torch.manual_seed(config.seed)
    model = build_model(DCNV2, data.schema)
    rows = data.features("train", model.reads_history)
    train(model, rows, config, lambda step, _: step == stop_at)
    held_out = data.features(data.split, model.reads_history)
    return evaluate_model(model, held_out, data.train_rates, config.eval_batch_size)["ne"]


def test_the_kept_weights_are_those_of_the_best_check(ml100k) -> None:
    data = TrialData.from_prepared(ml100k, "valid")
    result = evaluate(DCNV2, data, NOISY, select=SelectBest(every_steps=15, rows=5000))
    assert [c["step"] for c in result.checks] == list(range(15, 121, 15))
    best = min(result.checks, key=lambda c: c["ne"])
    assert result.best_step == best["step"] < NOISY.steps  # the config makes it overfit
    assert result.steps == NOISY.steps  # no patience: the whole budget
    # The same training ended at the best check scores exactly what the trial reports.
    assert result.ne == trained_until(data, NOISY, result.best_step)
    assert result.ne != trained_until(data, NOISY, NOISY.steps)


def test_patience_ends_training_after_that_many_checks_without_a_new_best(ml100k) -> None:
    data = TrialData.from_prepared(ml100k, "valid")
    select = SelectBest(every_steps=10, rows=5000, patience=2)
    result = evaluate(DCNV2, data, NOISY, select=select)
    steps = [c["step"] for c in result.checks]
    assert result.steps == steps[-1] < NOISY.steps
    after = [c for c in result.checks if c["step"] > result.best_step]
    assert len(after) == 2 and all(c["ne"] >= min(x["ne"] for x in result.checks) for c in after)
    assert result.ne == trained_until(data, NOISY, result.best_step)


def test_rungs_report_the_best_check_so_far_when_selecting(ml100k) -> None:
    data = TrialData.from_prepared(ml100k, "valid")
    heard = []
    rungs = Rungs((30, 90), 5000, heard.append)
    result = evaluate(DCNV2, data, NOISY, rungs=rungs, select=SelectBest(every_steps=20, rows=5000))
    checks = {c["step"]: c["ne"] for c in result.checks}
    assert sorted(checks) == [20, 30, 40, 60, 80, 90, 100, 120]  # rungs are checks too
    for report in heard:
        so_far = {s: ne for s, ne in checks.items() if s <= report.steps}
        assert report.ne == min(so_far.values())
        assert report.best_step == min(so_far, key=so_far.get)
    assert [f["step"] for f in result.rungs] == [30, 90, 120]
    assert result.rungs[-1]["ne"] == min(checks.values())  # the end: the kept weights


def test_a_retrain_selects_on_validation_rows_never_on_the_test_split(ml100k) -> None:
    on_test = TrialData.from_prepared(ml100k, "test")
    assert "valid" in on_test.arrays
    select = SelectBest(every_steps=40, rows=5000)
    result = evaluate(DCNV2, on_test, TrainConfig(steps=80, batch_size=256), select=select)
    assert result.split == "test" and len(result.checks) == 2
    both = TrialData.from_prepared(ml100k, "test", ("train", "valid"))
    with pytest.raises(TrainingError, match="no validation rows"):
        evaluate(DCNV2, both, TrainConfig(steps=80, batch_size=256), select=select)


@pytest.mark.parametrize(
    ("budget", "scheduler", "words"),
    [
        (
            {"steps": 500, "select_best": {"every_steps": 500}},
            None,
            "budget.select_best.every_steps: 500 is not below budget.steps (500)",
        ),
        (
            {"steps": 500, "select_best": {"patience": 0}},
            None,
            "budget.select_best.patience",
        ),
        (
            {"steps": 500, "select_best": {"every": 5}},
            None,
            "budget.select_best.every",
        ),
        (
            {"steps": 500, "select_best": {"eval_rows": 2000}},
            {"name": "asha", "options": {"eval_rows": 3000}},
            "differs from scheduler.options.eval_rows (3000)",
        ),
    ],
)
def test_bad_select_best_settings_are_named(budget, scheduler, words) -> None:
    data = {"name": "t", "space": {"name": "ctr_stack"}, "budget": budget}
    if scheduler:
        data["scheduler"] = scheduler
    with pytest.raises(ConfigError) as err:
        validate_config(data, "s.yaml")
    assert words in str(err.value)


def test_the_rows_checked_on_are_the_schedulers_when_it_has_them() -> None:
    data = {"name": "t", "space": {"name": "ctr_stack"}, "budget": {"steps": 400}}
    data["budget"]["select_best"] = {"every_steps": 50, "patience": 3}
    want = {"every_steps": 50, "patience": 3, "rows": 50_000, "metric": "ne"}
    assert validate_config(data).selection() == want
    data["scheduler"] = {"name": "asha", "options": {"eval_rows": 7000}}
    assert validate_config(data).selection()["rows"] == 7000
    data["objectives"] = ["flops", "auc:like", "ne:click", "ne"]  # the first NE objective
    assert validate_config(data).selection()["metric"] == "ne:click"


SEARCH = """\
name: selecting
dataset: movielens-100k
space: {name: ctr_stack, options: {max_depth: 2, embedding_dims: [8, 16]}}
objectives: [ne, flops]
budget: {candidates: 4, steps: 120, select_best: {every_steps: 30, patience: 2}}
train: {batch_size: 256}
scheduler: {name: asha, options: {grace_steps: 40, eval_rows: 4000, reduction_factor: 2}}
resources: {concurrency: 1, cpus_per_trial: 1}
include_baselines: true
"""


@pytest.mark.slow
def test_a_search_keeps_each_candidates_best_weights_and_logs_its_checks(tmp_path: Path) -> None:
    runs = runs_with_store(tmp_path)
    (tmp_path / "s.yaml").write_text(SEARCH)
    done = nas(runs, "submit", str(tmp_path / "s.yaml"))
    assert done.returncode == 0, done.stderr
    (search,) = registry_of(runs).list_searches()
    trials = registry_of(runs).trials(search.id)
    finished = [t for t in trials if t.status in ("completed", "stopped")]
    assert len(finished) == len(trials) == 8
    client = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}")
    by_trial = {int(r.data.tags["trial"]): r for r in mlflow_children(runs, search)}
    for t in finished:
        checks = t.metrics["checks"]
        assert checks and t.metrics["best_step"] == min(checks, key=lambda c: c["ne"])["step"]
        assert t.metrics["steps"] == checks[-1]["step"] <= 120
        history = client.get_metric_history(by_trial[t.number].info.run_id, "val_ne")
        assert sorted((m.step, m.value) for m in history) == [(c["step"], c["ne"]) for c in checks]
        assert by_trial[t.number].data.metrics["best_step"] == t.metrics["best_step"]
    status = nas(runs, "status", search.id)
    assert "each candidate's best, checked every 30 steps on 4,000 validation rows" in " ".join(
        status.stdout.split()
    )
