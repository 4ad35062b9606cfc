"""One prepare of a dataset at a time: a prepare that finds another one preparing the same
dataset waits for it, then reuses what it wrote, where both used to build the whole dataset
and the later replaced the earlier's folder under its readers."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nas.data import PrepareRequest, prepare_dataset
from nas.data.prepared import preparing
from tests.data.test_schema_file import schema_file

REPO = Path(__file__).resolve().parents[2]


def _built_in(folder: Path) -> tuple[str, PrepareRequest, str]:
    return "synthetic-criteo", PrepareRequest(rows=400, seed=0), "synthetic-criteo"


def _schema(folder: Path) -> tuple[str, PrepareRequest, str]:
    return str(schema_file(folder, fmt="jsonl")), PrepareRequest(), "my_ctr"


@pytest.mark.parametrize("source", [_built_in, _schema], ids=["built-in", "schema file"])
def test_a_prepare_waits_for_the_one_under_way_and_reuses_what_it_wrote(
    tmp_path: Path, source
) -> None:
    name, request, dataset = source(tmp_path)
    cache, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    # What the other process will have written: the same dataset, prepared apart.
    built, _ = prepare_dataset(name, elsewhere, request)
    heard, outcome = threading.Event(), {}

    def progress(what: str, rows: int, total: int | None) -> None:
        if what.startswith("waiting for another process preparing"):
            heard.set()

    def second() -> None:
        outcome["result"] = prepare_dataset(name, cache, request, progress=progress)

    with preparing(cache / dataset):  # the other process, preparing
        waiter = threading.Thread(target=second)
        waiter.start()
        assert heard.wait(60), "the second prepare did not wait"
        assert waiter.is_alive()
        shutil.copytree(built.root, cache / dataset)
    waiter.join(60)
    prepared, reused = outcome["result"]
    assert reused and prepared.root == cache / dataset
    assert prepared.manifest["split_checksum"] == built.manifest["split_checksum"]
    assert sorted(p.name for p in cache.iterdir()) == [dataset]  # its lock file gone too


def test_a_dataset_prepared_on_first_use_says_so_under_the_commands_spinner(
    tmp_path: Path,
) -> None:
    """`nas submit` and `nas train` prepare a dataset they find unprepared: their spinner
    names the pass and its rows, or whose preparation it waits on, where it used to say only
    "Checking ..." for as long as that took."""
    from rich.console import Console

    from nas.cli.render import preparing_under
    from nas.data import load_dataset

    path = schema_file(tmp_path, fmt="jsonl")
    cache = tmp_path / "cache"
    status = Console(file=io.StringIO()).status("Checking ...")
    said = []
    progress = preparing_under(status, "Preparing my_ctr (first use)")

    def hear(what: str, rows: int, total: int | None) -> None:
        progress(what, rows, total)
        said.append(status.status)

    outcome = {}
    with preparing(cache / "my_ctr"):  # another process, preparing it
        waiter = threading.Thread(
            target=lambda: outcome.update(ds=load_dataset(str(path), cache, hear))
        )
        waiter.start()
        for _ in range(600):
            if said:
                break
            time.sleep(0.1)
        assert said == [
            "Preparing my_ctr (first use): waiting for another process preparing my_ctr ..."
        ]
    waiter.join(120)  # the other process left nothing: this one builds it
    rows = outcome["ds"].manifest["rows"]
    assert said[-1] == f"Preparing my_ctr (first use): 3/3 encoding ({rows:,} of {rows:,} rows) ..."
    assert any(line.startswith("Preparing my_ctr (first use): 1/3 reading") for line in said)


def test_two_prepares_started_at_once_build_the_dataset_once(tmp_path: Path) -> None:
    """Two `nas data prepare` processes of a fresh cache: one builds, the other reuses."""
    path = schema_file(tmp_path, fmt="jsonl")
    command = [sys.executable, "-m", "nas.cli", "data", "prepare", str(path), "--json"]
    env = {**os.environ, "RECNAS_CACHE_DIR": str(tmp_path / "cache")}
    started = [
        subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300)[0] for p in started]
    assert [p.returncode for p in started] == [0, 0]
    import json

    reused = sorted(json.loads(out)["reused_cache"] for out in outputs)
    assert reused == [False, True]
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["my_ctr"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")
def test_a_dataset_prepared_again_replaces_the_old_in_one_step(tmp_path: Path) -> None:
    """Preparing again swaps the new folder with the old one in one step (no moment without
    a dataset for a search reading it), then removes the old."""
    from nas.data.prepared import _exchanged

    new, root = tmp_path / "my_ctr.tmp-host-1", tmp_path / "my_ctr"
    new.mkdir()
    root.mkdir()
    (new / "manifest.json").write_text("new")
    (root / "manifest.json").write_text("old")
    assert _exchanged(new, root)
    assert (root / "manifest.json").read_text() == "new"
    assert (new / "manifest.json").read_text() == "old"
    assert not _exchanged(tmp_path / "elsewhere", tmp_path / "missing")  # nothing to swap
