"""Searches as a user runs them: `nas submit` in a real subprocess, on a real local Ray, with
a real sqlite registry and MLflow store, training real models on MovieLens-100k.

The slow tests run whole searches (each under a minute); the bad-input tests are fast,
because nothing may start: no Ray, no registry, no MLflow store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from nas.cli.render import format_value
from nas.service.config import validate_config
from nas.service.registry import Registry
from nas.service.summary import summarize
from tests import nas_process
from tests.conftest import runs_with_store

REPO = Path(__file__).resolve().parent.parent

TINY = """\
name: tiny
dataset: movielens-100k
space: {{name: ctr_stack, options: {{max_depth: 2, embedding_dims: [8, 16]}}}}
strategy: {{name: {strategy}}}
budget: {{candidates: {candidates}, steps: {steps}}}
train: {{batch_size: 256}}
resources: {{concurrency: {concurrency}, cpus_per_trial: 1, memory_gb_per_trial: {memory}}}
{baselines}
seed: {seed}
"""
# Two fast hand-designed baselines: what a test of a search needs of them, at a third of the
# four defaults' training (AutoInt alone costs as much as the other three).
TWO_BASELINES = [REPO / "examples" / "specs" / name for name in ("dlrm.json", "deepfm.json")]


def baselines_yaml(baselines: str) -> str:
    """``true``: the default four; ``false``: none; ``two``: ``TWO_BASELINES``."""
    if baselines == "two":
        return f"include_baselines: true\nbaselines: [{', '.join(map(str, TWO_BASELINES))}]"
    return f"include_baselines: {baselines}"


def write_search(
    folder: Path,
    strategy="random",
    candidates=4,
    steps=60,
    memory=4,
    baselines="two",
    seed=0,
    concurrency=1,
) -> Path:
    """A tiny search of MovieLens-100k. One trial at a time unless a test needs more: the
    suite runs several tests at once on two cores, and each worker a search keeps costs a
    process with torch in it."""
    path = folder / "search.yaml"
    path.write_text(
        TINY.format(
            strategy=strategy,
            candidates=candidates,
            steps=steps,
            memory=memory,
            concurrency=concurrency,
            baselines=baselines_yaml(baselines),
            seed=seed,
        )
    )
    return path


def env_for(runs: Path) -> dict[str, str]:
    return {**os.environ, "RECNAS_RUNS_DIR": str(runs), "COLUMNS": "120"}


def nas(runs: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """A `nas` command run to its end in a process of its own (``tests/nas_process.py``)."""
    return nas_process.run(list(args), env_for(runs), REPO, timeout)


@dataclasses.dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def nas_here(runs: Path, *args: str, **env: str) -> Ran:
    """A `nas` command run in this process (``nas.cli.main``, what the script runs), for bad
    input that must be refused before anything starts: a subprocess would spend seconds
    importing what this process has loaded already. ``env``: variables to set meanwhile."""
    from nas.cli import main

    saved = dict(os.environ)
    os.environ.update(RECNAS_RUNS_DIR=str(runs), **env)
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = main(list(args))
            except SystemExit as exit:  # argparse's own refusals
                code = exit.code if isinstance(exit.code, int) else 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return Ran(code, stdout.getvalue(), stderr.getvalue())


def registry_of(runs: Path) -> Registry:
    return Registry(f"sqlite:///{runs / 'registry.db'}")


def start_submit(
    runs: Path, path: Path, *flags: str, start_new_session: bool = False
) -> nas_process.NasProcess:
    """`nas submit` in the background, its output captured."""
    return start_nas(runs, "submit", str(path), *flags, start_new_session=start_new_session)


def start_nas(runs: Path, *args: str, start_new_session: bool = False) -> nas_process.NasProcess:
    """A `nas` command in the background, its output captured."""
    return nas_process.start(list(args), env_for(runs), REPO, start_new_session)


def wait_for(runs: Path, condition, timeout: float = 300):
    """Poll the registry until the first search's trials meet ``condition``; the search."""
    deadline = time.time() + timeout
    registry = None  # one for the whole wait: opening one costs 20 ms of CPU
    try:
        while time.time() < deadline:
            time.sleep(0.5)
            if registry is None and (runs / "registry.db").exists():
                registry = registry_of(runs)
            searches = registry.list_searches() if registry else []
            if searches and condition(registry.trials(searches[0].id)):
                return searches[0]
    finally:
        if registry is not None:
            registry.engine.dispose()
    pytest.fail(f"the search in {runs} did not get there in {timeout} s")


