"""`nas retrain`: a finished search's picks and baselines, trained again over seeds through
Ray Tune and measured on the test split; bad picks refused; a killed retrain resumes.

Real parts throughout: `nas submit` and `nas retrain` in subprocesses, a local Ray, the
sqlite registry and MLflow store, MovieLens-100k."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from tests.test_search import REPO, env_for, nas, registry_of, write_search

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> tuple[Path, str]:
    """A finished tiny search (4 candidates + 4 baselines, 60 steps): its runs folder, id."""
    folder = tmp_path_factory.mktemp("searched")
    runs = folder / "runs"
    done = nas(runs, "submit", str(write_search(folder, candidates=4, steps=60)))
    assert done.returncode == 0, done.stderr
    (search,) = registry_of(runs).list_searches()
    return runs, search.id


def test_a_retrain_trains_every_pick_and_baseline_on_every_seed(searched) -> None:
    runs, search_id = searched
    registry = registry_of(runs)
    trials = registry.trials(search_id)
    searched_trial = next(t for t in trials if t.kind == "searched" and t.status == "completed")
    done = nas(
        runs, "retrain", search_id, "--pick", "knee", "--pick", str(searched_trial.number),
        "--steps", "40", "--seeds", "2", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "completed" and report["retrain_of"] == search_id
    assert report["split"] == "test" and report["steps"] == 40 and report["seeds"] == 2
    rows = report["rows"]
    labels = [r["label"] for r in rows]
    baselines = {t.label for t in trials if t.is_baseline}
    assert baselines <= set(labels) and len(labels) == len(set(labels))
    assert any("knee" in r["picked_as"] for r in rows)
    assert any(f"trial {searched_trial.number}" in r["picked_as"] for r in rows)
    assert [r["ne_mean"] for r in rows] == sorted(r["ne_mean"] for r in rows)
    best = report["best_baseline"]
    assert best == min((r for r in rows if r["baseline"]), key=lambda r: r["ne_mean"])["label"]
    for r in rows:
        assert r["seeds"] == [0, 1] and r["ne_std"] >= 0 and r["flops"] > 0
        assert (r["ne_minus_best_baseline"] is None) == (r["label"] == best)
    status = json.loads(nas(runs, "status", report["id"], "--json").stdout)
    assert status["status"] == "completed" and status["rows"] == rows
    # The registry: a retrain of its own, one trial of kind retrain per (architecture, seed).
    retrain = registry.get_search(report["id"])
    assert retrain.config["retrain"]["of"] == search_id and retrain.status == "completed"
    pairs = registry.trials(retrain.id)
    assert len(pairs) == 2 * len(rows) and {t.kind for t in pairs} == {"retrain"}
    assert {t.metrics["split"] for t in pairs} == {"test"}
    assert {(t.job["pick"], t.job["seed"]) for t in pairs} == {
        (i, s) for i in range(len(rows)) for s in range(2)
    }
    by_label = {r["label"]: r for r in rows}
    for t in pairs:  # the report's means are the trials' own figures
        label = t.label.rsplit(" s", 1)[0]
        same = [p.metrics["ne"] for p in pairs if p.label.rsplit(" s", 1)[0] == label]
        assert by_label[label]["ne_mean"] == pytest.approx(sum(same) / len(same))
    # MLflow: the retrain's run, tagged with the search it retrains, one child per pair.
    client = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}")
    parent = client.get_run(retrain.mlflow_run_id)
    assert parent.data.tags["retrain_of"] == search_id
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"retrain.json", "retrain.html"} <= artifacts
    assert parent.info.status == "FINISHED"
    children = client.search_runs(
        [retrain.mlflow_experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'"
    )
    assert len(children) == len(pairs)
    assert {c.data.tags["kind"] for c in children} == {"retrain"}
    # The original search is untouched.
    after = registry.trials(search_id)
    assert [(t.id, t.status, t.values) for t in after] == [
        (t.id, t.status, t.values) for t in trials
    ]


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--pick", "999"], "--pick: 999 is not a completed trial; use knee, best, front"),
        (["--pick", "zzzz"], "'zzzz' matches no completed candidate"),
        (["--seeds", "0"], "--seeds: must be between 1 and 100"),
        (["--train-on", "test"], "--train-on: must be one of train, train+valid"),
        (["--steps", "-3"], "--steps: must be a positive integer"),
        (["--steps", "10", "--epochs", "2"], "not allowed with argument"),
    ],
)
def test_bad_retrain_flags_exit_2_and_create_nothing(searched, flags, words) -> None:
    runs, search_id = searched
    before = len(registry_of(runs).list_searches())
    done = nas(runs, "retrain", search_id, *flags)
    assert done.returncode == 2, done.stderr
    assert words in " ".join(done.stderr.split()) and "Traceback" not in done.stderr
    assert len(registry_of(runs).list_searches()) == before


def test_a_killed_retrain_resumes_and_trains_each_pair_once(searched) -> None:
    runs, search_id = searched
    process = subprocess.Popen(
        [sys.executable, "-m", "nas.cli", "retrain", search_id, "--pick", "0", "--pick", "1",
         "--no-baselines", "--steps", "100", "--seeds", "3"],
        env=env_for(runs), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    registry = registry_of(runs)
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            time.sleep(0.5)
            retrains = [s for s in registry.list_searches() if s.config.get("retrain")]
            fresh = [s for s in retrains if s.config["budget"]["steps"] == 100]
            if fresh and sum(t.status == "completed" for t in registry.trials(fresh[0].id)) >= 2:
                break
        else:
            pytest.fail("the retrain did not get going")
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.communicate()
    retrain = fresh[0]
    done = nas(runs, "resume", retrain.id, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "completed"
    pairs = registry.trials(retrain.id)
    assert all(t.status == "completed" for t in pairs)
    assert len(pairs) == len({t.arch_id for t in pairs}) == 3 * len(report["rows"]) == 6
    assert registry.get_search(retrain.id).sessions == 2
