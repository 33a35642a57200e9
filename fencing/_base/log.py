"""Loggers, one per operation, under the ``fencing`` logger so users can silence one.

``fencing.acquire``, ``fencing.renew``, ``fencing.release``, ``fencing.lost`` (a lease
found lost) and ``fencing.guard`` (stale rejections). The ``fencing`` logger has a
``NullHandler``, as a library's should: an application that configured no logging gets
nothing on stderr (Python's last-resort handler would print every warning there), and
one that did gets every record through its own handlers. Imports nothing from the
package.
"""

from __future__ import annotations

import logging

logger = logging.getLogger("fencing")
logger.addHandler(logging.NullHandler())
acquire_log = logger.getChild("acquire")
renew_log = logger.getChild("renew")
release_log = logger.getChild("release")
lost_log = logger.getChild("lost")
guard_log = logger.getChild("guard")
