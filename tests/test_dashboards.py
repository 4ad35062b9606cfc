"""The interactive pareto.html: the right points in the right traces, each pair's own front,
hover texts that name the candidate, progress that never goes back, one inlined plotly.js.

The figures are drawn from a real sqlite registry holding a search's rows."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import psutil
import pytest

from dashboards.pareto_html import page, pareto_figure, progress_figure, retrain_figure
from nas.search.pareto import front_indices
from nas.service.config import validate_config
from nas.service.registry import Registry
from nas.service.summary import summarize


@pytest.fixture
def recorded(tmp_path):
    """A search's registry rows: 13 searched candidates (one failed), 2 baselines, with NE,
    FLOPs and params that trade off, recorded a minute apart."""
    config = validate_config(
        {
            "name": "dash",
            "space": {"name": "ctr_stack"},
            "objectives": ["ne", "flops", "params"],
        }
    )
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    search = registry.create_search("dash-000000", "dash", config.to_dict(), None)
    rng = np.random.default_rng(0)
    for k in range(15):
        kind = "baseline" if k < 2 else "searched"
        trial = registry.add_trial(
            search.id, {"k": k}, f"{k:016x}", f"base{k}" if k < 2 else None, kind
        )
        flops = float(10 ** rng.uniform(4, 6))
        metrics = {
            "ne": 0.78 + 0.02 / np.log10(flops) + rng.normal(0, 0.003),
            "flops": flops,
            "params": float(rng.integers(10_000, 500_000)),
            "auc": 0.8,
        }
        status = "failed" if k == 14 else "completed"
        registry.finish_trial(
            trial.id,
            status,
            values=None if status == "failed" else [metrics[n] for n in ("ne", "flops", "params")],
            metrics=None if status == "failed" else metrics,
            timings={"suggested_at": 1000.0 + 60 * k, "recorded_at": 1030.0 + 60 * k},
        )
    trials = registry.trials(search.id)
    return config, trials, summarize(config, trials)


def test_every_candidate_is_drawn_once_with_its_front_and_knee(recorded) -> None:
    config, trials, summary = recorded
    links = {t.number: f"run{t.number}" for t in trials}
    figure = pareto_figure(summary, "dash", links)
    traces = {t.name: t for t in figure.data}
    assert len(traces["searched candidates"].x) == 12  # 13 searched, one failed
    assert len(traces["baselines"].x) == 2 and len(traces["knee"].x) == 1
    # The first view: NE against FLOPs, its own 2-D front (not the 3-objective one).
    values = np.array([[c.values[1], c.values[0]] for c in summary.candidates])
    front = front_indices(values, ["min", "min"])
    shown = [t for t in traces["Pareto front"].text if t]
    assert len(shown) == len(front)
    for text in traces["searched candidates"].text:
        assert re.search(r"arch_id [0-9a-f]{16}", text) and "ne 0.7" in text and "run run" in text
    assert any("base0" in t for t in traces["baselines"].text)
    assert figure.layout.xaxis.type == "log" and "flops" in figure.layout.xaxis.title.text
    # Three objectives: a menu with each pair, each pair with its own front.
    buttons = figure.layout.updatemenus[0].buttons
    assert [b.label for b in buttons] == ["ne vs flops", "ne vs params", "flops vs params"]
    for button, (x, y) in zip(buttons, [(1, 0), (2, 0), (2, 1)], strict=True):
        data, layout = button.args
        pair = np.array([[c.values[x], c.values[y]] for c in summary.candidates])
        assert sum(bool(t) for t in data["text"][2]) == len(front_indices(pair, ["min", "min"]))
        assert layout["xaxis"]["title"]["text"].startswith(summary.objectives[x])


def test_one_objective_is_drawn_against_the_trial_number(recorded) -> None:
    config, trials, _ = recorded
    one = validate_config({**config.to_dict(), "objectives": ["ne"]})
    summary = summarize(one, trials)
    traces = {t.name: t for t in pareto_figure(summary, "one").data}
    assert len(traces["searched candidates"].x) == 12
    assert list(traces["Pareto front"].y) == [min(c.values[0] for c in summary.candidates)]
    assert figure_title(pareto_figure(summary, "one")) == "trial"


def figure_title(figure) -> str:
    return figure.layout.xaxis.title.text


def test_progress_never_goes_back(recorded) -> None:
    _, trials, summary = recorded
    figure = progress_figure(summary, trials, "dash")
    volume, best = figure.data
    assert len(volume.x) == 14 and list(volume.x) == sorted(volume.x)
    assert all(b >= a for a, b in zip(volume.y, volume.y[1:], strict=False))
    assert all(b <= a for a, b in zip(best.y, best.y[1:], strict=False))
    assert volume.x[0] == pytest.approx(0.5)  # 30 s after the first suggestion


def test_the_page_inlines_plotly_once_and_holds_both_figures(recorded) -> None:
    _, trials, summary = recorded
    html = page("dash <1>", pareto_figure(summary, "dash"), progress_figure(summary, trials, "d"))
    assert html.count('<script type="text/javascript">/**\n* plotly.js') <= 1
    assert html.count("Plotly.newPlot(") == 2 and "dash &lt;1&gt;" in html
    assert "<script src=" not in html  # nothing to fetch: it opens offline
    assert json.dumps("searched candidates")[1:-1] in html


def test_a_retrain_chart_has_a_bar_per_architecture_with_its_spread() -> None:
    report = {
        "retrain_of": "s-1",
        "seeds": 3,
        "steps": 100,
        "rows": [
            {"label": "knee", "baseline": False, "ne_mean": 0.78, "ne_std": 0.002},
            {"label": "dcnv2", "baseline": True, "ne_mean": 0.781, "ne_std": 0.001},
            {"label": "dlrm", "baseline": True, "ne_mean": 0.79, "ne_std": 0.004},
        ],
    }
    picked, baselines = retrain_figure(report).data
    assert list(picked.x) == ["knee"] and list(baselines.x) == ["dcnv2", "dlrm"]
    assert list(baselines.error_y.array) == [0.001, 0.004]


def _stores(tmp_path, recorded):
    """The recorded search in a runs folder, with its parent run in a real MLflow store."""
    from nas.service.tracking import Tracker

    config, trials, _ = recorded
    runs = tmp_path / "runs"
    runs.mkdir()
    registry = Registry(f"sqlite:///{runs / 'registry.db'}")
    tracker = Tracker(f"sqlite:///{runs / 'mlflow.db'}", runs / "mlartifacts")
    ids = []
    for name in ("first", "second"):
        search = registry.create_search(f"{name}-000000", name, config.to_dict(), None)
        for t in trials:
            row = registry.add_trial(search.id, t.spec, t.arch_id, t.label, t.kind)
            registry.finish_trial(row.id, t.status, values=t.values, metrics=t.metrics)
        experiment = tracker.experiment(name)
        run = tracker.start_search(experiment, search.id, config.to_dict())
        registry.update_search(search.id, mlflow_experiment_id=experiment, mlflow_run_id=run)
        ids.append(search.id)
    return runs, ids


def test_dashboard_compares_searches_on_one_page(tmp_path, recorded) -> None:
    from tests.test_search import nas

    deep = tmp_path / ("a-folder-deep-enough-that-the-path-passes-80-columns-" * 2)
    deep.mkdir()
    runs, ids = _stores(deep, recorded)
    done = nas(runs, "dashboard", *ids)
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.split(": ", 1)[1].strip())  # one line, however long
    html = path.read_text()
    assert html.count("Plotly.newPlot(") == 1 and all(f"{i}: front" in html for i in ids)
    bad = nas(runs, "dashboard", ids[0], "nope-123456")
    assert bad.returncode == 2 and "nope-123456" in bad.stderr
    assert nas(runs, "dashboard", "--port", "0").returncode == 2


def test_the_commands_that_show_a_search_load_neither_torch_nor_ray(tmp_path, recorded) -> None:
    """`nas list`, `status`, `pareto` and a comparison read the registry only: seconds of
    torch, Ray and MLflow imports would be paid on every look at a search."""
    from tests.test_search import REPO, env_for

    runs, ids = _stores(tmp_path, recorded)
    views = [["list"], ["status", ids[0]], ["pareto", ids[0]], ["dashboard", *ids]]
    script = (
        "import sys; from nas.cli import main\n"
        f"codes = [main(argv) for argv in {views!r}]\n"
        "print(codes, sorted({'torch', 'ray', 'mlflow'} & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=env_for(runs), cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[0, 0, 0, 0] []", done.stdout
    assert ids[0] in done.stdout and "Pareto front" in done.stdout


@pytest.mark.slow
def test_dashboard_serves_the_search_run_on_loopback(tmp_path, recorded) -> None:
    from tests.test_reliability import _free_port
    from tests.test_search import REPO, env_for

    runs, ids = _stores(tmp_path, recorded)
    port = _free_port()
    with subprocess.Popen(
        [sys.executable, "-m", "nas.cli", "dashboard", ids[1], "--port", str(port)],
        env=env_for(runs), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as process:  # fmt: skip
        try:
            _check_served(process, runs, ids, port)
        finally:
            process.send_signal(signal.SIGTERM)  # SIGINT may be ignored under CI
            try:
                process.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                process.kill()
                raise
        assert process.returncode == 0
    # Killed with SIGKILL (nothing of it runs), it left the UI serving, holding the port.
    with subprocess.Popen(
        [sys.executable, "-m", "nas.cli", "dashboard", ids[1], "--port", str(port)],
        env=env_for(runs), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as process:  # fmt: skip
        try:
            assert process.stdout.readline().startswith(f"{ids[1]}: http://127.0.0.1:{port}/")
            ui = psutil.Process(process.pid).children(recursive=True)
            assert ui, "mlflow ui runs under nas dashboard"
        finally:
            process.kill()
            process.communicate()
    _, alive = psutil.wait_procs(ui, timeout=30)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], alive


def _check_served(process, runs, ids, port) -> None:
    """The UI answers for the search's run, on loopback only; a second one on the same
    port is refused."""
    from tests.test_search import REPO, env_for

    line = process.stdout.readline()
    assert line.startswith(f"{ids[1]}: http://127.0.0.1:{port}/#/experiments/"), line
    url, _, query = line.strip().partition("?")
    assert query == "workflowType=machine_learning", line  # MLflow's model-training view
    run_id = url.rsplit("/", 1)[1]
    registry = Registry(f"sqlite:///{runs / 'registry.db'}")
    assert run_id == registry.get_search(ids[1]).mlflow_run_id
    api = f"http://127.0.0.1:{port}/api/2.0/mlflow/runs/get?run_id={run_id}"
    with urllib.request.urlopen(api, timeout=10) as reply:
        assert json.load(reply)["run"]["info"]["run_id"] == run_id
    # Loopback only: the store has no authentication.
    listening = [
        c for c in psutil.net_connections("tcp") if c.laddr.port == port and c.status == "LISTEN"
    ]
    assert listening and {c.laddr.ip for c in listening} == {"127.0.0.1"}
    busy = subprocess.run(
        [sys.executable, "-m", "nas.cli", "dashboard", ids[0], "--port", str(port)],
        env=env_for(runs), cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert busy.returncode == 2 and f"port {port} on 127.0.0.1 is in use" in busy.stderr
