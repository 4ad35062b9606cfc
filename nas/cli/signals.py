"""How the commands that run for long answer a supervisor's stop."""

from __future__ import annotations

import signal


def stop_on_sigterm() -> None:
    """From now on SIGTERM (``kill``, systemd, Docker, Kubernetes, a batch scheduler's
    preemption) stops the command as a second Ctrl-C does: ``KeyboardInterrupt`` at once, so
    a search is recorded as interrupted and ``nas resume`` continues it.

    Not Ray Tune's graceful stop (what a first Ctrl-C gets while candidates train): it stops
    the trials through Ray, and a supervisor's SIGTERM often reaches Ray's own processes
    too (systemd signals the whole group), which left the stop waiting a minute on a dead
    Ray before the process died, the search still marked running."""
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
