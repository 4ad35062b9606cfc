"""``nas.core.disk.new_file``: a file the user named appears whole or not at all, and never
over a file already there."""

from __future__ import annotations

from pathlib import Path

import pytest

from nas.core.disk import new_file
from nas.core.errors import NasError


def test_a_new_file_takes_its_name_only_when_complete(tmp_path: Path) -> None:
    path = tmp_path / "made" / "scores.jsonl"
    with new_file(path) as tmp:
        tmp.write_text("a\n")
        assert not path.exists()  # not named while it is written
    assert path.read_text() == "a\n" and sorted(p.name for p in tmp_path.rglob("*")) == [
        "made",
        "scores.jsonl",
    ]


def test_a_failed_write_leaves_nothing_and_a_file_made_meanwhile_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "scores.jsonl"
    with pytest.raises(ValueError), new_file(path) as tmp:
        tmp.write_text("half")
        raise ValueError("the writer failed")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(NasError, match="was made while it was written"), new_file(path) as tmp:
        tmp.write_text("mine")
        path.write_text("theirs")
    assert path.read_text() == "theirs" and list(tmp_path.iterdir()) == [path]
