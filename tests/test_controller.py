"""The controller's asking and recording, driven directly (no Ray): the order of candidates,
and what each kind of trial outcome leaves in the registry and in MLflow."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

from nas.arch.spec import ArchSpec
from nas.service.config import validate_config
from nas.service.controller import Controller
from nas.service.plan import plan
from nas.service.registry import Registry
from nas.service.tune_glue import WorkerCrash
from tests.conftest import runs_with_store
from workers.messages import TrialRequest

SEARCH = {
    "name": "unit",
    "dataset": "movielens-100k",
    "space": {"name": "ctr_stack", "options": {"max_depth": 2}},
    "strategy": {"name": "evolution", "options": {"population_size": 2, "sample_size": 1}},
    "budget": {"candidates": 3, "steps": 10},
    "baselines": ["dlrm.json", "deepfm.json"],
}
SPECS = Path(__file__).resolve().parent.parent / "examples" / "specs"


@pytest.fixture
def controller(tmp_path: Path, monkeypatch, ml100k) -> Controller:
    runs = runs_with_store(tmp_path)
    monkeypatch.setenv("RECNAS_RUNS_DIR", str(runs))
    config = validate_config(SEARCH)
    registry = Registry(f"sqlite:///{runs / 'registry.db'}")
    search = registry.create_search("unit-1", "unit", config.to_dict(), None)
    controller = Controller(registry, search, plan(config, SPECS))
    controller.begin(registry.claim(search))
    return controller


def report(ne: float, flops: float = 1e4) -> dict:
    now = time.time()
    metrics = {"ne": ne, "flops": flops, "auc": 0.7, "params": 100, "name": None}
    return {
        "outcome": "completed",
        "payload": json.dumps(metrics),
        "started_at": now,
        "finished_at": now,
    }


def test_baselines_hold_half_the_workers_beside_the_strategy_until_the_budget(controller):
    """2 workers: one trains the baselines in turn, the other the strategy's candidates; once
    the budget is spent, the baselines left take any worker."""
    first, second = controller.next_config("tune-0"), controller.next_config("tune-1")
    assert first["spec"]["name"] == "dlrm" and second["spec"].get("name") is None
    asked = TrialRequest.from_config(second)
    assert asked.settings.train.steps == 10 and asked.settings.threads == 1
    controller.record("tune-0", report(0.8), None)
    assert controller.next_config("tune-2")["spec"]["name"] == "deepfm"  # the next baseline
    rest = [controller.next_config(f"tune-{i}") for i in range(3, 6)]
    assert rest[0]["spec"].get("name") is None and rest[1]["spec"].get("name") is None
    assert rest[2] is None  # 3 candidates and 2 baselines: done
    trials = controller.registry.trials("unit-1")
    assert [t.is_baseline for t in trials] == [True, False, True, False, False]
    assert controller.registry.get_search("unit-1").strategy_state["seen"]


def test_once_the_budget_is_spent_the_baselines_left_take_every_worker(controller) -> None:
    configs = [controller.next_config(f"tune-{i}") for i in range(6)]
    assert [c["spec"].get("name") for c in configs[:5]] == ["dlrm", None, None, None, "deepfm"]
    assert configs[5] is None


def test_with_one_worker_the_baselines_come_first(tmp_path: Path, monkeypatch, ml100k):
    runs = runs_with_store(tmp_path)
    monkeypatch.setenv("RECNAS_RUNS_DIR", str(runs))
    config = validate_config(SEARCH | {"resources": {"concurrency": 1}})
    registry = Registry(f"sqlite:///{runs / 'registry.db'}")
    search = registry.create_search("unit-1", "unit", config.to_dict(), None)
    controller = Controller(registry, search, plan(config, SPECS))
    controller.begin(registry.claim(search))
    names = []
    for i in range(5):
        names.append(controller.next_config(f"tune-{i}")["spec"].get("name"))
        controller.record(f"tune-{i}", report(0.8 - i / 100), None)
    assert names == ["dlrm", "deepfm", None, None, None]


def test_a_baseline_the_strategy_proposes_before_it_trains_is_trained_once(controller):
    """The strategy hears no result for it (as for one still training) and asks again."""
    deepfm = controller.plan.baselines[1]
    asked = iter([deepfm, *(controller.strategy.ask() for _ in range(3))])
    told = []
    controller.strategy.ask = lambda: next(asked)
    controller.strategy.tell = lambda spec, values: told.append((spec.arch_id, values))
    configs = [controller.next_config(f"tune-{i}") for i in range(6)]
    assert told == [(deepfm.arch_id, None)]
    arch_ids = [ArchSpec.from_dict(c["spec"]).arch_id for c in configs[:5]]
    assert arch_ids.count(deepfm.arch_id) == 1
    assert configs[5] is None


def test_each_outcome_is_recorded_with_its_reason(controller) -> None:
    for i in range(5):
        controller.next_config(f"tune-{i}")
    controller.record("tune-0", report(0.8), None)
    controller.record("tune-1", report(math.nan), None)
    failed = {
        "outcome": "failed",
        "payload": "training diverged: loss is nan at step 3",
        "started_at": time.time(),
        "finished_at": time.time(),
    }
    controller.record("tune-2", failed, None)
    oom = WorkerCrash("killed by Ray's memory monitor: the node ran low on memory", True)
    controller.record("tune-3", None, oom)  # not retried: it would run out again
    controller.record("tune-4", {"training_iteration": 0}, None)  # Tune stopped it
    by_number = {t.number: t for t in controller.registry.trials("unit-1")}
    assert by_number[0].status == "completed" and by_number[0].values == [0.8, 1e4]
    assert by_number[1].status == "failed" and "not finite" in by_number[1].error
    assert by_number[2].error.startswith("training diverged")
    assert "memory monitor" in by_number[3].error and by_number[3].attempts == 1
    assert by_number[4].status == "running"  # left open: the end of the session cancels it
    assert all(by_number[n].mlflow_run_id for n in range(4))
    assert by_number[0].timings["bookkeeping_s"] > 0
    search = controller.recording.close(controller.search, "interrupted", "test", 1.0)
    assert controller.registry.trials("unit-1")[4].status == "cancelled"
    assert search.status == "interrupted"


def test_a_resumed_session_runs_open_trials_again_first(controller, tmp_path: Path) -> None:
    for i in range(3):
        controller.next_config(f"tune-{i}")
    controller.record("tune-0", report(0.8), None)
    controller.recording.close(controller.search, "interrupted", "test", 1.0)
    again = Controller(controller.registry, controller.search, controller.plan)
    again.begin(controller.registry.claim(controller.registry.get_search("unit-1")))
    numbers = [again.next_config(f"t{i}")["number"] for i in range(3)]
    assert numbers == [1, 2, 3]  # the two cut short, then the next ask
    assert len(controller.registry.trials("unit-1")) == 4


def test_a_candidate_whose_worker_died_runs_again_up_to_max_retries(controller) -> None:
    died = WorkerCrash("the Ray worker died (killed, or crashed outside Python): EOF", False)
    first = controller.next_config("tune-0")
    retries = controller.config.resources.max_retries
    for attempt in range(1, retries + 1):
        controller.record(f"tune-{attempt - 1}", None, died)
        again = controller.next_config(f"tune-{attempt}")
        assert again["number"] == first["number"]  # the same candidate, on a new worker
        trial = controller.registry.trials("unit-1")[first["number"]]
        assert trial.status == "running" and trial.attempts == attempt + 1
    controller.record(f"tune-{retries}", None, died)  # out of retries: failed, with its story
    trial = controller.registry.trials("unit-1")[first["number"]]
    assert trial.status == "failed" and trial.error.startswith("the Ray worker died")
    assert [r.split(":")[0] for r in trial.timings["retried_after"]] == [
        f"attempt {n}" for n in range(1, retries + 1)
    ]


@pytest.mark.parametrize(
    ("text", "oom", "words"),
    [
        (
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on "
            "memory.\nMemory on the node (IP: 10.0.0.1) was 7.5GB / 8GB",
            True,
            "killed by Ray's memory monitor",
        ),
        (
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this "
            "task.\n\tclass_name: ImplicitFunc\n(1) The process is killed by SIGKILL by OOM "
            "killer due to high memory usage. (2) ray stop --force is called.",
            False,
            "the Ray worker died",
        ),
        (  # its node's raylet killed (as Ray 2.60 words it)
            "The actor c6e8eb3eea6bc8464931d83401000000 is unavailable: The actor is "
            "temporarily unavailable: RpcError: RPC error: Socket closed rpc_code: 14. The "
            "task may or may not have been executed on the actor.",
            False,
            "the Ray worker stopped answering (its node died or left the cluster): The actor",
        ),
    ],
)
def test_worker_deaths_are_told_apart_from_memory_kills(
    tmp_path: Path, text: str, oom: bool, words: str
) -> None:
    from types import SimpleNamespace

    from nas.service.tune_glue import worker_crash

    error_file = tmp_path / "error.txt"
    error_file.write_text(f"Failure # 1 (occurred at 2026-11-30)\n{text}\n")
    crash = worker_crash(SimpleNamespace(error_file=str(error_file)))
    assert crash.final is oom and crash.reason.startswith(words)


def another_search(first: Controller, search_id: str, **changes) -> Controller:
    """A new search of ``first``'s registry, its config changed by ``changes``."""
    config = validate_config({**SEARCH, **changes})
    registry = first.registry
    search = registry.create_search(search_id, "unit", config.to_dict(), None)
    controller = Controller(registry, search, plan(config, SPECS))
    controller.begin(registry.claim(search))
    return controller


