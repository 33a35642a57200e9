# Generated from docs/observability.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

# docs/observability.md:113

import fencing.metrics

fencing.metrics.configure(names=True)
