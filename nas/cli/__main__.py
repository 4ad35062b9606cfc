"""``python -m nas.cli``."""

import sys

from nas.cli import main

sys.exit(main())
