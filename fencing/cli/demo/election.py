"""``fencing demo --election``: a leader frozen past its term, and its write refused.

Three candidate processes campaign in one election (on ``fencing.connect(url)``: the
embedded SQLite default, or any other backend). Candidate 1 campaigns first and leads;
it reads the guarded SQL row (the demo's ``SqlRow``) and waits for the controller's word
to write its "last run". The controller (this process) freezes it with SIGSTOP first,
then sends the word. The term's lease runs out, another candidate is elected with a
higher term token and writes its "last run" through the row's guard. The controller
resumes candidate 1 (SIGCONT): it writes with its old term token and the guard refuses
it, and its renewer finds the term lost (``on_lost``). ``election.leader()``, asked by
the controller (any process may ask), shows each leader.

The pause is placed, not hoped for: candidate 1 writes only once the word arrives, and
the word is sent after the SIGSTOP, so the pause always falls between its read and its
write. Of the other two only the first elected writes: on a loaded machine its renewer
may stall past its own term too, and the third is elected in turn; that one resigns
unwritten (a one-shot ``first`` lock between the two), so the row ends with the first
new leader's run whatever the timing, and the controller waits for no event that a
lost term would skip. On SQLite the controller also checks that the frozen process
holds no lock on the issuer's file (a renewal caught mid-transaction): if it does, it
resumes it for a moment and freezes it again, so the others can be elected.

Imports the public package and the demo's storage and timeline helpers.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .run import DemoEvent, _Controller, _Reporter

DEMO_ELECTION = "fencing-demo-election"
CANDIDATES = ("candidate 1", "candidate 2", "candidate 3")
OLD = CANDIDATES[0]
OTHERS = CANDIDATES[1:]


@dataclass
class ElectionResult:
    """What happened: the events, the terms, and the row as the storage kept it."""

    url: str
    ttl: float
    events: list[DemoEvent] = field(default_factory=list)
    #: candidate -> its term token (``tokens`` is what ``_Controller`` fills)
    tokens: dict[str, int] = field(default_factory=dict)
    new_leader: str = ""
    final_text: str = ""
    final_token: int = 0

    def _saw(self, who: str, kind: str) -> bool:
        return any(e.who == who and e.kind == kind for e in self.events)

    @property
    def as_expected(self) -> bool:
        new = self.new_leader
        return (
            new in OTHERS
            and self.tokens.get(new, 0) > self.tokens.get(OLD, self.tokens.get(new, 0))
            and self._saw(new, "write-ok")
            and self._saw(OLD, "write-rejected")
            and self._saw(OLD, "lost")
            and self.final_token == self.tokens[new]
        )


class _LockedReporter(_Reporter):
    """A candidate's reporter: its renewal thread (``on_lost``) reports too."""

    def __init__(self, pipe: Any, who: str) -> None:
        super().__init__(pipe, who)
        self._lock = threading.Lock()

    def __call__(self, kind: str, text: str, token: int | None = None) -> None:
        with self._lock:
            super().__call__(kind, text, token)


def _candidate(
    who: str,
    url: str | None,
    row_url: str,
    ttl: float,
    go: Any,
    stop: Any,
    resign: Any,
    first: Any,
    word: Any,
    pipe: Any,
) -> None:
    """Campaign; once leading, read the row, (candidate 1: wait for the word,) write
    the "last run" with the term token, then hand over or stop. Of the others only the
    first elected writes (it takes ``first`` and keeps it); a later one resigns."""
    import fencing

    from .storage import SqlRow

    logging.getLogger("fencing").setLevel(logging.ERROR)  # the timeline says it all
    report = _LockedReporter(pipe, who)
    try:
        row = SqlRow(row_url, fenced=True)
        election = fencing.connect(url).election(DEMO_ELECTION, ttl=ttl)
        go.wait(30)
        report("info", "campaigns")
        term = None
        while term is None:
            if stop.is_set():
                report("release", "stops campaigning: the demo is over")
                row.close()
                return
            try:
                term = election.campaign(who.replace(" ", "-"), timeout=ttl)
            except fencing.AcquireTimeout:
                continue
        token = int(term.token)
        term.on_lost(lambda error: report("lost", f"on_lost: its term {token} is over", token))
        report("acquire", f"is elected leader: term {token} (ttl {ttl:g}s)", token)
        if who != OLD and not first.acquire(block=False):
            term.resign()
            report("release", f"resigns term {token}: the last run is written", token)
            row.close()
            return
        seen = row.read()
        report("read", f"reads {seen!r}; runs the job", token)
        if who == OLD and not word.poll(60):  # the controller freezes it before the word
            raise TimeoutError("no word from the controller")
        try:
            row.write(f"last run by {who} in term {token}", token)
        except fencing.StaleTokenError as error:
            report(
                "write-rejected",
                f"writes its last run with term {token}: REJECTED, term {error.current} "
                "was already accepted",
                token,
            )
            found = term.wait_lost(30)
            term.resign()  # a lost term has nothing to hand over
            report("release", f"stops leading (term found lost: {found})", token)
        else:
            report("write-ok", f"writes its last run with term {token}: accepted", token)
            resign.wait(60)
            term.resign()
            report("release", f"resigns term {token}", token)
        row.close()
    except Exception as error:  # report, so the controller does not wait for ever
        report("error", f"failed: {type(error).__name__}: {error}")


def _sqlite_path(url: str) -> str | None:
    """The file of a ``sqlite:///`` issuer URL, else None."""
    prefix = "sqlite:///"
    return url[len(prefix) :] if url.startswith(prefix) else None


