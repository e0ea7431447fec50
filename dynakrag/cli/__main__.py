"""``python -m dynakrag.cli``: the console script without installing it."""

import sys

from dynakrag.cli.main import main

sys.exit(main())
