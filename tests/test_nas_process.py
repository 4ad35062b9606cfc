"""The tests' forked `nas` commands (``tests/nas_process.py``) behave as the real script does:
the same output and exit code, whether the command succeeds or refuses bad input. (Signals:
the end-to-end tests stop forked searches with SIGINT, SIGTERM and SIGKILL.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import nas_process
from tests.test_search import REPO, env_for


@pytest.mark.parametrize(
    "args",
    [
        ["list"],  # nothing yet: says how to start
        ["submit", "no-such-search.yaml"],  # a user's error: exit 2, one paragraph
        ["train"],  # argparse's own refusal: exit 2 and its usage line
        ["blocks"],  # a table of every registered block
    ],
)
def test_a_forked_command_prints_and_exits_as_the_script_does(tmp_path: Path, args) -> None:
    done = {}
    for fork in (True, False):
        folder = tmp_path / ("forked" if fork else "plain")  # the same command, afresh
        env = env_for(folder / "runs") | {"RECNAS_CACHE_DIR": str(folder / "cache")}
        done[fork] = nas_process.run(args, env, REPO, timeout=300, fork=fork)
    assert done[True].returncode == done[False].returncode
    assert done[True].stdout == done[False].stdout
    assert done[True].stderr == done[False].stderr
