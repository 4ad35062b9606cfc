"""Where recnas keeps its files: every path under the runs folder comes from one module, and
the data cache follows the runs folder unless it is set on its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from nas.core import paths
from nas.core.errors import ConfigError


def test_every_path_lives_under_the_runs_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RECNAS_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("RECNAS_CACHE_DIR", raising=False)
    root = (tmp_path / "runs").resolve()
    assert paths.runs_dir() == root
    assert paths.data_cache_dir() == root / "data"
    made = [
        paths.registry_file(),
        paths.tracking_file(),
        paths.artifacts_dir(),
        paths.tune_dir(),
        paths.ray_dir(),
        paths.checkpoint_file("s-1", "supernet"),
        paths.weights_file("r-1", "abc", 2),
        paths.calibration_file("AMD EPYC/2cpus"),
        paths.dashboards_dir(),
    ]
    assert all(p.is_relative_to(root) for p in made)
    assert len(set(made)) == len(made)
    assert "/" not in paths.calibration_file("a/b c").name


def test_the_data_cache_may_live_elsewhere(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RECNAS_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("RECNAS_CACHE_DIR", str(tmp_path / "shared-cache"))
    assert paths.data_cache_dir() == (tmp_path / "shared-cache").resolve()


def test_a_file_where_the_runs_folder_goes_is_named(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "taken").write_text("")
    monkeypatch.setenv("RECNAS_RUNS_DIR", str(tmp_path / "taken" / "runs"))
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        paths.runs_dir()