def _holds_a_lock(path: str | None) -> bool:
    """Whether some process holds a lock on the SQLite file (EXCLUSIVE cannot be had)."""
    if path is None:
        return False
    try:
        with sqlite3.connect(path, timeout=0, isolation_level=None) as db:
            db.execute("BEGIN EXCLUSIVE")
            db.execute("ROLLBACK")
    except sqlite3.OperationalError:
        return True
    return False


def run_election_demo(url: str | None = None, *, ttl: float = 1.0) -> ElectionResult:
    """Play the scenario once and return its timeline (the caller prints it)."""
    import fencing

    from .storage import SqlRow

    backend = fencing.connect(url)
    shown_url = str(getattr(backend, "url", url))
    election = backend.election(DEMO_ELECTION, ttl=ttl)
    row_url = SqlRow.create()
    result = ElectionResult(url=shown_url, ttl=ttl)
    context = multiprocessing.get_context("fork")
    pipes = {who: context.Pipe(duplex=False) for who in CANDIDATES}
    words = context.Pipe(duplex=False)  # to candidate 1: "write now"
    go_first, go_others = context.Event(), context.Event()
    stop, resign = context.Event(), context.Event()
    first = context.Lock()  # taken by the first of the others elected, never given back
    processes = {}
    for who in CANDIDATES:
        go = go_first if who == OLD else go_others
        args = (who, url, row_url, ttl, go, stop, resign, first, words[0], pipes[who][1])
        processes[who] = context.Process(target=_candidate, args=args)
    for process in processes.values():
        process.start()
    for _, sender in pipes.values():
        sender.close()
    readers = [reader for reader, _ in pipes.values()]
    control = _Controller(readers, result, timeout=60)  # type: ignore[arg-type]
    frozen = processes[OLD]
    assert frozen.pid is not None
    try:
        control.note("info", "starts three candidate processes in one election; one row")
        go_first.set()
        control.wait_for(OLD, "read")
        go_others.set()
        for who in OTHERS:
            _seen(control, result, who, "info")
        _note_leader(control, election)
        _freeze(control, frozen.pid, _sqlite_path(shown_url))
        words[1].send(b"write")  # it reads this only when resumed
        control.wait_for(OTHERS, "acquire")
        _note_leader(control, election)
        writer = _seen(control, result, OTHERS, "write-ok").who
        result.new_leader = writer
        control.note("resume", f"SIGCONT {OLD}: it wakes up believing it leads")
        os.kill(frozen.pid, signal.SIGCONT)
        _seen(control, result, OLD, "release")
        _seen(control, result, OLD, "lost")
        stop.set()  # the third candidate stops campaigning (or has resigned unwritten)
        _seen(control, result, next(who for who in OTHERS if who != writer), "release")
        resign.set()
        _seen(control, result, writer, "release")
        _note_leader(control, election)
    finally:
        for process in processes.values():
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signal.SIGCONT)
            stop.set()
            resign.set()
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()
    row = SqlRow(row_url, True)
    result.final_text, result.final_token = row.final()
    row.close()
    return result


def _seen(
    control: _Controller, result: ElectionResult, who: str | tuple[str, ...], kind: str
) -> DemoEvent:
    """The first event ``kind`` of ``who`` (one name, or any of several): already
    reported (read while waiting for another event: the candidates report in any
    order), or the next."""
    whos = (who,) if isinstance(who, str) else who
    seen = next((e for e in result.events if e.who in whos and e.kind == kind), None)
    return seen if seen is not None else control.wait_for(whos, kind)


def _note_leader(control: _Controller, election: Any) -> None:
    leader = election.leader()
    shown = "nobody" if leader is None else f"{leader.value}, term {leader.token:d}"
    control.note("info", f"election.leader() from another process: {shown}")


def _freeze(control: _Controller, pid: int, sqlite_file: str | None) -> None:
    """SIGSTOP ``pid`` at a moment it holds no lock on the issuer's SQLite file."""
    for attempt in range(1000):
        os.kill(pid, signal.SIGSTOP)
        _until_stopped(pid)  # SIGSTOP is delivered asynchronously
        if not _holds_a_lock(sqlite_file):
            break
        os.kill(pid, signal.SIGCONT)  # frozen mid-transaction: let it finish, try again
        time.sleep(min(0.1, 0.01 * (attempt + 1)))
    control.note("pause", f"SIGSTOP {OLD} (pid {pid}) past its term: a long GC pause")


def _until_stopped(pid: int, timeout: float = 30.0) -> None:
    """Return once ``pid`` is stopped (its state in ``/proc`` is ``T``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                    return
        except OSError:  # no /proc: give the signal a moment instead
            time.sleep(0.05)
            return
        time.sleep(0.001)
    raise TimeoutError(f"process {pid} did not stop")


def format_election(result: ElectionResult) -> str:
    """The readable timeline: relative times, who, what; then the verdict."""
    start = result.events[0].at if result.events else 0.0
    lines = [
        f"fencing demo --election: three candidates, terms (ttl {result.ttl:g}s) issued "
        f"by {result.url}",
        "storage: one SQL row (demo_notes, id=1); each leader writes its last run with "
        "its term token, and the row's UPDATE checks it",
        "",
    ]
    for event in sorted(result.events, key=lambda e: e.at):
        marker = "  <-- stale leader" if event.kind == "write-rejected" else ""
        lines.append(f"  {event.at - start:6.3f}s  {event.who:<11}  {event.text}{marker}")
    lines.append("")
    lines.append(f"the row holds: {result.final_text!r} (fence_token {result.final_token})")
    old, new = result.tokens.get(OLD), result.tokens.get(result.new_leader)
    if result.as_expected:
        lines.append(
            f"fencing worked: {OLD} woke up believing it led and wrote with term {old}, "
            f"but the row had accepted term {new} from {result.new_leader}, so the "
            "write was refused."
        )
    else:
        lines.append("unexpected outcome: the pause did not happen as planned")
    return "\n".join(lines)
