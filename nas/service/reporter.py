"""What a running search or retrain tells whoever watches it (the CLI's progress bars).

Its own module, light to import, so that the commands which only watch or read a search
(``nas list``, ``status``, ``pareto``) do not load the controller's Ray, Tune and torch.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nas.service.registry import Search, Trial
    from nas.service.summary import SearchSummary


class Reporter:
    """What the controller tells whoever watches (the CLI's progress bar); no-ops here."""

    def start(self, search: Search, total: int, done: int) -> None: ...

    def trial_started(self, trial: Trial) -> None: ...

    def trial_finished(self, trial: Trial, summary: SearchSummary) -> None: ...

    def trial_retried(self, trial: Trial, reason: str) -> None: ...

    def phase(self, name: str, total: int | None = None) -> None:
        """The search moved on: to its "setup jobs" (``total`` of them), or to its
        "stand-alone training" (``total``: candidates it will train in all)."""

    def job_started(self, job) -> None: ...

    def job_progress(self, name: str, phase: str, done: int, total: int) -> None: ...

    def job_finished(self, job, trial: Trial) -> None: ...

    def stop(self) -> None: ...

    def fatal(self, text: str) -> None:
        """What ended the search where no exception can carry it to the command (Ray died
        under it): said at once, on stderr; the process exits next."""
        print(f"error: {text}", file=sys.stderr, flush=True)
