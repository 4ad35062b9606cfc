"""`mlflow server` as a team runs it, for the tests that need a tracking server."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def mlflow_server(backend_uri: str, artifacts: Path, port: int) -> Iterator[str]:
    """A tracking server on 127.0.0.1:``port`` over ``backend_uri`` (a database), serving
    artifacts from the folder ``artifacts``; its URI once it answers. Killed at the end of
    the block (a search still running then finds it gone)."""
    log = artifacts.parent / f"{artifacts.name}-{port}.log"
    with log.open("ab") as stderr:
        server = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "mlflow"),
                "server",
                "--backend-store-uri",
                backend_uri,
                "--artifacts-destination",
                artifacts.as_uri(),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
            # MLflow's job runner (GenAI jobs) is not what a search needs: 8 processes fewer.
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        )
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2):
                    break
            except OSError:
                assert server.poll() is None, log.read_text(errors="replace")[-2000:]
                assert time.time() < deadline, "mlflow server did not answer in 120 s"
                time.sleep(0.5)
        yield uri
    finally:  # the server and its workers (its own session), at once
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)
        log.unlink(missing_ok=True)
