"""The SQL issuers' operations as flows of named statements: no SQL, no driver, no I/O.

The issuer on the ``fencing_leases`` table runs in two places: ``fencing.sql`` (on a
SQLAlchemy connection) and ``fencing.django`` (on a Django cursor, for projects that
install neither SQLAlchemy nor Redis). What to ask, in which order, and what a reply
means is written once, here: each flow yields ``Execute`` steps that name a statement
(``STATEMENTS``) and give its parameters. A port turns the name into SQL and runs it:

- ``fencing.sql`` builds each statement once per dialect as a SQLAlchemy construct
  (``fencing.sql._issuer_statements``), the one source of the issuer's SQL;
- ``fencing.django`` runs the text of those very constructs compiled for SQLite and
  PostgreSQL, committed as ``fencing.django._sql`` by ``python -m fencing.sql._generate``
  (a test regenerates it and fails when the committed text is not current).

Why names and not SQL text here: the statements differ per dialect (PostgreSQL's
``greatest`` and ``clock_timestamp()``, SQLite's ``max`` and ``julianday``), SQLAlchemy
writes them best, and a core module imports no driver. Parameter names never repeat a
column's name: SQLAlchemy reads a parameter named after a column of an ``UPDATE``'s
table as a value to set.

``SqlFlows``: acquire (the clock-floored upsert, then a read of the time left when the
lease is taken), renew, release, status, names and force-release on ``fencing_leases``;
the rate limiters' ``admit`` and ``limit_use`` on ``fencing_admissions``. The module
docstring of ``fencing.sql._issuer`` tells each statement's decision; every flow runs in
one transaction that its issuer opens around it. ``FlowsIssuer`` is the blocking
issuer's calls on those flows, written once for ``fencing.sql`` and ``fencing.django``.

Imports the flow drivers' types, the issuer protocols' values and the limiter's results.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, get_args

from .._base.flow import Flow
from .._primitives.limiter import Admission, LimitUse
from ..issuer import READ, WRITE, Busy, FenceStatus, RWStatus

T = TypeVar("T")

#: The statements of the SQL issuers, by name, and each one's parameters (the database's
#: clock is read by the statements themselves, never given):
#:
#: - ``acquire``: ``fence`` (its name), ``holder_id``, ``ttl`` (s); returns the new
#:   token, or no row when the lease is held.
#: - ``lease_left``: ``fence``; the seconds left of its lease (no row: no such fence).
#: - ``renew``: ``fence``, ``lease_token``, ``holder_id``, ``ttl``; ``release``: ``fence``,
#:   ``lease_token``, ``holder_id``: one row changed when that exact lease was live.
#: - ``status`` and ``status_locked`` (``FOR UPDATE`` where the database has it):
#:   ``fence``; token, holder, seconds left, and whether the lease is live.
#: - ``names``: ``prefix`` (escaped for ``LIKE`` with ``/``, see ``like_prefix``).
#: - ``clear``: ``fence``, ``lease_token``, ``holder_id``: ends that lease, live or not.
#: - ``slot_lock``: ``group``; serializes the takes of the semaphore whose slots are the
#:   fences ``<group><k>`` to the transaction's end (PostgreSQL's transaction-level
#:   advisory lock of ``advisory_keys(group)``; SQLite's ``BEGIN IMMEDIATE`` already
#:   serializes every write, so there it reads nothing).
#: - ``slot_acquire``: ``fence``, ``holder_id``, ``ttl``, ``group``, ``first``, ``after``,
#:   ``permits``: ``acquire``, from a row that exists only while fewer than ``permits``
#:   other fences ``<group><k>`` are live; returns the new token, or no row.
#: - ``slot_left``: ``fence``; the seconds left of its lease if it is live (no row: it
#:   is free, and the slots of its semaphore are full).
#: - ``admit_lock``: ``limiter`` (its name), ``window`` (its kind); takes the limiter's
#:   lock row and returns the clock in µs, read once the row is locked.
#: - ``admit_expire``: ``limiter``, ``window``, ``before``: deletes the admissions at or
#:   before it. ``admit_reset``: ``limiter``, ``window``: deletes every admission.
#: - ``admit_window``: ``limiter``, ``window``; the first admission's time, the count,
#:   the last sequence number.
#: - ``admit_insert``: ``limiter``, ``window``, ``seq_no``, ``admitted_at``: one admission.
#: - ``admit_oldest``: ``limiter``, ``window``, ``skip``: the time of the admission after
#:   the ``skip`` oldest.
#: - ``clock``: the database's clock in µs. ``limit_use``: ``limiter``, ``window``,
#:   ``after``; how many admissions after ``after`` count, and the first one's time.
#: - the read-write locks' (``fencing_rw_leases``), each with ``fence`` (the lock's
#:   name): ``rw_touch`` makes the name's row in ``fencing_leases`` if missing;
#:   ``rw_lock`` locks it (to the transaction's end) and reads its counter;
#:   ``rw_expire`` deletes the lock's rows past their end; ``rw_rows``: each row's holder,
#:   mode, token and seconds left; ``rw_next``: the counter's next token (returned);
#:   ``rw_insert``: ``holder_id``, ``rw_mode``, ``lease_token``, ``ttl``; ``rw_drop``:
#:   ``holder_id``, its row whatever it holds; ``rw_renew`` (with ``ttl``) and
#:   ``rw_release``: ``holder_id``, ``rw_mode``, ``lease_token``, one row changed when
#:   that exact lease was live.
StatementName = Literal[
    "acquire",
    "lease_left",
    "renew",
    "release",
    "status",
    "status_locked",
    "names",
    "clear",
    "slot_lock",
    "slot_acquire",
    "slot_left",
    "admit_lock",
    "admit_expire",
    "admit_window",
    "admit_reset",
    "admit_insert",
    "admit_oldest",
    "clock",
    "limit_use",
    "rw_touch",
    "rw_lock",
    "rw_expire",
    "rw_rows",
    "rw_next",
    "rw_insert",
    "rw_drop",
    "rw_renew",
    "rw_release",
]

#: Every statement's name: what a port must know how to run.
STATEMENTS: tuple[StatementName, ...] = get_args(StatementName)

#: Seconds between a waiting read-write lock's attempts on SQL (nothing wakes it there):
#: a release is noticed this late at most, for one transaction per waiter per poll.
RW_POLL = 0.05

#: The escape character of ``names``'s ``LIKE`` pattern.
LIKE_ESCAPE = "/"


def like_prefix(prefix: str) -> str:
    """``prefix`` with ``LIKE``'s wildcards (and the escape itself) escaped by ``/``."""
    for char in (LIKE_ESCAPE, "%", "_"):
        prefix = prefix.replace(char, LIKE_ESCAPE + char)
    return prefix


