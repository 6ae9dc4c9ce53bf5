"""``python -m ordo`` is the same as the ``ordo`` command."""

import sys

from ordo.cli import main

sys.exit(main())
