"""Data-parallel training: two gloo processes, each on half of every step's batch, train to
the weights one process reaches on the whole batch (to float rounding), and to the same
weights as each other; a failure in one process ends both and says why."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from nas.core.errors import NasError, TrainingError
from tests.test_search import REPO, nas_here
from workers.data_parallel import run_processes

STEPS, BATCH = 12, 512


def _trained(spec_name: str) -> tuple[float, dict[str, torch.Tensor]]:
    """Train ``spec_name`` on MovieLens-100k (in this process, or as one of a group)."""
    from nas.arch.model import build_model
    from nas.arch.spec import ArchSpec
    from nas.data import load_dataset
    from workers.train import TrainConfig, train

    dataset = load_dataset("movielens-100k")
    spec = ArchSpec.load(REPO / "examples" / "specs" / spec_name)
    torch.manual_seed(0)
    model = build_model(spec, dataset.schema)
    rows = dataset.features("train")
    if not model.reads_history:
        rows = rows.without_history()
    stats = train(model, rows, TrainConfig(steps=STEPS, batch_size=BATCH, warmup_steps=3))
    return stats.final_loss, {k: v.clone() for k, v in model.state_dict().items()}


def _fails_on_rank_one() -> None:
    import torch.distributed as dist

    if dist.get_rank() == 1:
        raise TrainingError("rank 1 ran out of luck")
    dist.barrier()  # rank 0 waits on rank 1, which is gone: the parent ends it


@pytest.mark.parametrize("spec", ["dcnv2.json", "modern/hstu_seq.json"])
def test_two_processes_train_to_what_one_process_does(ml100k, spec: str) -> None:
    threads = torch.get_num_threads()
    alone_loss, alone = _trained(spec)
    torch.set_num_threads(threads)
    (loss_0, weights_0), (loss_1, weights_1) = run_processes(2, _trained, (spec,))
    assert all(torch.equal(weights_0[k], weights_1[k]) for k in weights_0)
    assert loss_0 == loss_1 == pytest.approx(alone_loss, abs=1e-6)
    # Float rounding apart (the group sums each gradient in another order), the same
    # training. Adam magnifies rounding where a row's gradient nearly cancels (a few
    # elements in 10,000 of HSTU's history table, by up to 1e-4), so: nearly all elements
    # within 1e-5, and none far off.
    differ = sum(int(((weights_0[k] - v).abs() > 1e-5).sum()) for k, v in alone.items())
    assert differ <= 1e-3 * sum(v.numel() for v in alone.values())
    assert max(float((weights_0[k] - v).abs().max()) for k, v in alone.items()) < 1e-3
    moved = [k for k in alone if not torch.equal(alone[k], weights_0[k])]
    assert moved, "the group's weights are the lone process's to the bit: no reduction ran?"


def test_a_failure_in_one_process_ends_the_group_with_its_reason() -> None:
    with pytest.raises(NasError, match="rank 1 ran out of luck"):
        run_processes(2, _fails_on_rank_one, ())


def _sleeps(folder: str) -> None:
    Path(folder, f"{os.getpid()}.pid").touch()
    time.sleep(300)


def test_the_processes_end_with_a_parent_killed_by_sigkill(tmp_path: Path) -> None:
    """A `nas train --workers 2` killed with SIGKILL (no handler runs) left both ranks
    training and the manager holding their results, for good: they now end with it."""
    import psutil

    script = (
        "import sys\nfrom tests.test_data_parallel import _sleeps\n"
        "from workers.data_parallel import run_processes\n"
        "run_processes(2, _sleeps, (sys.argv[1],))\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], cwd=REPO)
    try:
        deadline = time.time() + 120
        while len(list(tmp_path.glob("*.pid"))) < 2 and time.time() < deadline:
            time.sleep(0.2)
        children = psutil.Process(parent.pid).children(recursive=True)
        ranks = {int(p.stem) for p in tmp_path.glob("*.pid")}
        assert len(ranks) == 2 and ranks < {c.pid for c in children}, (ranks, children)
        parent.kill()
        parent.wait()
        _, alive = psutil.wait_procs(children, timeout=10)
        alive = [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
        assert not alive, [(p.pid, p.cmdline()[-3:]) for p in alive]
    finally:
        if parent.poll() is None:
            parent.kill()


def test_a_batch_that_does_not_split_over_the_workers_exits_2(tmp_path: Path) -> None:
    spec = str(REPO / "examples" / "specs" / "dcnv2.json")
    done = nas_here(tmp_path / "runs", "train", spec, "--dataset", "movielens-100k",
                    "--workers", "3", "--batch-size", "1000")  # fmt: skip
    assert done.returncode == 2
    assert "--batch-size: 1000 rows a step do not split evenly over 3" in " ".join(
        done.stderr.split()
    )


def test_a_data_parallel_search_that_cannot_start_exits_2(tmp_path: Path) -> None:
    for resources, words in (
        ("{workers_per_trial: 256}", "256 workers x 1 CPUs is 256 CPUs a candidate"),
        ("{workers_per_trial: 2, gpus_per_trial: 1}", "train on CPUs only for now"),
    ):
        search = tmp_path / "dp.yaml"
        search.write_text(
            "name: dp\ndataset: movielens-100k\nspace: {name: ctr_stack}\n"
            f"resources: {resources}\n"
        )
        done = nas_here(tmp_path / "runs", "submit", str(search))
        assert done.returncode == 2, done.stderr
        assert words in " ".join(done.stderr.split())
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_data_parallel_candidate_whose_other_rank_is_killed_is_trained_again(
    tmp_path: Path,
) -> None:
    """Rank 0's collective fails with gloo's error when rank 1's worker dies: the candidate is
    retried, as when its own worker dies, and Ray's paragraph about the dead worker goes to
    the runs folder's ray/errors.log, not into the JSON on stdout."""
    import json

    from tests.conftest import runs_with_store
    from tests.test_reliability import kill_worker_then_finish
    from tests.test_search import registry_of, start_submit

    runs = runs_with_store(tmp_path)
    path = tmp_path / "dp.yaml"
    path.write_text(
        "name: dp\ndataset: movielens-100k\n"
        "space: {name: ctr_stack, options: {max_depth: 2, embedding_dims: [8]}}\n"
        "strategy: random\nbudget: {candidates: 1, steps: 500}\ntrain: {batch_size: 256}\n"
        "resources: {concurrency: 1, cpus_per_trial: 1, workers_per_trial: 2}\n"
        "scheduler: null\ninclude_baselines: false\n"
    )
    submit = start_submit(runs, path, "--json")
    # into training: rank 0 waits minutes for a rank that never joined its group
    out, err = kill_worker_then_finish(runs, submit, "_other_rank", after_s=3)
    assert submit.returncode == 0, err
    assert json.loads(out)["status"] == "completed", out
    assert "Traceback" not in err and "raylet" not in err, err
    (search,) = registry_of(runs).list_searches()
    (trial,) = registry_of(runs).trials(search.id)
    assert trial.status == "completed" and trial.attempts == 2, trial.error
    (reason,) = trial.timings["retried_after"]
    assert reason.startswith("attempt 1: the Ray worker of data-parallel rank 1 died"), reason
    assert "A worker died" in (runs / "ray" / "errors.log").read_text()