@dataclass(frozen=True)
class Reply:
    """What a statement returned: the rows it changed, and the rows it returned."""

    rowcount: int
    rows: list[tuple[Any, ...]]


class Executes(Protocol):
    """A blocking port: runs ``statement`` with ``params`` in the flow's transaction."""

    def execute(self, statement: StatementName, params: Mapping[str, Any], /) -> Reply: ...


class AsyncExecutes(Protocol):
    """The asyncio port (see ``Executes``)."""

    async def execute(self, statement: StatementName, params: Mapping[str, Any], /) -> Reply: ...


class Execute:
    """The one step of the SQL flows: run a named statement in the flow's transaction."""

    __slots__ = ("params", "result", "statement")
    result: Reply

    def __init__(self, statement: StatementName, /, **params: Any) -> None:
        self.statement = statement
        self.params = params

    def perform(self, port: Executes) -> None:
        self.result = port.execute(self.statement, self.params)

    async def aperform(self, port: AsyncExecutes) -> None:
        self.result = await port.execute(self.statement, self.params)


class SqlFlows:
    """The SQL issuers' operations as flows of ``Execute`` steps; no I/O, no dialect."""

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> Flow[Execute, int | Busy]:
        take = Execute("acquire", fence=name, holder_id=holder, ttl=ttl_ms / 1000.0)
        yield take
        if take.result.rows:
            return int(take.result.rows[0][0])
        busy = Execute("lease_left", fence=name)
        yield busy
        left = busy.result.rows[0][0] if busy.result.rows else None
        return Busy(None if left is None else max(0.0, float(left)))

    def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int
    ) -> Flow[Execute, int | Busy]:
        """The take of ``try_acquire`` for the slot ``f"{group}{slot}"``, inserting or
        updating only while fewer than ``permits`` other slots' rows are live, counted
        in the same statement. A statement reads what was committed when it started, so
        the semaphore's takes are serialized first (``slot_lock``): each then counts the
        ones committed before it. Releases and expiries only lower the count."""
        yield Execute("slot_lock", group=group)
        name = f"{group}{slot}"
        take = Execute(
            "slot_acquire",
            fence=name,
            holder_id=holder,
            ttl=ttl_ms / 1000.0,
            group=group,
            first=f"{group}0",
            after=f"{group}:",  # ":" is the character after "9"
            permits=permits,
        )
        yield take
        if take.result.rows:
            return int(take.result.rows[0][0])
        busy = Execute("slot_left", fence=name)
        yield busy
        left = busy.result.rows[0][0] if busy.result.rows else None  # none: slots full
        return Busy(None if left is None else max(0.0, float(left)))

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> Flow[Execute, bool]:
        step = Execute(
            "renew", fence=name, lease_token=token, holder_id=holder, ttl=ttl_ms / 1000.0
        )
        yield step
        return step.result.rowcount == 1

    def release(self, name: str, token: int, holder: str) -> Flow[Execute, bool]:
        step = Execute("release", fence=name, lease_token=token, holder_id=holder)
        yield step
        return step.result.rowcount == 1

    def status(self, name: str, lock: bool = False) -> Flow[Execute, FenceStatus]:
        """One read of the row of ``name``; ``lock``: keep it locked to the transaction's end."""
        read = Execute("status_locked" if lock else "status", fence=name)
        yield read
        if not read.result.rows:
            return FenceStatus(name, held=False)
        token, holder, left, held = read.result.rows[0]
        if not held:
            return FenceStatus(name, held=False, last_token=int(token))
        return FenceStatus(name, True, holder, int(token), max(0.0, float(left)), int(token))

    def names(self, prefix: str) -> Flow[Execute, list[str]]:
        step = Execute("names", prefix=like_prefix(prefix))
        yield step
        return [str(row[0]) for row in step.result.rows]

    def force_release(self, name: str) -> Flow[Execute, FenceStatus]:
        ended = yield from self.status(name, lock=True)
        if ended.token is not None and ended.holder is not None:  # held: both are set
            yield Execute("clear", fence=name, lease_token=ended.token, holder_id=ended.holder)
        return ended

    def admit(self, name: str, limit: int, per_ms: int, window: str) -> Flow[Execute, Admission]:
        """One request of the rate limiter ``name`` (see ``fencing.sql._issuer``)."""
        per = per_ms * 1000
        clock = Execute("admit_lock", limiter=name, window=window)
        yield clock
        now = int(clock.result.rows[0][0])
        if window == "sliding":
            yield Execute("admit_expire", limiter=name, window=window, before=now - per)
        window_of = Execute("admit_window", limiter=name, window=window)
        yield window_of
        start, count, last = window_of.result.rows[0]
        count, last = int(count), int(last or 0)
        if window == "fixed" and count and now >= int(start) + per:  # the window ended
            yield Execute("admit_reset", limiter=name, window=window)
            count = last = 0
        if count < limit:
            yield Execute(
                "admit_insert", limiter=name, window=window, seq_no=last + 1, admitted_at=now
            )
            return Admission(True, 0.0, now / 1e6)
        if window == "fixed":
            frees = int(start) + per
        else:  # the oldest of the last ``limit`` admissions turns ``per`` old
            oldest = Execute("admit_oldest", limiter=name, window=window, skip=count - limit)
            yield oldest
            frees = int(oldest.result.rows[0][0]) + per
        return Admission(False, max(0, frees - now) / 1e6, now / 1e6)

    def limit_use(self, name: str, per_ms: int, window: str) -> Flow[Execute, LimitUse]:
        """The use of the rate limiter ``name`` now; reads only (no lock row taken)."""
        per = per_ms * 1000
        clock = Execute("clock")
        yield clock
        now = int(clock.result.rows[0][0])
        # a fixed window counts every admission it keeps (their times are all >= 0)
        after = now - per if window == "sliding" else -1
        read = Execute("limit_use", limiter=name, window=window, after=after)
        yield read
        used, oldest = read.result.rows[0]
        if not used or (window == "fixed" and now >= int(oldest) + per):
            return LimitUse(0, None, now / 1e6)
        return LimitUse(int(used), max(0, int(oldest) + per - now) / 1e6, now / 1e6)

    def rw_acquire(
        self, name: str, mode: str, holder: str, ttl_ms: int, queue_ms: int
    ) -> Flow[Execute, int | Busy]:
        """A read or write lease of the read-write lock ``name`` (``ReadWrites``; the
        rules in docs/rwlock.md), decided on the lock's rows read once the name's row
        in ``fencing_leases`` is locked, so no other operation of the lock interleaves."""
        yield Execute("rw_touch", fence=name)
        yield Execute("rw_lock", fence=name)
        yield Execute("rw_expire", fence=name)
        rows = Execute("rw_rows", fence=name)
        yield rows
        leases = [(str(h), str(m), int(t), float(left)) for h, m, t, left in rows.result.rows]
        writers = [left for _, m, _, left in leases if m == WRITE]
        readers = [(token, left) for _, m, token, left in leases if m == READ]
        marker = next(((h, left) for h, m, _, left in leases if m == "wait"), None)
        if mode == READ:
            if writers or marker is not None:  # a writer holds, or waits: readers wait
                return Busy(max([*writers, marker[1] if marker else 0.0]))
            if readers:
                epoch = readers[0][0]
            else:  # the first reader of an empty lock: a new epoch
                epoch = yield from self._next_token(name)
            yield self._rw_insert(name, holder, READ, epoch, ttl_ms / 1000.0)
            return epoch
        mine = marker is not None and marker[0] == holder
        if mine and (not queue_ms or not (writers or readers)):
            yield Execute("rw_drop", fence=name, holder_id=holder)
        if writers or readers:
            if queue_ms and (marker is None or mine):
                if mine:
                    yield Execute("rw_drop", fence=name, holder_id=holder)
                yield self._rw_insert(name, holder, "wait", 0, queue_ms / 1000.0)
            return Busy(max([*writers, *(left for _, left in readers)]))
        token = yield from self._next_token(name)
        yield self._rw_insert(name, holder, WRITE, token, ttl_ms / 1000.0)
        return token

    @staticmethod
    def _next_token(name: str) -> Flow[Execute, int]:
        step = Execute("rw_next", fence=name)
        yield step
        return int(step.result.rows[0][0])

    @staticmethod
    def _rw_insert(name: str, holder: str, mode: str, token: int, seconds: float) -> Execute:
        return Execute(
            "rw_insert", fence=name, holder_id=holder, rw_mode=mode, lease_token=token, ttl=seconds
        )

    def rw_renew(
        self, name: str, mode: str, token: int, holder: str, ttl_ms: int
    ) -> Flow[Execute, bool]:
        step = Execute(
            "rw_renew",
            fence=name,
            holder_id=holder,
            rw_mode=mode,
            lease_token=token,
            ttl=ttl_ms / 1000.0,
        )
        yield step
        return step.result.rowcount == 1

    def rw_release(self, name: str, mode: str, token: int, holder: str) -> Flow[Execute, bool]:
        step = Execute("rw_release", fence=name, holder_id=holder, rw_mode=mode, lease_token=token)
        yield step
        return step.result.rowcount == 1

    def rw_status(self, name: str) -> Flow[Execute, RWStatus]:
        """The live leases of the read-write lock ``name``, its waiting writer and its
        counter (``OperatesReadWrites``; changes nothing)."""
        counter = Execute("status", fence=name)
        yield counter
        last = int(counter.result.rows[0][0]) if counter.result.rows else None
        rows = Execute("rw_rows", fence=name)
        yield rows
        read = [(str(h), str(m), int(t), float(s)) for h, m, t, s in rows.result.rows]
        live = [row for row in read if row[3] > 0]  # ended rows wait for ``rw_expire``
        waiting = next((holder for holder, mode, _, _ in live if mode == "wait"), None)
        leases = [row for row in live if row[1] != "wait"]
        if not leases:
            return RWStatus(name, False, waiting=waiting, last_token=last)
        _, mode, token, _ = leases[0]  # one writer, or readers of one epoch
        left = {holder: seconds for holder, _, _, seconds in leases}
        return RWStatus(name, True, mode, token, left, waiting, last)

    def rw_force_release(self, name: str) -> Flow[Execute, RWStatus]:
        """End every lease of the read-write lock ``name`` (``OperatesReadWrites``), on
        its row locked as ``rw_acquire`` locks it; the counter is above their token
        already (it issued it), and a waiting writer's marker stays."""
        yield Execute("rw_lock", fence=name)
        ended = yield from self.rw_status(name)
        for holder in ended.holders:
            yield Execute("rw_drop", fence=name, holder_id=holder)
        return ended


