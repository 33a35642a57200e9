"""Guard any function: it runs only for a token at least as new as any seen before.

Run: python examples/guard_callable.py
"""

import tempfile
from pathlib import Path

import fencing

ledger: list[str] = []


# A FileMark keeps the high-water mark in a file: shared by every process on this host.
@fencing.guard(mark=fencing.FileMark(Path(tempfile.mkdtemp()) / "ledger.mark"))
def append_entry(entry: str) -> None:
    ledger.append(entry)


append_entry(7, "paid invoice 42")  # the token comes first, then the function's arguments
append_entry(8, "refunded invoice 42")
try:
    append_entry(7, "paid invoice 42 (late retry)")  # a holder that lost its lease
except fencing.StaleTokenError as error:
    print(f"rejected: {error}")

print(f"ledger: {ledger}")
