"""One-shot and differentiable searches as a user runs them: `nas submit` in a real
subprocess, a real local Ray running the setup jobs, real registry and MLflow stores,
MovieLens-100k. A kill -9 in the middle of the DNAS jobs resumes from their checkpoints and
ends with the architectures the same jobs find unbroken."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import torch
from mlflow import MlflowClient

from nas.arch.spec import ArchSpec
from nas.data import load_dataset
from tests.conftest import runs_with_store
from tests.test_reliability import _workers_named
from tests.test_search import baselines_yaml, nas, nas_here, registry_of, start_submit
from workers import dnas
from workers.trial_data import TrialData

SEARCH = """\
name: {name}
dataset: movielens-100k
space:
  name: ctr_stack
  options: {{max_depth: 2, embedding_dims: [8, 16], blocks: [mlp, dot, fm, dcnv2]}}
strategy: {{name: {strategy}, options: {options}}}
budget: {{candidates: 4, steps: 60}}
train: {{batch_size: 256}}
resources: {{concurrency: {concurrency}, cpus_per_trial: 1}}
{baselines}
seed: 4
"""


def write(
    folder: Path, strategy: str, options: str, baselines: str = "false", concurrency: int = 1
) -> Path:
    path = folder / f"{strategy}.yaml"
    path.write_text(
        SEARCH.format(
            name=strategy,
            strategy=strategy,
            options=options,
            baselines=baselines_yaml(baselines),
            concurrency=concurrency,
        )
    )
    return path


def trials_of(runs: Path):
    registry = registry_of(runs)
    (search,) = registry.list_searches()
    return registry.get_search(search.id), registry.trials(search.id)


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid``: Ray's workers run in their own process
    groups, and one left alive would write a checkpoint after the test has torn it."""
    import psutil

    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == sid:
                proc.kill()
        except (psutil.Error, ProcessLookupError):
            pass


@pytest.mark.slow
def test_dnas_killed_during_its_jobs_resumes_to_the_same_architectures(tmp_path: Path) -> None:
    path = write(  # both jobs at once, both killed mid-run
        tmp_path, "dnas", "{lambdas: [0.0, 0.5], steps: 60, checkpoint_every: 15}", concurrency=2
    )
    runs = runs_with_store(tmp_path)
    process = start_submit(runs, path, start_new_session=True)
    try:
        deadline = time.time() + 300
        while not list(runs.glob("checkpoints/*/dnas-l0.pt")) and time.time() < deadline:
            time.sleep(0.5)
    finally:
        _kill_session(process.pid)  # the controller and its jobs' Ray workers, as a crash
        process.communicate()
    search, trials = trials_of(runs)
    jobs = [t for t in trials if t.kind == "dnas"]
    assert jobs and all(t.status == "running" for t in jobs), "killed before the jobs ran"
    saved = torch.load(jobs[0].checkpoint, weights_only=True)["step"]
    assert 0 < saved < 60
    # A torn checkpoint: the resume fails, naming the file and what to do, and leaves the
    # search resumable; with the file whole again, the next resume finishes.
    torn = Path(jobs[0].checkpoint)
    whole = torn.read_bytes()
    torn.write_bytes(b"not a checkpoint")
    failed = nas(runs, "resume", search.id)
    stderr = " ".join(failed.stderr.split())
    assert failed.returncode != 0 and f"setup job {jobs[0].arch_id} failed" in stderr
    assert str(torn) in stderr and "delete it to start that job over" in stderr
    assert registry_of(runs).get_search(search.id).status == "failed"
    torn.write_bytes(whole)
    done = nas(runs, "resume", search.id)
    assert done.returncode == 0, done.stderr
    search, trials = trials_of(runs)
    assert search.status == "completed"
    jobs = {t.arch_id: t for t in trials if t.kind == "dnas"}
    assert sorted(jobs) == ["dnas-l0", "dnas-l0.5"]
    assert all(t.status == "completed" for t in jobs.values())
    # The torn one ran three times; the other two or three times (it may not have restarted
    # before the torn one failed).
    assert jobs[torn.stem].attempts == 3 and jobs[({*jobs} - {torn.stem}).pop()].attempts >= 2
    assert all(t.checkpoint is None for t in jobs.values())  # deleted once recorded
    assert not list(runs.glob("checkpoints/*/*.pt"))
    searched = {t.arch_id for t in trials if t.kind == "searched"}
    assert searched == {t.metrics["arch_id"] for t in jobs.values()}
    # The job run unbroken (in this process, with the settings the search recorded) decodes
    # the architecture the interrupted one did (one job of the two: they resume alike).
    data = TrialData.from_prepared(load_dataset(search.config["dataset"]), "valid")
    threads = torch.get_num_threads()
    try:
        job = jobs["dnas-l0"]  # the one the test saw checkpointed mid-run
        unbroken = dnas.run(job.job["settings"], data, None, lambda *_: None)
        assert unbroken["arch_id"] == job.metrics["arch_id"]
    finally:
        torch.set_num_threads(threads)  # the job sets its own
    # MLflow: one run per job with the logits' trajectories, once each despite the crash.
    client = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}")
    runs_ = client.search_runs([search.mlflow_experiment_id], filter_string="tags.kind = 'dnas'")
    assert sorted(r.info.run_name for r in runs_) == ["dnas-l0", "dnas-l0.5"]
    for run in runs_:
        history = client.get_metric_history(run.info.run_id, "alpha.last.block.dcnv2")
        assert [m.step for m in history] == list(range(10, 61, 10))
        assert {"spec.json", "probabilities.json", "probabilities.html"} <= {
            a.path for a in client.list_artifacts(run.info.run_id)
        }


