"""``python -m nas.cli``."""

import sys

from nas.cli import entry

sys.exit(entry())