def mlflow_children(runs: Path, search) -> list:
    client = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}")
    found = client.search_runs(
        [search.mlflow_experiment_id], filter_string=f"tags.search_id = '{search.id}'"
    )
    return [r for r in found if "mlflow.parentRunId" in r.data.tags]


# --- bad input: a clear message, exit 2, nothing started ----------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("name: t\nspace: {name: ctr_stack\n", "not valid YAML, line"),
        (
            "name: t\nspace: {name: ctr_stack, options: {blocks: [mlp, hstu]}}\n",
            "space.options.blocks: 'hstu' is not an interaction block",
        ),
        (
            "name: t\nspace: {name: ctr_stack}\nstrategy: {name: bayes}\n",
            "strategy.name: unknown strategy 'bayes'",
        ),
        (
            "name: t\nspace: {name: ctr_stack}\nresources: {cpus_per_trial: 1000}\n",
            "resources.cpus_per_trial: 1000 CPUs per trial, but this machine has",
        ),
        (
            "name: t\nspace: {name: ctr_stack}\nbudget: {candidates: -5}\n",
            "budget.candidates: Input should be greater than or equal to 1",
        ),
    ],
)
def test_bad_config_exits_2_and_starts_nothing(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    runs = tmp_path / "runs"
    done = nas_here(runs, "submit", str(path))
    assert done.returncode == 2, done.stderr
    message = " ".join(done.stderr.split())
    assert words in message
    assert "Traceback" not in done.stderr
    assert str(path) in done.stderr.replace("\n", "").replace(" ", "")
    assert not runs.exists(), "a rejected search must not create a registry, MLflow store or Ray"


def test_a_bad_flag_is_named_by_the_flag(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    done = nas_here(runs, "submit", str(write_search(tmp_path)), "--budget", "-3")
    assert done.returncode == 2
    assert "--budget: Input should be greater than or equal to 1" in " ".join(done.stderr.split())
    assert not runs.exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["train", "spec.json", "--seed", str(2**64)], "--seed: expected an integer from 0 to"),
        (["data", "prepare", "synthetic-criteo", "--seed", "-1"], "--seed: expected an integer"),
        (["submit", "s.yaml", "--seed", str(2**32)], "--seed: expected an integer from 0 to"),
        (["data", "prepare", "synthetic-criteo", "--rows", "0"], "--rows: expected an integer >="),
        (["data", "prepare", "movielens-100k", "--cache-dir", "/proc/nope"], "cannot write in"),
        (["data", "list", "--cache-dir", "{file}"], "is not a folder"),
        (["train", "spec.json", "--cache-dir", "{file}/below"], "is a file)"),
    ],
)
def test_bad_numbers_and_folders_on_flags_exit_2_before_anything(
    tmp_path: Path, args: list[str], words: str
) -> None:
    file = tmp_path / "a-file"
    file.write_text("")
    runs = tmp_path / "runs"
    done = nas_here(runs, *[a.format(file=file) for a in args])
    assert done.returncode == 2 and words in " ".join(done.stderr.split()), done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing written


