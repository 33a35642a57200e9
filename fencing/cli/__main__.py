"""``python -m fencing.cli``: the ``fencing`` command line."""

import sys

from . import main

sys.exit(main())