@pytest.mark.slow
def test_a_setup_job_that_stops_reporting_is_killed_and_the_search_stops_resumable(
    tmp_path: Path,
) -> None:
    """A hung job (a stopped process, a stalled disk) held its search for good. With
    `resources.max_trial_minutes`, a job silent that long is killed, recorded failed with
    the reason, and the search stops, resumable from the job's checkpoint."""
    path = write(tmp_path, "dnas", "{lambdas: [0.0], steps: 1000000, checkpoint_every: 20}")
    text = path.read_text().replace(
        "cpus_per_trial: 1}", "cpus_per_trial: 1, max_trial_minutes: 0.25}"
    )
    path.write_text(text)
    assert "max_trial_minutes: 0.25" in text
    runs = runs_with_store(tmp_path)
    submit = start_submit(runs, path)
    try:
        deadline = time.time() + 300
        while not list(runs.glob("checkpoints/*/dnas-l0.pt")) and time.time() < deadline:
            time.sleep(0.5)
        (job,) = _workers_named(submit.pid, "run_job")
        job.suspend()  # SIGSTOP: it neither reports nor ends
        _, err = submit.communicate(timeout=300)
    finally:
        if submit.poll() is None:
            submit.kill()
            submit.communicate()
    said = " ".join(err.split())
    search, (trial,) = trials_of(runs)
    assert submit.returncode == 1 and "Traceback" not in err, err
    why = "reported no progress for 0.25 minutes, over resources.max_trial_minutes, and was killed"
    assert f"setup job dnas-l0 failed: {why}" in said
    assert f"continue with: nas resume {search.id} (it restarts from its checkpoint)" in said
    assert search.status == "failed" and trial.status == "failed" and trial.error == why
    assert Path(trial.checkpoint).exists()  # what the resume starts from
    time.sleep(1)
    assert not job.is_running() or job.status() == "zombie"


@pytest.mark.slow
def test_oneshot_logs_its_estimates_and_ranks_by_its_first_trainings(tmp_path: Path) -> None:
    options = (
        "{supernet_steps: 200, few_shot: [depth], few_shot_steps: 40, subnet_budget: 60, "
        "eval_rows: 2048, calibration: 4, top_k: 2}"
    )
    runs = runs_with_store(tmp_path)
    path = write(tmp_path, "oneshot", options, concurrency=2)
    done = nas(runs, "submit", str(path), "--budget", "7", "--json")
    assert done.returncode == 0, done.stderr
    search, trials = trials_of(runs)
    assert search.status == "completed"
    assert "picked from the calibrated ranker's front" in search.message
    ranker = search.strategy_state["ranker"]
    assert ranker["used"] and ranker["results"] == 4 and ranker["penalties"]["ne"] > 0
    (job,) = [t for t in trials if t.kind == "supernet"]
    assert Path(job.checkpoint).exists()  # a trained supernet is kept
    assert job.metrics["evaluated"] == 60 and len(job.metrics["picks"]) == 2
    assert len(job.metrics["calibration"]) == 4
    assert "subnets" not in job.metrics and "pool" not in job.metrics  # not in the registry
    searched = sorted((t for t in trials if t.kind == "searched"), key=lambda t: t.number)
    assert len(searched) == 6
    calibration = {ArchSpec.from_dict(d).arch_id for d in job.job["settings"]["calibration"]}
    assert {t.arch_id for t in searched[:4]} == calibration  # trained first
    last_calibration = max(t.timings["recorded_at"] for t in searched[:4])
    # They need no supernet: they trained before its job, in the workers it needs.
    assert job.timings["started_at"] >= max(t.timings["finished_at"] for t in searched[:4])
    client = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}")
    for t in searched:  # the calibration members' supernet scores filed once it had them
        assert 0 < t.metrics["supernet_ne"] < 2 and 0 < t.metrics["ne"] < 2
        logged = client.get_run(t.mlflow_run_id).data.metrics
        assert logged["supernet_ne"] == pytest.approx(t.metrics["supernet_ne"])
    for t in searched[4:]:  # ranked once every calibration result was in
        assert t.timings["suggested_at"] >= last_calibration
        assert 0 < t.metrics["ranker_ne"] < 2
    (job_run,) = client.search_runs(
        [search.mlflow_experiment_id], filter_string="tags.kind = 'supernet'"
    )
    assert {"picks.json", "subnets.csv"} <= {
        a.path for a in client.list_artifacts(job_run.info.run_id)
    }
    status = " ".join(nas(runs, "status", search.id).stdout.split())
    assert "setup jobs" in status and "60 members scored, 2 picked" in status
    assert "4 to calibrate the ranker, trained first" in status
    printed = json.loads(nas(runs, "status", search.id, "--json").stdout)
    assert printed["phase"].startswith("stand-alone training: 6 finished, 0 running")


