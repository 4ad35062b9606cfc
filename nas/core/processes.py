"""Processes that end with the process that started them.

A child outlives its parent when the parent is killed by a signal it cannot catch (SIGKILL,
the kernel's out-of-memory killer): nothing in the parent runs to stop it. On Linux a child
asks the kernel for a signal when its parent ends (``PR_SET_PDEATHSIG``). Elsewhere (macOS)
a Python child watches instead: a thread that sees its parent's pid change (an orphan is
adopted by launchd or init) and signals its own process. A child that ``exec``s another
program (``preexec_fn``) has no such thread, so off Linux it still outlives a parent killed
so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WATCH_S = 1.0  # how often a watching child looks at its parent, off Linux


def end_with_parent(
    parent: int | None = None, sig: int = signal.SIGKILL, watch: bool = True
) -> None:
    """Have this process sent ``sig`` when its parent ends. With ``parent`` (the pid it
    was started by), a parent that already ended ends this process at once. ``watch``:
    off Linux, a thread watches the parent (False in a ``preexec_fn``, before an exec)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, sig)
        if parent is not None and os.getppid() != parent:
            os._exit(1)
    elif watch and parent is not None:
        watch_parent(parent, sig)


def watch_parent(parent: int, sig: int = signal.SIGKILL, every: float = WATCH_S) -> None:
    """A daemon thread that sends this process ``sig`` once its parent is no longer
    ``parent`` (ended: the child was adopted by another)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os.kill(os.getpid(), sig)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()
