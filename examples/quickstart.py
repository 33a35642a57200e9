"""Quick start: take a lease, write with its token; a holder that paused is refused.

Run: python examples/quickstart.py
"""

import tempfile
import time
from pathlib import Path

import fencing

fence = fencing.MemoryFence("report", ttl=0.2)  # one process; see cache_fill.py for many
store = fencing.FileStore(Path(tempfile.mkdtemp()) / "report.txt")

token = fence.acquire()  # the lease, and a token larger than any before
store.write(b"first draft", token)  # the store remembers the highest token it accepted
print(f"wrote with token {token:d}")

time.sleep(0.3)  # we "pause" past the TTL: the lease expires behind our back

newer = fence.acquire()  # someone else takes the lease: token + 1
store.write(b"their version", newer)
print(f"another holder wrote with token {newer:d}")

try:
    store.write(b"our late write", token)  # we wake up and write with the old token
except fencing.StaleTokenError as error:
    print(f"rejected: {error}")

print(f"the file holds {store.read()!r} (token {store.token})")
