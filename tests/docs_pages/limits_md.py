# Generated from docs/limits.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

# docs/limits.md:13

import fencing

backend = fencing.connect()  # $FENCING_URL, else the embedded SQLite
workers = backend.semaphore("render", permits=3, ttl=30)
lanes = [fencing.FileStore(f"lane-{slot}.bin") for slot in range(3)]  # a store per slot

with workers.hold(timeout=60) as permit:  # acquire, renew every ttl/3, release
    print(permit.slot, permit.token)  # a slot of range(3), that slot's token
    lanes[permit.slot].write(b"frame 1", permit.token)

# docs/limits.md:245

import fencing


def call_partner() -> None:
    print("calling the partner's API")


backend = fencing.connect()  # $FENCING_URL (redis://localhost:6379/0, ...), else SQLite
api = backend.limiter("partner-api", limit=5, per=1.0, window="sliding")

if api.try_acquire():  # one round trip, never waits: "go" or "sorry"
    call_partner()

api.acquire(timeout=10)  # waits for an admission, then returns it
call_partner()