def trained_baselines(controller: Controller) -> None:
    """dlrm completes with its figures (and rungs, as a scheduler would file them); deepfm
    fails."""
    controller.next_config("tune-0")
    controller.next_config("tune-1")
    figures = report(0.8, flops=188e3)
    payload = json.loads(figures["payload"]) | {
        "rungs": [{"step": 5, "ne": 0.9, "auc": 0.6, "logloss": 0.7}]
    }
    controller.record("tune-0", figures | {"payload": json.dumps(payload)}, None)
    controller.record("tune-1", report(math.nan), None)


def test_a_baseline_trained_before_with_the_same_settings_is_not_trained_again(
    controller,
) -> None:
    trained_baselines(controller)
    first = controller.registry.trials("unit-1")[0]
    assert len(first.metrics["training_key"]) == 64
    later = another_search(controller, "unit-2")
    later._reuse_baselines()
    (dlrm,) = later.registry.trials("unit-2")
    assert dlrm.label == "dlrm" and dlrm.status == "completed"
    assert dlrm.values == first.values and dlrm.metrics == first.metrics
    assert dlrm.timings["reused_from"] == {"search_id": "unit-1", "trial": 0}
    assert dlrm.timings["bookkeeping_s"] >= 0
    # the failed one is trained, then the strategy's candidates
    assert later.next_config("tune-0")["spec"]["name"] == "deepfm"
    assert later.next_config("tune-1")["spec"].get("name") is None
    run = later.tracker.client.get_run(dlrm.mlflow_run_id)
    assert run.data.tags["reused_from"] == "unit-1 trial 0"
    assert run.data.metrics["ne"] == 0.8
    assert later.training_key(dlrm.spec) == first.metrics["training_key"]


