"""Leader election whose term is a fence token: a deposed leader's late write is refused.

Run: python examples/election.py
"""

import tempfile
from pathlib import Path

import fencing

issuer = fencing.MemoryIssuer()  # one process here; across hosts: connect(url).election(...)
state = fencing.FileStore(Path(tempfile.mkdtemp()) / "last-run.txt")  # guarded by terms

election = fencing.Election(issuer, "scheduler", ttl=0.6)  # renewed every 0.2 s
old = election.campaign("host-a")
print(f"host-a leads with term {old.token:d}")
state.write(b"ran at 09:00 by host-a", old.token)

issuer.force_release("scheduler")  # host-a froze past its term (here: ended for it)
new = fencing.Election(issuer, "scheduler", ttl=0.6).campaign("host-b", timeout=5)
leader = election.leader()  # any process can ask
print(f"host-b leads with term {new.token:d}; leader() shows {leader and leader.value}")
state.write(b"ran at 09:01 by host-b", new.token)

try:
    state.write(b"ran at 09:01 by host-a", old.token)  # host-a wakes up and writes
except fencing.StaleTokenError as error:
    print(f"host-a refused: {error}")
print(f"host-a's term found lost: {old.wait_lost(timeout=30)}")
old.resign()  # nothing to hand over: a no-op
new.resign()  # hands over at once
print(f"the state: {state.read()!r}; leader now: {election.leader()}")