def test_unknown_search_ids_are_named_and_nothing_is_written(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for command in ("status", "pareto", "resume", "cancel", "retrain", "dashboard"):
        done = nas_here(runs, command, "nope")
        assert done.returncode == 2 and "no search 'nope'" in done.stderr, command
    done = nas_here(runs, "list")
    assert done.returncode == 0 and "nas submit" in done.stderr  # says how to start
    assert not runs.exists()  # a command that only reads makes no registry


# --- whole searches ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def submitted(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A search with the default four baselines, submitted to a fresh runs folder: the folder
    and the command's outcome. Its tests only read what it left."""
    folder = tmp_path_factory.mktemp("submitted")
    runs = folder / "runs"
    return runs, nas(runs, "submit", str(write_search(folder, baselines="true")), "--json")


@pytest.mark.slow
def test_submit_runs_a_search_and_every_view_agrees(submitted) -> None:
    runs, done = submitted
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    registry = registry_of(runs)
    (search,) = registry.list_searches()
    trials = registry.trials(search.id)
    assert search.status == printed["status"] == "completed"
    assert sum(not t.is_baseline for t in trials) == 4
    assert sorted(t.label for t in trials if t.is_baseline) == [
        "autoint",
        "dcnv2",
        "deepfm",
        "dlrm",
    ]
    assert all(t.status == "completed" for t in trials)
    assert len({t.arch_id for t in trials}) == len(trials)
    for t in trials:
        assert 0 < t.metrics["ne"] < 2 and t.metrics["flops"] > 0
        assert t.timings["started_at"] >= t.timings["suggested_at"]
    # MLflow: one child per trial, tagged, with the objectives; the parent holds the front.
    children = mlflow_children(runs, search)
    assert sorted(int(r.data.tags["trial"]) for r in children) == [t.number for t in trials]
    by_trial = {int(r.data.tags["trial"]): r for r in children}
    for t in trials:
        run = by_trial[t.number]
        assert run.data.tags["arch_id"] == t.arch_id
        assert run.data.tags["baseline"] == str(t.is_baseline).lower()
        assert run.data.metrics["ne"] == pytest.approx(t.metrics["ne"])
    client = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}")
    artifacts = {a.path for a in client.list_artifacts(search.mlflow_run_id)}
    assert {"pareto.json", "pareto.csv", "pareto.png", "config.json"} <= artifacts
    # The CLI's front is the registry's front.
    summary = summarize(validate_config(search.config), trials)
    pareto = json.loads(nas(runs, "pareto", search.id[:8], "--json").stdout)
    assert [r["trial"] for r in pareto["front"]] == [c.number for c in summary.front]
    assert printed["summary"]["front"] == pareto["front"]
    other = json.loads(
        nas(runs, "pareto", search.id, "--objectives", "auc,params", "--json").stdout
    )
    assert other["objectives"] == {"auc": "max", "params": "min"}
    table = nas_here(runs, "pareto", search.id, "--objectives", "auc,params", COLUMNS="200")
    lines = table.stdout.splitlines()
    header = [c.strip() for c in next(x for x in lines if "trial" in x).split("┃")[1:-1]]
    assert header[2:] == ["auc", "params", "flops"]  # the front's, then the other figures
    flops = {t.number: format_value("flops", t.metrics["flops"]) for t in trials if t.metrics}
    for row in (x.split("│")[1:-1] for x in lines if x.startswith("│")):
        assert row[-1].strip() == flops[int(row[0])]
    listed = json.loads(nas(runs, "list", "--json").stdout)
    assert listed[0]["id"] == search.id and listed[0]["candidates"] == "4/4"
    status = nas(runs, "status", search.id)
    assert status.returncode == 0 and "Pareto front" in status.stdout
    assert nas_here(runs, "resume", search.id).returncode == 2  # completed: nothing to resume


@pytest.mark.slow
def test_the_dashboard_shows_the_search_in_chromium(submitted) -> None:
    """Its landing view and its front's plot, in a real browser (``tests/browser.py``)."""
    from tests.browser import check_dashboard

    runs, done = submitted
    assert done.returncode == 0, done.stderr
    check_dashboard(runs, json.loads(done.stdout)["id"])


@pytest.mark.slow
def test_failing_trials_are_recorded_with_their_reason_and_the_search_goes_on(
    tmp_path: Path,
) -> None:
    runs = runs_with_store(tmp_path)
    path = write_search(tmp_path, candidates=3, memory=0.25, baselines="false")
    done = nas(runs, "submit", str(path))
    assert done.returncode == 0, done.stderr
    (search,) = registry_of(runs).list_searches()
    trials = registry_of(runs).trials(search.id)
    assert search.status == "completed" and len(trials) == 3
    for t in trials:
        assert t.status == "failed"
        assert "over the limit of 0.25 GiB per trial" in t.error
    assert all(r.info.status == "FAILED" for r in mlflow_children(runs, search))
    assert "no completed candidates" in nas(runs, "pareto", search.id).stderr
    assert "nas retrain" not in done.stderr  # nothing to retrain