@pytest.mark.parametrize(
    "changes",
    [
        {"budget": {"candidates": 3, "steps": 12}},
        {"seed": 1},
        {"train": {"lr": 0.001}},
        {"resources": {"cpus_per_trial": 2}},
        {"scheduler": {"name": "asha", "options": {"grace_steps": 2}}},
        {"reuse_baselines": False},
    ],
    ids=["steps", "seed", "lr", "threads", "rungs", "reuse off"],
)
def test_a_baseline_is_trained_again_when_what_decides_its_figures_changed(
    controller, changes
) -> None:
    trained_baselines(controller)
    later = another_search(controller, "unit-2", **changes)
    later._reuse_baselines()
    assert later.registry.trials("unit-2") == []
    assert later.next_config("tune-0")["spec"]["name"] == "dlrm"


def test_a_reused_baseline_is_priced_by_the_later_searchs_objectives(controller) -> None:
    trained_baselines(controller)
    latency = {"name": "latency", "target": "h100-sxm", "precision": "bf16"}
    later = another_search(controller, "unit-2", objectives=["ne", latency])
    later._reuse_baselines()
    (dlrm,) = later.registry.trials("unit-2")
    assert dlrm.values[0] == 0.8 and dlrm.values[1] == dlrm.metrics["latency"] > 0
    assert "latency" not in controller.registry.trials("unit-1")[0].metrics


def test_a_first_ctrl_c_stops_the_trials_a_second_raises_at_once(controller) -> None:
    """Tune's own Ctrl-C handler is not looked at while Tune waits for the searcher (a search
    whose workers all run setup jobs): the controller's is, through ``should_stop``."""
    import os
    import signal

    # Python's own handler, whatever this test process inherited (a suite started in the
    # background ignores Ctrl-C: the test below)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with controller._first_ctrl_c():
            assert os.environ["TUNE_DISABLE_SIGINT_HANDLER"] == "1"
            assert not controller.should_stop()
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler runs between bytecodes of this thread
            assert controller.interrupted and controller.should_stop()
            assert controller.next_config("tune-0") is None  # Tune: the search is over
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert "TUNE_DISABLE_SIGINT_HANDLER" not in os.environ
    finally:
        signal.signal(signal.SIGINT, inherited)


