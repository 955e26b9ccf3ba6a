"""``python -m cli``: the ``xdn`` command (what the console script runs)."""

import sys

from cli.main import main

sys.exit(main())
