"""`python -m selfplay COMMAND ...`: the `c4fast` front door where the console script is
not on PATH (e.g. a --user install)."""

import sys

from selfplay.cli import main

sys.exit(main())
