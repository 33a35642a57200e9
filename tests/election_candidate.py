"""A process of ``test_election_processes``: a candidate, or an observer, of an election.

``python election_candidate.py candidate URL NAME VALUE STORE TTL``: campaigns; once
elected prints ``leading <token>``; prints ``lost`` when its ``on_lost`` runs; for
each line ``write`` read on stdin writes VALUE to the ``FileStore`` STORE with its term
token and prints ``wrote`` or ``refused``.

``python election_candidate.py observer URL NAME``: prints ``leader <value> <token>``
(or ``leader - -``) for each change ``observe()`` reports; it polls only every 600 s,
so what it reports in a test's time came through Redis' keyspace notifications.
"""

from __future__ import annotations

import sys

import fencing


def candidate(url: str, name: str, value: str, store: str, ttl: str) -> None:
    term = fencing.connect(url).election(name, ttl=float(ttl)).campaign(value)
    print(f"leading {int(term.token)}", flush=True)
    term.on_lost(lambda error: print("lost", flush=True))  # in the renewal thread
    target = fencing.FileStore(store)
    for line in sys.stdin:
        if line.strip() == "write":
            try:
                target.write(value.encode(), term.token)
            except fencing.StaleTokenError:
                print("refused", flush=True)
            else:
                print("wrote", flush=True)


def observer(url: str, name: str) -> None:
    for leader in fencing.connect(url).election(name).observe(poll=600):
        shown = "- -" if leader is None else f"{leader.value} {int(leader.token)}"
        print(f"leader {shown}", flush=True)


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    candidate(*args) if role == "candidate" else observer(*args)