@pytest.mark.slow
def test_distdnas_aggregates_its_shards_next_to_the_baselines(tmp_path: Path) -> None:
    options = "{lambdas: [0.0, 1.0], steps: 120, shards: 2, aggregate: vote, mixed_choices: 2}"
    runs = runs_with_store(tmp_path)
    done = nas(runs, "submit", str(write(tmp_path, "distdnas", options, baselines="two")))
    assert done.returncode == 0, done.stderr
    search, trials = trials_of(runs)
    jobs = [t for t in trials if t.kind == "dnas"]
    assert sorted(t.arch_id for t in jobs) == [
        "dnas-l0-s0",
        "dnas-l0-s1",
        "dnas-l1-s0",
        "dnas-l1-s1",
    ]
    assert {tuple(t.job["settings"]["shard"]) for t in jobs} == {(0, 2), (1, 2)}
    assert all(t.job["settings"]["steps"] == 60 for t in jobs)
    assert all(t.job["settings"]["mixed_choices"] == 2 for t in jobs)
    # Each job says from which step its decode held (or that it still moved at the end).
    status = " ".join(nas(runs, "status", search.id).stdout.split())
    for t in jobs:
        settled = t.metrics["settled_from_step"]
        assert 0 < settled <= 60 and f"{t.metrics['arch_id']}, " in status
        assert f"step {settled} of 60" in status
        # ... and the search's end names each one still changing in its last tenth (54-60).
        assert (f"note: {t.arch_id} decoded" in done.stderr) == (settled >= 54)
    assert sum(t.kind == "baseline" for t in trials) == 2
    assert 1 <= sum(t.kind == "searched" for t in trials) <= 2
    # lambda 0's member trained as soon as its two shards ended, before lambda 1's jobs; the
    # baselines waited for the jobs.
    started = {t.arch_id: t.timings["started_at"] for t in jobs}
    (first, *_) = sorted((t for t in trials if t.is_candidate), key=lambda t: t.number)
    assert first.kind == "searched" and first.metrics["dnas_penalty"] == 0.0
    assert started["dnas-l0-s1"] < first.timings["started_at"] < started["dnas-l1-s0"]
    artifacts = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}").list_artifacts(search.mlflow_run_id)
    assert "strategy.json" in {a.path for a in artifacts}


@pytest.mark.parametrize(
    ("space", "strategy", "words"),
    [
        ("rocs", "dnas", "space.name: space 'rocs' has no supernet form"),
        ("rocs", "oneshot", "space.name: space 'rocs' has no supernet form"),
        ("hstu_seq", "dnas", "strategy.options.relaxation: gumbel mixes every candidate"),
        ("wukong", "dnas", "strategy.options.relaxation: gumbel mixes every candidate"),
        (
            "ctr_stack",
            "{name: oneshot, options: {few_shot: [last.blok]}}",
            "strategy.options.few_shot: names decisions of the space to split it by; ctr_stack "
            "has no last.blok: its decisions are depth,",
        ),
    ],
)
def test_a_space_the_strategy_cannot_search_exits_2_and_starts_nothing(
    tmp_path: Path, space: str, strategy: str, words: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        f"name: t\ndataset: movielens-100k\nspace: {{name: {space}}}\nstrategy: {strategy}\n"
    )
    runs = tmp_path / "runs"
    done = nas_here(runs, "submit", str(path))
    assert done.returncode == 2, done.stderr
    assert words in " ".join(done.stderr.split())
    assert not (runs / "registry.db").exists()
