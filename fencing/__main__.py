"""``python -m fencing``: the ``fencing`` command line."""

import sys

from .cli import main

sys.exit(main())
