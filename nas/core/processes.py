"""Processes that end with the process that started them.

A child outlives its parent when the parent is killed by a signal it cannot catch (SIGKILL,
the kernel's out-of-memory killer): nothing in the parent runs to stop it. On Linux a child
can ask the kernel for a signal when its parent ends (``PR_SET_PDEATHSIG``); elsewhere this
is a no-op, and such children outlive a parent killed so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def end_with_parent(parent: int | None = None, sig: int = signal.SIGKILL) -> None:
    """Have this process sent ``sig`` when its parent ends. With ``parent`` (the pid it
    was started by), a parent that already ended ends this process at once."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, sig)
    if parent is not None and os.getppid() != parent:
        os._exit(1)
