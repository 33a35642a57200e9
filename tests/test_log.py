"""The ``fencing`` logger is a library's: a ``NullHandler``, so an application that
configured no logging gets nothing on stderr from it, and one that did gets its records.

Each case is a fresh interpreter (logging's configuration is the process's) in which a
guard refuses a stale token, the warning every stale write logs (``fencing.guard``).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

_STALE = """
import logging, sys
import fencing
{setup}
mark = fencing.MemoryMark()
mark.claim(5)
try:
    mark.claim(3)
except fencing.StaleTokenError:
    print("refused")
"""

#: What the application did to logging -> whether the warning reaches stderr.
CASES = {
    "nothing": ("", False),
    # the control: without the library's handler, the last resort prints the warning
    "nothing, handler removed": ('logging.getLogger("fencing").handlers.clear()', True),
    "basicConfig": ("logging.basicConfig()", True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_library_warning_reaches_stderr_only_through_the_apps_own_logging(case: str) -> None:
    setup, shown = CASES[case]
    done = subprocess.run(
        [sys.executable, "-c", _STALE.format(setup=setup)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == "refused\n"
    assert ("rejected stale token 3" in done.stderr) is shown, done.stderr
    if not shown:
        assert done.stderr == ""
