"""``nas dashboard``: MLflow's own UI, started for the right tracking store, and a page that
compares searches' fronts.

A search on the default local store (sqlite under the runs folder) gets ``mlflow ui`` on
127.0.0.1 (never another interface: the store is unauthenticated), with the store's
artifact folder; a search on an MLflow server is already browsable there. Either way the
command prints the URL of the search's parent run.
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from nas.core.errors import NasError
from nas.core.processes import end_with_parent

STARTUP_S = 90  # mlflow ui imports the whole server on first start


def is_server(tracking_uri: str) -> bool:
    return tracking_uri.startswith(("http://", "https://"))


def run_url(base: str, experiment_id: str, run_id: str) -> str:
    # MLflow's UI opens on its GenAI view unless the URL (or the browser's storage) says
    # otherwise: a fresh browser lands on the model-training view only with workflowType.
    return (
        f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
        "?workflowType=machine_learning"
    )


def start_ui(tracking_uri: str, artifacts: Path | None, port: int, log: Path) -> subprocess.Popen:
    """``mlflow ui`` for a local store on 127.0.0.1:``port``, once it answers. Its output
    goes to ``log``: a pipe nobody reads would fill and stall the server."""
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            raise NasError(f"port {port} on 127.0.0.1 is in use; pick another with --port")
    command = [
        sys.executable, "-m", "mlflow", "ui",
        "--backend-store-uri", tracking_uri,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--workers", "1",
    ]  # fmt: skip
    if artifacts is not None:
        command += ["--default-artifact-root", str(artifacts)]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as sink:
        process = subprocess.Popen(
            command,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=_ui_environment(),
            # SIGTERM, which MLflow's server answers by stopping its workers, when `nas
            # dashboard` ends however it ends: killed, it left the UI holding the port.
            preexec_fn=functools.partial(end_with_parent, os.getpid(), signal.SIGTERM, watch=False),
        )
    deadline = time.time() + STARTUP_S
    while time.time() < deadline:
        if process.poll() is not None:
            tail = " ".join(log.read_text(errors="replace").split())[-400:]
            raise NasError(f"mlflow ui stopped at start (exit {process.returncode}): {tail}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
                if reply.status == 200:
                    return process
        except OSError:
            time.sleep(0.5)
    stop_ui(process)
    raise NasError(f"mlflow ui did not answer on 127.0.0.1:{port} within {STARTUP_S} s")


def _ui_environment() -> dict[str, str]:
    """One person's UI on loopback: MLflow's server defaults are for a shared one. Its four
    web workers and its job runner (a Huey consumer and its workers, for GenAI jobs a
    search never starts) take many processes and seconds to answer; one worker and no job
    runner start in a fraction of that (``benchmarks/README.md``). A user's own
    MLFLOW_SERVER_ENABLE_JOB_EXECUTION wins."""
    return {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", **os.environ}


def stop_ui(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def comparison_figure(summaries: dict[str, object]):
    """Several searches' fronts over their first two objectives (which must agree), one
    colour each: every candidate faint, the front's staircase bold."""
    import plotly.graph_objects as go

    from dashboards.pareto_html import LOG_SCALE, _hover

    figure = go.Figure()
    names = None
    for search_id, summary in summaries.items():
        if names is None:
            names = summary.objectives[:2]
        elif summary.objectives[:2] != names:
            raise NasError(
                f"{search_id} optimises {summary.objectives[:2]}, the others {names}: "
                "compare searches over the same objectives"
            )
        if len(names) < 2:
            raise NasError(f"{search_id} has one objective: nothing to draw a front of")
        front = sorted(summary.front, key=lambda c: c.values[1])
        points = go.Scatter(
            x=[c.values[1] for c in summary.candidates],
            y=[c.values[0] for c in summary.candidates],
            mode="markers",
            name=f"{search_id} (all)",
            opacity=0.35,
            text=[_hover(c, None) for c in summary.candidates],
            hovertemplate="%{text}<extra></extra>",
            legendgroup=search_id,
        )
        figure.add_trace(points)
        color = figure.data[-1].marker.color
        figure.add_trace(
            go.Scatter(
                x=[c.values[1] for c in front],
                y=[c.values[0] for c in front],
                mode="lines+markers",
                line_shape="hv",
                name=f"{search_id}: front, hypervolume {summary.hypervolume:.4g}",
                marker_color=color,
                text=[_hover(c, None) for c in front],
                hovertemplate="%{text}<extra></extra>",
                legendgroup=search_id,
            )
        )
    figure.update_layout(
        title=f"{len(summaries)} searches: {names[0]} against {names[1]}",
        xaxis={"title": {"text": names[1]}, "type": "log" if names[1] in LOG_SCALE else "linear"},
        yaxis={"title": {"text": names[0]}},
        template="plotly_white",
        legend={"orientation": "h", "y": -0.2},
    )
    return figure
