"""The layers hold: import-linter's contracts in pyproject.toml (no import from a lower layer
up to a higher one, no import loop between the modules of a package) pass on the tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOP_LEVEL = {"nas", "search_spaces", "blocks", "kernels", "workers", "dashboards"}


def test_the_contracts_cover_every_package() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert set(config["root_packages"]) == TOP_LEVEL
    (layers,) = [c for c in config["contracts"] if c["type"] == "layers"]
    named = {name.strip() for layer in layers["layers"] for name in layer.split("|")}
    for package in TOP_LEVEL - {"nas"}:
        assert package in named, f"{package} is in no layer"
    subpackages = {p.name for p in (REPO / "nas").iterdir() if (p / "__init__.py").exists()}
    assert {f"nas.{p}" for p in subpackages} <= named, "a nas subpackage is in no layer"
    (acyclic,) = [c for c in config["contracts"] if c["type"] == "acyclic_siblings"]
    assert set(acyclic["ancestors"]) == TOP_LEVEL


def test_lint_imports_passes() -> None:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert command, "import-linter is not installed (make setup installs it)"
    done = subprocess.run(
        [command, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:]
