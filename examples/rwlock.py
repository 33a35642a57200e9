"""Read-write locks whose readers are fenced too (docs/rwlock.md).

Readers holding together share one token, the read epoch; a writer gets a newer one.
A reader paused past its lease claims the resource before it reads, and is refused
once a writer has claimed: it never reads a write half done.
"""

from __future__ import annotations

import time

import fencing

issuer = fencing.MemoryIssuer()  # fencing.connect(url) for Redis or SQL: the same calls
catalog: list[str] = []
mark = fencing.MemoryMark()  # the catalog's high-water mark
publish = fencing.guard(catalog.append, mark=mark)

writer = issuer.rwlock("catalog", ttl=30).write
with writer.hold() as token:
    publish(token, "first edition")

slow = issuer.rwlock("catalog", ttl=0.2).read  # a reader about to pause
epoch = slow.acquire()
with issuer.rwlock("catalog", ttl=30).read.hold() as also:
    print(f"readers share the read epoch {int(epoch)}: {int(also) == int(epoch)}")
    try:
        writer.acquire(timeout=0)
    except fencing.AcquireTimeout:
        print("a writer waits while readers read")

time.sleep(0.3)  # the slow reader pauses past its lease (GC, swap, SIGSTOP)
token = writer.acquire(timeout=5)
print(f"the writer got token {int(token)} once the paused reader's lease expired")
mark.claim(token)
publish(token, "second edition")
try:
    mark.claim(epoch)  # the paused reader wakes and claims before it reads
    print("the paused reader read", catalog)
except fencing.StaleTokenError:
    print(f"the paused reader's claim with {int(epoch)} was refused: the catalog moved on")
writer.release(token)
