"""``fencing demo``: Kleppmann's pause scenario with real processes and a real SIGSTOP.

Two client processes share one fence (on ``fencing.connect(url)``: the embedded SQLite
default, or Redis/PostgreSQL) and one guarded resource (``storage``): a SQL row (a
``FencedMixin`` table in a temporary SQLite file) or, with ``http=True``, an item of an
HTTP service that the controller runs (``fencing.http.FenceMiddleware``). The
controller (this process) freezes client 1 with SIGSTOP between its read and its
write, for longer than the lease; client 2 takes the lease and writes; the controller
resumes client 1 with SIGCONT and client 1 writes with its old token. The guard (the
row's UPDATE, or the service) refuses it. ``fenced=False`` writes without the guard,
and client 2's update is lost.

Every process reports what it does to a queue; ``time.monotonic`` is one system-wide
clock on Linux, so the events of all processes merge into one timeline.

Imports the public package and the demo's storage (``fencing.sql`` and SQLAlchemy; for
``http``, Starlette, uvicorn and httpx).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time
from dataclasses import dataclass, field
from multiprocessing import connection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .storage import Service

DEMO_FENCE = "fencing-demo"
DEFAULT_TTL = 1.0


@dataclass(frozen=True)
class DemoEvent:
    """One line of the timeline. ``kind`` drives the picture: acquire, expire, pause,
    resume, write-ok, write-rejected, write-lost, release, info."""

    at: float
    who: str
    kind: str
    text: str
    token: int | None = None


@dataclass
class DemoResult:
    """What happened: the events, and the row as the storage kept it."""

    fenced: bool
    url: str
    ttl: float
    #: The resource is an item of an HTTP service, not a SQL row.
    http: bool = False
    events: list[DemoEvent] = field(default_factory=list)
    final_text: str = ""
    final_token: int = 0
    tokens: dict[str, int] = field(default_factory=dict)

    @property
    def stale_write_rejected(self) -> bool:
        return any(e.kind == "write-rejected" for e in self.events)

    @property
    def lost_update(self) -> bool:
        """Client 2's accepted update was overwritten by client 1's stale one."""
        return "client 1" in self.final_text and "client 2" not in self.final_text

    @property
    def as_expected(self) -> bool:
        if self.fenced:
            return self.stale_write_rejected and self.final_text.endswith(
                f"client 2 wrote with token {self.tokens.get('client 2')}"
            )
        return self.lost_update


# -- the two clients (run in child processes) --------------------------------------------


class _Reporter:
    """Sends a client's events down its own pipe.

    One pipe per client, never a shared ``multiprocessing.Queue``: a queue's writers
    share a lock, and a client frozen by SIGSTOP while holding it would silence the other.
    """

    def __init__(self, pipe: Any, who: str) -> None:
        self.pipe, self.who = pipe, who

    def __call__(self, kind: str, text: str, token: int | None = None) -> None:
        self.pipe.send(DemoEvent(time.monotonic(), self.who, kind, text, token))


def _client(
    who: str,
    url: str | None,
    storage: tuple[str, str],
    ttl: float,
    fenced: bool,
    go: Any,
    pipe: Any,
    work: float,
) -> None:
    """Acquire, read the resource, prepare the write (``work`` seconds), write, release."""
    import fencing

    from .storage import open_storage

    logging.getLogger("fencing").setLevel(logging.ERROR)  # the timeline says it all
    report = _Reporter(pipe, who)
    try:
        resource = open_storage(*storage, fenced)
        fence = fencing.connect(url).fence(DEMO_FENCE, ttl=ttl)
        go.wait(30)
        token = fence.acquire(timeout=10)
        report("acquire", f"acquires the lease: token {token:d} (ttl {ttl:g}s)", int(token))
        seen = resource.read()
        report("info", f"reads {seen!r}; prepares its update", int(token))
        text = f"{seen}; {who} wrote with token {token:d}"  # read-modify-write
        time.sleep(work)  # the controller may freeze us here, between read and write
        try:
            resource.write(text, int(token))
        except fencing.StaleTokenError as error:
            report(
                "write-rejected",
                f"writes with token {token:d}: REJECTED, token {error.current} "
                "was already accepted",
                int(token),
            )
        else:
            report("write-ok", f"writes with token {token:d}: accepted", int(token))
        try:
            fence.release(token)
            report("release", f"releases token {token:d}", int(token))
        except fencing.LeaseLost:
            report("release", f"releases token {token:d}: the lease was already lost", int(token))
        resource.close()
    except Exception as error:  # report, so the controller does not wait for ever
        report("error", f"failed: {type(error).__name__}: {error}")


# -- the controller -------------------------------------------------------------------------


class _Controller:
    def __init__(self, pipes: list[Any], result: DemoResult, timeout: float) -> None:
        self.pipes = pipes
        self.result = result
        self.deadline = time.monotonic() + timeout

    def note(self, kind: str, text: str, who: str = "demo", token: int | None = None) -> None:
        self.result.events.append(DemoEvent(time.monotonic(), who, kind, text, token))

    def wait_for(self, who: str | tuple[str, ...], kind: str) -> DemoEvent:
        """The next event ``kind`` of ``who`` (one name, or any of several)."""
        whos = (who,) if isinstance(who, str) else who
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                seen = "; ".join(f"{e.who} {e.text}" for e in self.result.events)
                raise TimeoutError(f"the demo did not see {who} {kind} (saw: {seen})")
            for pipe in connection.wait(self.pipes, timeout=left):
                try:
                    event: DemoEvent = pipe.recv()  # type: ignore[union-attr,call-arg,assignment]
                except EOFError:
                    self.pipes.remove(pipe)
                    continue
                self.result.events.append(event)
                if event.kind == "error":
                    raise RuntimeError(f"{event.who} {event.text}")
                if event.token is not None and event.kind == "acquire":
                    self.result.tokens[event.who] = event.token
                if event.who in whos and event.kind == kind:
                    return event


def run_demo(
    url: str | None = None, *, fenced: bool = True, ttl: float = DEFAULT_TTL, http: bool = False
) -> DemoResult:
    """Play the scenario once and return its timeline (the caller prints or plots it).

    The fence comes from ``fencing.connect(url)``; ``http`` puts the resource behind an
    HTTP service instead of in a SQL row."""
    import fencing

    from .storage import Service, SqlRow

    backend = fencing.connect(url)
    shown_url = getattr(backend, "url", str(url))
    if http:  # the service runs here: its refusals are in the timeline, not the log
        logging.getLogger("fencing").setLevel(logging.ERROR)
    service = Service(fenced) if http else None  # started by _play, once it has forked
    storage = ("http", service.url) if service is not None else ("sql", SqlRow.create())
    result = DemoResult(fenced=fenced, url=shown_url, ttl=ttl, http=http)
    try:
        _play(result, url, storage, fenced, ttl, service)
    finally:
        if service is not None:
            service.close()
    if service is not None:
        result.final_text, result.final_token = service.final()
    else:
        row = SqlRow(storage[1], fenced)
        result.final_text, result.final_token = row.final()
        row.close()
    _mark_lost_update(result)
    return result


def _play(
    result: DemoResult,
    url: str | None,
    storage: tuple[str, str],
    fenced: bool,
    ttl: float,
    service: Service | None,
) -> None:
    """Run the two clients against ``storage`` and direct the pause.

    The clients are forked while this process has one thread, and ``service``'s thread
    starts after: a child forked while another thread holds a lock (an import's, a
    stream's, the event loop's) would wait on it for ever."""
    context = multiprocessing.get_context("fork")
    pipes = {who: context.Pipe(duplex=False) for who in ("client 1", "client 2")}
    go1, go2 = context.Event(), context.Event()
    # Client 1 would write 0.3 s after its read, well within its lease: the SIGSTOP
    # comes first, so what makes it late is the pause alone.
    prepare = min(0.3, ttl / 3)
    clients = {
        "client 1": context.Process(
            target=_client,
            args=("client 1", url, storage, ttl, fenced, go1, pipes["client 1"][1], prepare),
        ),
        "client 2": context.Process(
            target=_client,
            args=("client 2", url, storage, ttl, fenced, go2, pipes["client 2"][1], prepare),
        ),
    }
    for process in clients.values():
        process.start()
    for _, sender in pipes.values():
        sender.close()  # the children hold the sending ends
    control = _Controller([reader for reader, _ in pipes.values()], result, timeout=30)
    frozen = clients["client 1"]
    try:
        if service is not None:
            service.start()
        shared = "one HTTP service's item" if result.http else "one row"
        control.note("info", f"starts two client processes sharing one fence and {shared}")
        go1.set()
        control.wait_for("client 1", "info")  # client 1 has read the row
        assert frozen.pid is not None
        os.kill(frozen.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        control.note("pause", f"SIGSTOP client 1 (pid {frozen.pid}): a long GC pause")
        acquired = next(e for e in result.events if e.who == "client 1" and e.kind == "acquire")
        time.sleep(max(0.0, acquired.at + ttl - time.monotonic()))
        control.note("expire", "client 1's lease expires; client 1 is frozen and does not know")
        time.sleep(0.05 * ttl + 0.05)
        go2.set()
        control.wait_for("client 2", "release")
        time.sleep(prepare / 2)  # a gap, so the picture shows the order plainly
        # noted before it is sent: client 1's write, the instant it resumes, comes after
        control.note("resume", f"SIGCONT client 1 after {time.monotonic() - stopped:.2f}s frozen")
        os.kill(frozen.pid, signal.SIGCONT)
        control.wait_for("client 1", "release")
    finally:
        for process in clients.values():
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signal.SIGCONT)
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()


def _mark_lost_update(result: DemoResult) -> None:
    if result.fenced or not result.lost_update:
        return
    for index, event in enumerate(result.events):
        if event.who == "client 1" and event.kind == "write-ok":
            result.events[index] = DemoEvent(
                event.at,
                event.who,
                "write-lost",
                f"writes with token {event.token}: accepted OVER token "
                f"{result.tokens['client 2']}: client 2's update is LOST",
                event.token,
            )


# -- the timeline -----------------------------------------------------------------------


def format_timeline(result: DemoResult) -> str:
    """The readable timeline: relative times, who, what; then the verdict."""
    start = result.events[0].at if result.events else 0.0
    from .storage import HttpItem, SqlRow

    storage = HttpItem.description if result.http else SqlRow.description
    guard = "the service" if result.http else "the row's UPDATE"
    mode = f"fenced: {guard} checks the token" if result.fenced else "UNFENCED: lock only"
    lines = [
        f"fencing demo: one lease (ttl {result.ttl:g}s) issued by {result.url}",
        f"storage: {storage}; {mode}",
        "",
    ]
    for event in sorted(result.events, key=lambda e: e.at):
        marker = {"write-rejected": "  <-- stale", "write-lost": "  <-- LOST UPDATE"}.get(
            event.kind, ""
        )
        lines.append(f"  {event.at - start:6.3f}s  {event.who:<8}  {event.text}{marker}")
    lines.append("")
    lines.extend(_leases(result, start))
    where = "the service holds" if result.http else "the row holds"
    lines.append(f"{where}: {result.final_text!r} (fence_token {result.final_token})")
    lines.append(_verdict(result))
    return "\n".join(lines)


def _leases(result: DemoResult, start: float) -> list[str]:
    """Who held which token when (by this machine's clock)."""
    lines = []
    for who, token in sorted(result.tokens.items()):
        began = next(e.at for e in result.events if e.who == who and e.kind == "acquire")
        ended = next((e for e in result.events if e.who == who and e.kind == "release"), None)
        if ended is not None and "lost" not in ended.text:
            until = f"{ended.at - start:.3f}s (released)"
        else:
            until = f"{began - start + result.ttl:.3f}s (expired; {who} did not know)"
        lines.append(f"{who} held token {token} from {began - start:.3f}s to {until}")
    return lines


def _verdict(result: DemoResult) -> str:
    t1, t2 = result.tokens.get("client 1"), result.tokens.get("client 2")
    if result.fenced and result.as_expected:
        return (
            f"fencing worked: client 1 woke up believing it held the lease and wrote with "
            f"token {t1}, but the {'service' if result.http else 'row'} had accepted token "
            f"{t2}, so the write was refused."
        )
    if not result.fenced and result.as_expected:
        return (
            f"without fencing, client 1's stale write (token {t1}) overwrote client 2's "
            f"(token {t2}): a lost update. Run without --unfenced to see the guard refuse it."
        )
    return "unexpected outcome: the pause did not happen as planned (a very loaded machine?)"
