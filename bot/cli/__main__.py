"""`python -m bot.cli`: the same as the `krill` console script."""

import sys

from bot.cli import main

sys.exit(main())
