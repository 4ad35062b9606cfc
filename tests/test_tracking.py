"""MLflow logging against a real sqlite tracking store: flat params, idempotent child runs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from nas.arch.spec import ArchSpec
from nas.service.tracking import Tracker, TrackingError, flatten_config, flatten_spec

SPECS = Path(__file__).parent.parent / "examples" / "specs"


def test_flatten_spec_names_each_layer_parameter() -> None:
    flat = flatten_spec(ArchSpec.load(SPECS / "dcnv2.json").to_dict())
    assert flat["layer0.block"] == "dcnv2"
    assert flat["layer0.rank"] == "64"
    assert flat["top_mlp"] == "256-128"
    assert flat["depth"] == "1"


def test_flatten_config_nests_with_dots() -> None:
    flat = flatten_config({"budget": {"candidates": 3}, "space": {"name": "x", "options": {}}})
    assert flat == {"budget.candidates": "3", "space.name": "x", "space.options": "{}"}


@pytest.fixture
def tracker(tmp_path: Path) -> Tracker:
    return Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "artifacts")


def test_a_trial_is_logged_once_even_when_logged_twice(tracker: Tracker) -> None:
    experiment = tracker.experiment("exp")
    assert tracker.experiment("exp") == experiment
    parent = tracker.start_search(experiment, "exp-1", {"strategy": {"name": "random"}})
    spec = ArchSpec.load(SPECS / "dlrm.json")
    trial = SimpleNamespace(
        number=0,
        arch_id=spec.arch_id,
        label="dlrm",
        kind="baseline",
        spec=spec.to_dict(),
        status="completed",
        metrics={"ne": 0.8, "flops": 1e5, "name": "dlrm"},
        error=None,
        timings=None,
    )
    first = tracker.log_trial(experiment, parent, "exp-1", "random", trial)
    again = tracker.log_trial(experiment, parent, "exp-1", "random", trial)  # after a crash
    assert first == again
    runs = tracker.client.search_runs([experiment], filter_string="tags.search_id = 'exp-1'")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent]
    assert len(children) == 1
    child = children[0]
    assert child.data.tags["baseline"] == "true" and child.data.tags["arch_id"] == spec.arch_id
    assert child.data.metrics == {"ne": 0.8, "flops": 1e5}
    assert child.data.params["layer0.block"] == "dot"
    assert [a.path for a in tracker.client.list_artifacts(child.info.run_id)] == ["spec.json"]


def test_a_failed_trial_carries_its_reason(tracker: Tracker) -> None:
    experiment = tracker.experiment("exp")
    parent = tracker.start_search(experiment, "exp-2", {"strategy": {"name": "random"}})
    spec = ArchSpec.load(SPECS / "dlrm.json")
    trial = SimpleNamespace(
        number=3,
        arch_id=spec.arch_id,
        label=None,
        kind="searched",
        spec=spec.to_dict(),
        status="failed",
        metrics=None,
        error="training diverged: loss is nan at step 7",
        timings=None,
    )
    run = tracker.client.get_run(tracker.log_trial(experiment, parent, "exp-2", "random", trial))
    assert run.info.status == "FAILED"
    assert run.data.tags["error"].startswith("training diverged")
    assert run.data.tags["strategy"] == "random"


def test_a_search_has_one_parent_run_across_sessions(tracker: Tracker) -> None:
    experiment = tracker.experiment("exp")
    config = {"strategy": {"name": "random"}, "budget": {"candidates": 3}}
    first = tracker.start_search(experiment, "exp-3", config)
    assert tracker.start_search(experiment, "exp-3", config) == first  # a crash, a resume
    assert tracker.start_search(experiment, "exp-4", config) != first


def test_experiments_are_marked_as_model_training(tracker: Tracker) -> None:
    """MLflow's UI opens an experiment on its runs, not the GenAI view, by this tag; an
    experiment made before the tag existed gets it on the next search."""
    made = tracker.experiment("fresh")
    older = tracker.client.create_experiment("older")
    assert tracker.experiment("older") == older
    for experiment_id in (made, older):
        tags = tracker.client.get_experiment(experiment_id).tags
        assert tags["mlflow.experimentKind"] == "custom_model_development"


def test_an_artifacts_folder_that_cannot_be_written_is_named_in_one_line(tmp_path: Path) -> None:
    """A full disk, or a file where the artifacts' folder should be: the OSError MLflow's
    local artifact store raises is a ``TrackingError``, not a traceback."""
    blocked = tmp_path / "artifacts"
    blocked.write_text("a file, not a folder\n")
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", blocked)
    experiment = tracker.experiment("exp")
    with pytest.raises(TrackingError, match="could not log config.json: .*Errno") as raised:
        tracker.start_search(experiment, "exp-1", {"strategy": {"name": "random"}})
    assert "\n" not in str(raised.value)


@pytest.mark.slow
def test_a_search_whose_mlflow_server_stops_ends_failed_and_its_resume_logs_every_trial(
    tmp_path: Path,
) -> None:
    """MLflow going away mid-search used to be swallowed by Tune (its callbacks' errors are
    only logged): the search went on with trials missing from MLflow, ended `completed`
    with its MLflow run still open, and could not be resumed. Now it stops, failed and
    resumable, and its resume logs the missing trials and ends the run."""
    from mlflow import MlflowClient

    from tests.conftest import runs_with_store
    from tests.mlflow_server import mlflow_server
    from tests.test_reliability import _free_port
    from tests.test_search import nas, registry_of, start_submit, wait_for, write_search

    runs, artifacts = tmp_path / "runs", tmp_path / "artifacts"
    # the server's store: an empty one made once (MLflow's migrations cost seconds a start)
    backend = f"sqlite:///{runs_with_store(tmp_path / 'server') / 'mlflow.db'}"
    port = _free_port()
    path = write_search(tmp_path, candidates=3, steps=200, baselines="false")
    with mlflow_server(backend, artifacts, port) as uri:
        submit = start_submit(runs, path, "--tracking-uri", uri)
        try:
            wait_for(runs, lambda trials: any(t.status == "completed" for t in trials))
        except BaseException:
            submit.kill()
            raise
    _, err = submit.communicate(timeout=600)
    (search,) = registry_of(runs).list_searches()
    assert submit.returncode == 2 and "Traceback" not in err, err
    assert f"MLflow at {uri}" in err and f"resumable: nas resume {search.id}" in err, err
    assert search.status == "failed" and "MLflow" in search.message
    with mlflow_server(backend, artifacts, port):
        done = nas(runs, "resume", search.id)
        assert done.returncode == 0, done.stderr
        trials = registry_of(runs).trials(search.id)
        assert [t.status for t in trials] == ["completed"] * 3
        client = MlflowClient(uri)
        found = client.search_runs([registry_of(runs).get_search(search.id).mlflow_experiment_id])
    children = [r for r in found if "mlflow.parentRunId" in r.data.tags]
    assert sorted(int(r.data.tags["trial"]) for r in children) == [t.number for t in trials]
    (parent,) = [r for r in found if "mlflow.parentRunId" not in r.data.tags]
    assert parent.info.status == "FINISHED"
