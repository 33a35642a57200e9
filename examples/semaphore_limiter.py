"""A semaphore whose permits are fenced slots, and a rate limiter that says "go" or
"sorry": the timeline of docs/limits.md, on the memory issuer (one process, no server).

Run: python examples/semaphore_limiter.py
"""

import tempfile
from pathlib import Path

import fencing

issuer = fencing.MemoryIssuer()  # fencing.connect(url) gives the same on Redis, SQL, ...

# -- Semaphore: 2 permits, each a slot with its own tokens, each slot owning a lane --
renders = issuer.semaphore("render", permits=2, ttl=60)
lanes = [fencing.FileStore(Path(tempfile.mkdtemp()) / f"lane{k}") for k in range(2)]

a = renders.acquire()
b = renders.acquire()
print(f"A holds slot {a.slot} (token {a.token:d}), B holds slot {b.slot} (token {b.token:d})")
lanes[a.slot].write(b"frame 1 by A", a.token)
try:
    renders.acquire(timeout=0)
except fencing.AcquireTimeout:
    print("a third worker gave up: both permits are held")

# A renews for the last time (for 0.2 s), then pauses past that: its slot expires and
# the waiting worker C takes it over. (hold() renews in the background; a paused
# process renews nothing.)
renders.renew(a, ttl=0.2)
c = renders.acquire(timeout=30)
print(f"C got A's slot {c.slot} with token {c.token:d} once A's lease expired")
lanes[c.slot].write(b"frame 2 by C", c.token)
try:
    lanes[a.slot].write(b"late frame by A", a.token)  # A wakes up and writes
except fencing.StaleTokenError as error:
    print(f"A's late write refused: {error}")
lanes[b.slot].write(b"frame 2 by B", b.token)  # the other slot's tokens never moved
print("B, a long holder of the other slot, still writes to its lane")
renders.release(b)
renders.release(c)

# -- Rate limiter: "go" or "sorry", decided on the issuer's clock --------------------
api = issuer.limiter("partner-api", limit=3, per=30.0, window="sliding")
print("try_acquire x4:", [api.try_acquire() for _ in range(4)])  # never waits
print(f"in use: {api.use().used} of 3")
try:
    api.acquire(timeout=0.5)  # nothing frees within 0.5 s: "sorry" at once, no waiting
except fencing.AcquireTimeout:
    print("sorry: nothing frees within 0.5 s")

# When the window is almost over, wait a little and say "go" instead of "sorry".
burst = issuer.limiter("burst", limit=1, per=0.2, window="fixed")
burst.try_acquire()
admission = burst.acquire(timeout=5)  # sleeps until the window ends (the reply says when)
print(f"go: admitted={admission.admitted} once the 0.2 s window ended")