def test_a_search_started_with_ctrl_c_ignored_keeps_ignoring_it(controller) -> None:
    """``nas submit ... &`` in a script, or under nohup: the terminal's Ctrl-C is for the
    foreground job, not for the search (nor for Tune's handler, kept off as well)."""
    import os
    import signal

    inherited = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with controller._first_ctrl_c():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert os.environ["TUNE_DISABLE_SIGINT_HANDLER"] == "1"
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            assert not controller.interrupted and not controller.should_stop()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, inherited)


def test_only_a_trial_on_a_worker_past_the_time_limit_is_killed_and_it_fails_final(
    controller, monkeypatch
) -> None:
    """`resources.max_trial_minutes` counts from when a trial is first seen on a worker (not
    while it waits for one), names each trial once, never a finished one; a killed trial
    fails with the reason and is not retried, one that reported in time is recorded as it
    reported."""
    clock = [1000.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    resources = controller.config.resources.model_copy(update={"max_trial_minutes": 1.0})
    controller.config = controller.config.model_copy(update={"resources": resources})
    for i in range(3):
        controller.next_config(f"tune-{i}")
    assert controller.overdue({"tune-0"}) == set()  # tune-1, tune-2 wait for a worker
    clock[0] += 50
    assert controller.overdue({"tune-0", "tune-1"}) == set()
    clock[0] += 20  # tune-0: 70 s on its worker; tune-1: 20 s
    assert controller.overdue({"tune-0", "tune-1"}) == {"tune-0"}
    assert controller.overdue({"tune-0", "tune-1"}) == set()  # named once
    died = WorkerCrash("the Ray worker died (killed, or crashed outside Python): EOF", False)
    controller.record("tune-0", None, died)
    clock[0] += 100
    controller.record("tune-1", report(0.8), None)  # it reported, then the limit passed
    assert controller.overdue({"tune-1"}) == set()  # finished: not named
    by_number = {t.number: t for t in controller.registry.trials("unit-1")}
    assert by_number[0].status == "failed" and by_number[0].attempts == 1
    assert by_number[0].error == "ran over resources.max_trial_minutes (1) and was killed"
    assert by_number[1].status == "completed"


def test_built_in_baselines_that_do_not_build_on_the_data_are_left_out_and_named(
    tmp_path: Path, monkeypatch
) -> None:
    """On a dataset of one field, DeepFM's FM and DLRM's dot have one token: the default
    baselines refused the whole search ("deepfm.json: interaction[0].num_tokens: an FM needs
    at least 2 input tokens"). The built-in ones that do not build are now left out, each
    named with why (the search header prints them); a baseline the config lists is still
    refused, as its author asked for it."""
    from nas.core.errors import ConfigError

    data = tmp_path / "one.csv"
    rows = [f"s{i % 7},{int(i % 3 == 0)}" for i in range(400)]
    data.write_text("site,click\n" + "\n".join(rows) + "\n")
    schema = tmp_path / "one.yaml"
    schema.write_text(
        "name: one_field\nsource: {format: csv, path: one.csv}\nlabels: [click]\nkeys: {}\n"
        "split: {method: random, valid: 0.2, test: 0.2}\n"
        "features: [{name: site, type: categorical}]\n"
    )
    monkeypatch.setenv("RECNAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RECNAS_RUNS_DIR", str(runs_with_store(tmp_path)))
    search = {
        **{k: v for k, v in SEARCH.items() if k != "baselines"},
        "dataset": str(schema),
        "space": {"name": "ctr_stack", "options": {"blocks": ["mlp", "dcnv2"]}},
    }
    checked = plan(validate_config(search), tmp_path)
    assert {name for name, _ in checked.baselines_left_out} == {"deepfm", "dlrm"}
    assert dict(checked.baselines_left_out)["deepfm"].startswith(
        "interaction[0].num_tokens: an FM needs at least 2 input tokens"
    )
    assert sorted(spec.name for spec in checked.baselines) == ["autoint", "dcnv2"]
    with pytest.raises(ConfigError, match=r"an FM needs at least 2 input tokens"):
        plan(validate_config(search | {"baselines": [str(SPECS / "deepfm.json")]}), tmp_path)