@pytest.mark.slow
def test_ctrl_c_then_cancel_each_stop_a_search_that_resume_finishes(tmp_path: Path) -> None:
    """Ctrl-C: exit 130, interrupted. Its resume, cancelled from another terminal:
    cancelled. A second resume finishes the budget, each candidate once."""
    runs = runs_with_store(tmp_path)
    path = write_search(tmp_path, candidates=3, steps=300, baselines="false")
    process = start_submit(runs, path)
    search = wait_for(runs, lambda trials: any(t.status == "completed" for t in trials))
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, stderr
    assert f"nas resume {search.id}" in stderr
    assert "Tuner.restore" not in stderr  # Tune's own advice does not apply to a search
    registry = registry_of(runs)
    assert registry.get_search(search.id).status == "interrupted"
    resumed = start_nas(runs, "resume", search.id)
    try:
        deadline = time.time() + 300
        while (s := registry.get_search(search.id)).sessions < 2 or s.status != "running":
            assert time.time() < deadline, "the resume did not start"
            time.sleep(0.5)
        cancel = nas(runs, "cancel", search.id)
        assert cancel.returncode == 0 and "cancelled" in cancel.stderr
        _, stderr = resumed.communicate(timeout=300)
    finally:
        if resumed.poll() is None:
            resumed.kill()
            resumed.communicate()
    assert resumed.returncode == 0, stderr
    assert registry.get_search(search.id).status == "cancelled"
    assert nas(runs, "resume", search.id).returncode == 0
    trials = registry.trials(search.id)
    assert registry.get_search(search.id).status == "completed"
    assert len(trials) == 3 and all(t.status == "completed" for t in trials)
    assert len({t.arch_id for t in trials}) == 3


@pytest.mark.slow
def test_a_wall_clock_limit_stops_the_search_for_good(tmp_path: Path) -> None:
    runs = runs_with_store(tmp_path)
    path = write_search(tmp_path, candidates=50, steps=300, baselines="false")
    path.write_text(path.read_text().replace("steps: 300}", "steps: 300, max_minutes: 0.1}"))
    done = nas(runs, "submit", str(path))
    assert done.returncode == 0, done.stderr
    (search,) = registry_of(runs).list_searches()
    assert search.status == "stopped" and "max_minutes" in search.message
    trials = registry_of(runs).trials(search.id)
    assert 0 < len(trials) < 50
    assert {t.status for t in trials} <= {"completed", "cancelled"}
    again = nas_here(runs, "resume", search.id)
    assert again.returncode == 2 and "larger max_minutes" in " ".join(again.stderr.split())


@pytest.mark.slow
def test_a_rocs_search_trains_history_and_glm_models_through_ray(tmp_path: Path) -> None:
    """The history travels with the data through the object store; every member encodes it,
    and the request side it shares makes serving FLOPs smaller than per-example FLOPs."""
    runs = runs_with_store(tmp_path)
    path = tmp_path / "rocs.yaml"
    path.write_text(
        "name: rocs_tiny\ndataset: movielens-100k\n"
        "space: {name: rocs, options: {embedding_dims: [8], max_depth: 2}}\n"
        "strategy: {name: random}\nobjectives: [ne, serving_flops]\n"
        "budget: {candidates: 3, steps: 40}\ntrain: {batch_size: 128}\n"
        f"baselines: [{REPO / 'examples/specs/modern/rocs.json'}]\nseed: 1\n"
    )
    done = nas(runs, "submit", str(path), "--json")
    assert done.returncode == 0, done.stderr
    registry = registry_of(runs)
    (search,) = registry.list_searches()
    trials = registry.trials(search.id)
    assert search.status == "completed" and len(trials) == 4
    assert all(t.status == "completed" for t in trials), [t.error for t in trials]
    for t in trials:
        assert 0 < t.metrics["ne"] < 1.5
        assert 0 < t.metrics["serving_flops"] < t.metrics["flops"]
        assert t.values == [t.metrics["ne"], t.metrics["serving_flops"]]
