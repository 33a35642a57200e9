"""Elections with real processes (issue 22's proof): three candidates on one Redis, the
leader frozen with SIGSTOP past its term, another elected with a higher token; the old
leader, resumed, is told its term is lost (``on_lost``) and its guarded write is refused;
an observer process saw both terms, in order.

Nothing here asserts a time: every step waits for a condition, with a generous deadline.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from waiting import PATIENCE, joined, wait_until

from fencing.testing.servers import RedisServer

SCRIPT = Path(__file__).resolve().parent / "election_candidate.py"
#: Seconds: the first leader's ttl, renewed every ttl/3 (only a stall of 4/3 s loses
#: it). It is frozen until another is elected, so however slow
#: the machine, the freeze outlasts it.
TTL = 2.0
#: Seconds: the other candidates' ttl, long enough that a stalled renewer never loses one.
LONG_TTL = 60.0


class Process:
    """A process of election_candidate.py whose output lines are read into a queue."""

    def __init__(self, *args: str) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, str(SCRIPT), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.unclaimed: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.put(line.strip())

    def next_line(self, timeout: float = PATIENCE) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no output within {timeout}s (so far: {self.seen})") from None
        self.seen.append(line)
        return line

    def expect(self, wanted: str) -> None:
        """Read until the line ``wanted`` (lines read meanwhile are kept for a later
        ``expect``: a term lost early may say ``lost`` before a write's answer)."""
        while wanted not in self.unclaimed:
            self.unclaimed.append(self.next_line())
        self.unclaimed.remove(wanted)

    def poll_line(self) -> str | None:
        try:
            line = self.lines.get_nowait()
        except queue.Empty:
            return None
        self.seen.append(line)
        return line

    def send(self, line: str) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(line + "\n")
        self.popen.stdin.flush()

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGCONT)  # in case it is still frozen
            self.popen.kill()
        self.popen.wait(PATIENCE)
        joined(self.reader)  # it reads until the end of the output
        for pipe in (self.popen.stdin, self.popen.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        process.stop()


def test_a_frozen_leader_is_replaced_told_and_refused(
    redis_server: RedisServer, processes: list[Process], tmp_path: Path
) -> None:
    url, name, store = redis_server.url, f"election:{uuid.uuid4().hex}", str(tmp_path / "s")

    def start(*args: str) -> Process:
        processes.append(Process(*args))
        return processes[-1]

    observer = start("observer", url, name)
    assert observer.next_line() == "leader - -"
    first = start("candidate", url, name, "a", store, str(TTL))
    first_token = int(first.next_line().split()[1])
    others = [start("candidate", url, name, value, store, str(LONG_TTL)) for value in "bc"]
    first.send("write")
    first.expect("wrote")
    assert observer.next_line() == f"leader a {first_token}"  # seen before the freeze

    os.kill(first.popen.pid, signal.SIGSTOP)  # frozen until another leader is elected
    new: Process | None = None

    def elected() -> bool:
        nonlocal new
        for process in others:
            line = process.poll_line()
            if line is not None and line.startswith("leading"):
                new = process
        return new is not None

    wait_until(elected, "another candidate elected after the leader froze")
    assert new is not None
    new_token = int(new.seen[-1].split()[1])
    assert new_token > first_token, f"term {new_token} after {first_token}"
    new.send("write")
    new.expect("wrote")

    os.kill(first.popen.pid, signal.SIGCONT)
    first.expect("lost")  # its on_lost ran
    first.send("write")
    first.expect("refused")  # its write with the old term's token

    value = "b" if new is others[0] else "c"
    line = observer.next_line()
    if line == "leader - -":  # seen between the two terms: a real change too
        line = observer.next_line()
    assert line == f"leader {value} {new_token}", f"observer saw {observer.seen}"