class FlowsIssuer(ABC):
    """The blocking issuer's calls (``Issuer``, ``Inspects``, ``ForceReleases``) as the
    flows of ``flows``, each run in one transaction by ``_run``: written once for
    ``fencing.sql``'s ``SqlIssuer`` (on an engine) and ``fencing.django``'s issuer (on a
    Django cursor), which differ only in where a flow runs."""

    flows: SqlFlows

    @abstractmethod
    def _run(self, flow: Flow[Execute, T]) -> T:
        """Run ``flow`` in one transaction and return what it returns."""

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        return self._run(self.flows.try_acquire(name, holder, ttl_ms))

    def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int
    ) -> int | Busy:
        """``fencing.issuer.TakesSlots``: one transaction (see ``SqlFlows``)."""
        return self._run(self.flows.try_acquire_slot(group, slot, permits, holder, ttl_ms))

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return self._run(self.flows.renew(name, token, holder, ttl_ms))

    def release(self, name: str, token: int, holder: str) -> bool:
        return self._run(self.flows.release(name, token, holder))

    def status(self, name: str) -> FenceStatus:
        return self._run(self.flows.status(name))

    def names(self, prefix: str = "") -> Iterator[str]:
        return iter(self._run(self.flows.names(prefix)))

    def force_release(self, name: str) -> FenceStatus:
        return self._run(self.flows.force_release(name))

    def rw_status(self, name: str) -> RWStatus:
        return self._run(self.flows.rw_status(name))

    def rw_force_release(self, name: str) -> RWStatus:
        return self._run(self.flows.rw_force_release(name))
