"""The SQL issuer: leases and token counters in the ``fencing_leases`` table.

Every operation is one transaction and, on both databases, one statement whose WHERE
clause is the whole decision (time from the database's clock, never the client's):

- acquire: ``INSERT ... ON CONFLICT (name) DO UPDATE SET token = max(token + 1, clock),
  ... WHERE holder IS NULL OR expires_at <= now RETURNING token``, where ``clock`` is the
  database's clock in microseconds (a new row starts there too, so a row deleted by hand
  does not restart its tokens at 1). No row back means the lease is taken; a second
  read then reports how long it has left (``Busy``).
- renew / release: ``UPDATE ... WHERE name, token, holder match AND expires_at > now``;
  one row changed means it was ours. Release clears holder and expiry, keeps the counter.

The operators' calls (``Inspects``, ``ForceReleases``): ``status`` is one read;
``force_release`` reads the live lease with ``FOR UPDATE`` and clears it by its exact
token and holder in the same transaction; the counter stays, so the next token is
higher than the one it ended.

The operations are written once as flows of statements (``SqlFlows``, see ``_flow``);
``SqlIssuer`` drives them on a ``Connection`` (its calls written once in ``FlowsIssuer``,
shared with ``fencing.django``'s issuer) and ``AsyncSqlIssuer`` (``_async_issuer``)
on an ``AsyncConnection``, each inside one transaction.
Nothing wakes waiters on release (no capability): the core backs off with jitter.

The rate limiters' ``admit`` (``fencing_admissions``, see ``_schema.admissions``) is one
transaction too: first an upsert of the limiter's lock row, which serializes the
requests of one limiter (PostgreSQL's row lock, SQLite's ``BEGIN IMMEDIATE``) and returns
the database's clock in µs read *after* the lock was taken; then, on that time, a count
of the window's admissions, the deletion of those that no longer count, and the insert
of the new one when it is admitted.
Imports the core fences and flows, the schema and engine helpers, and SQLAlchemy.
"""

from __future__ import annotations

import functools
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from sqlalchemy import (
    Double,
    Engine,
    Executable,
    Integer,
    String,
    and_,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from .._core import DEFAULT_TTL
from .._fence import Fence
from .._flow import Flow, run_sync
from .._limiter import Admission, LimitUse
from ..issuer import Busy, FenceStatus
from ._engines import issuer_engine, sql_errors
from ._keys import advisory_keys
from ._schema import admissions, db_micros, db_now, leases

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

T = TypeVar("T")


@dataclass(frozen=True)
class Reply:
    """What a statement returned, read the same way from sync and async results."""

    rowcount: int
    rows: list[tuple[Any, ...]]


class Results(Protocol):
    """What a flow reads of a statement's result: a ``CursorResult``, or the rows
    ``fencing.django``'s issuer takes from a Django cursor."""

    @property
    def rowcount(self) -> int: ...

    @property
    def returns_rows(self) -> bool: ...

    def __iter__(self) -> Iterator[Any]: ...


class Executes(Protocol):
    """Where the flows' statements run blocking: a ``Connection`` in a transaction, or
    ``fencing.django``'s port on a Django cursor (the same statements, compiled), with
    the values of a statement's bound parameters when it was built with them."""

    def execute(
        self, statement: Executable, params: dict[str, Any] | None = None, /
    ) -> Results: ...


def read(result: Results) -> Reply:
    rows = [tuple(row) for row in result] if result.returns_rows else []
    return Reply(result.rowcount, rows)


class Execute:
    """The one step of the SQL flows: run a statement in the flow's transaction, with
    ``params``, the values of its bound parameters, when it was built once with them."""

    __slots__ = ("params", "result", "statement")
    result: Reply

    def __init__(self, statement: Executable, params: dict[str, Any] | None = None) -> None:
        self.statement = statement
        self.params = params

    def perform(self, conn: Executes) -> None:
        self.result = read(conn.execute(self.statement, self.params))

    async def aperform(self, conn: AsyncConnection) -> None:
        self.result = read(await conn.execute(self.statement, self.params))


def _upsert(dialect: str) -> Any:
    return postgresql.insert if dialect == "postgresql" else sqlite.insert


def _greatest(dialect: str, *values: Any) -> Any:
    """The largest of ``values`` (PostgreSQL ``greatest``, SQLite's scalar ``max``)."""
    return func.greatest(*values) if dialect == "postgresql" else func.max(*values)


def _held(dialect: str, name: str, token: int, holder: str) -> Any:
    return and_(
        leases.c.name == name,
        leases.c.token == token,
        leases.c.holder == holder,
        leases.c.expires_at > db_now(dialect),
    )


class SqlFlows:
    """The SQL issuer's operations as flows of statements for one dialect; no I/O.

    Each flow runs in one transaction (the issuer opens it around the flow).
    """

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> Flow[Execute, int | Busy]:
        now, clock = db_now(self.dialect), db_micros(self.dialect)
        insert = _upsert(self.dialect)(leases).values(
            name=name, token=clock, holder=holder, expires_at=now + ttl_ms / 1000.0
        )
        take = self._take(insert, now, clock)
        yield take
        if take.result.rows:
            return int(take.result.rows[0][0])
        busy = Execute(select(leases.c.expires_at - now).where(leases.c.name == name))
        yield busy
        left = busy.result.rows[0][0] if busy.result.rows else None
        return Busy(None if left is None else max(0.0, float(left)))

    def try_acquire_slot(
        self, group: str, slot: int, permits: int, holder: str, ttl_ms: int
    ) -> Flow[Execute, int | Busy]:
        """The take of ``try_acquire`` for the slot ``f"{group}{slot}"``, inserting or
        updating only while fewer than ``permits`` other slots' rows are live (counted
        in the same statement). SQLite's ``BEGIN IMMEDIATE`` serializes it with every
        other write; on PostgreSQL, whose statement reads a snapshot taken when it
        starts, a statement before it takes the semaphore's transaction-level advisory
        lock (``advisory_keys(group)``), so the takes of one semaphore run one after the
        other and each counts the ones committed before it. Releases and expiries only
        lower the count and need no lock."""
        name = f"{group}{slot}"
        if self.dialect == "postgresql":
            k1, k2 = advisory_keys(group)
            yield Execute(select(func.pg_advisory_xact_lock(k1, k2)))
        values: dict[str, Any] = {"name": name, "holder": holder, "seconds": ttl_ms / 1000.0}
        values.update(group=group, first=f"{group}0", after=f"{group}:", permits=permits)
        take = Execute(self._slot_take, values)
        yield take
        if take.result.rows:
            return int(take.result.rows[0][0])
        now = db_now(self.dialect)
        held = and_(leases.c.name == name, leases.c.holder.is_not(None), leases.c.expires_at > now)
        busy = Execute(select(leases.c.expires_at - now).where(held))
        yield busy
        left = busy.result.rows[0][0] if busy.result.rows else None  # none: slots full
        return Busy(None if left is None else max(0.0, float(left)))

    @functools.cached_property
    def _slot_take(self) -> Any:
        """The statement of ``try_acquire_slot``, built once with bound parameters
        (SQLAlchemy takes longer to build it than SQLite to run it): the upsert of
        ``try_acquire`` from a row that exists only while fewer than ``:permits`` other
        slots ``:group<k>`` are live. On SQLite the slots are found by a range of the
        primary key (``:group0`` up to ``:group:``, ``:`` being the character after
        ``9``); PostgreSQL's text order depends on the collation, so there a ``LIKE``
        prefix finds them (an index scan only under the C collation)."""
        now, clock = db_now(self.dialect), db_micros(self.dialect)
        name, group = bindparam("name", type_=String), bindparam("group", type_=String)
        number = func.substr(leases.c.name, func.length(group) + 1)
        if self.dialect == "postgresql":
            slots = and_(
                func.substr(leases.c.name, 1, func.length(group)) == group,
                number.op("~")("^[0-9]+$"),
            )
        else:
            slots = and_(
                leases.c.name >= bindparam("first", type_=String),
                leases.c.name < bindparam("after", type_=String),
                number.op("NOT GLOB")("*[^0-9]*"),
            )
        others = (
            select(func.count())
            .where(slots, leases.c.name != name)
            .where(leases.c.holder.is_not(None), leases.c.expires_at > now)
            .scalar_subquery()
        )
        expires = now + bindparam("seconds", type_=Double)
        row = select(name, clock, bindparam("holder", type_=String), expires)
        insert = _upsert(self.dialect)(leases).from_select(
            ["name", "token", "holder", "expires_at"],
            row.where(others < bindparam("permits", type_=Integer)),
        )
        return self._take(insert, now, clock).statement

    def _take(self, insert: Any, now: Any, clock: Any) -> Execute:
        """The upsert of ``insert``'s row that takes a lease if free, returning its token."""
        return Execute(
            insert.on_conflict_do_update(
                index_elements=[leases.c.name],
                set_={
                    "token": _greatest(self.dialect, leases.c.token + 1, clock),
                    "holder": insert.excluded.holder,
                    "expires_at": insert.excluded.expires_at,
                },
                where=or_(leases.c.holder.is_(None), leases.c.expires_at <= now),
            ).returning(leases.c.token)
        )

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> Flow[Execute, bool]:
        step = Execute(
            update(leases)
            .where(_held(self.dialect, name, token, holder))
            .values(expires_at=db_now(self.dialect) + ttl_ms / 1000.0)
        )
        yield step
        return step.result.rowcount == 1

    def release(self, name: str, token: int, holder: str) -> Flow[Execute, bool]:
        step = Execute(
            update(leases)
            .where(_held(self.dialect, name, token, holder))
            .values(holder=None, expires_at=None)
        )
        yield step
        return step.result.rowcount == 1

    def status(self, name: str, lock: bool = False) -> Flow[Execute, FenceStatus]:
        """One read of the row of ``name``; ``lock``: keep it locked to the transaction's end."""
        now = db_now(self.dialect)
        live = and_(leases.c.holder.is_not(None), leases.c.expires_at > now)
        query = select(leases.c.token, leases.c.holder, leases.c.expires_at - now, live).where(
            leases.c.name == name
        )
        read = Execute(query.with_for_update() if lock else query)
        yield read
        if not read.result.rows:
            return FenceStatus(name, held=False)
        token, holder, left, held = read.result.rows[0]
        if not held:
            return FenceStatus(name, held=False, last_token=int(token))
        return FenceStatus(name, True, holder, int(token), max(0.0, float(left)), int(token))

    def names(self, prefix: str) -> Flow[Execute, list[str]]:
        step = Execute(
            select(leases.c.name)
            .where(leases.c.name.startswith(prefix, autoescape=True))
            .order_by(leases.c.name)
        )
        yield step
        return [str(row[0]) for row in step.result.rows]

    def force_release(self, name: str) -> Flow[Execute, FenceStatus]:
        ended = yield from self.status(name, lock=True)
        if ended.token is not None and ended.holder is not None:  # held: both are set
            clear = Execute(
                update(leases)
                .where(leases.c.name == name, leases.c.token == ended.token)
                .where(leases.c.holder == ended.holder)
                .values(holder=None, expires_at=None)
            )
            yield clear
        return ended

    def admit(self, name: str, limit: int, per_ms: int, window: str) -> Flow[Execute, Admission]:
        """One request of the rate limiter ``name`` (see the module docstring)."""
        per, table = per_ms * 1000, admissions
        ours = and_(table.c.name == name, table.c.kind == window)
        lock = _upsert(self.dialect)(table).values(
            name=name, kind=window, seq=0, at=db_micros(self.dialect)
        )
        clock = Execute(
            lock.on_conflict_do_update(
                index_elements=[table.c.name, table.c.kind, table.c.seq],
                set_={"at": db_micros(self.dialect)},  # evaluated once the row is locked
            ).returning(table.c.at)
        )
        yield clock
        now = int(clock.result.rows[0][0])
        counted = and_(ours, table.c.seq > 0)
        if window == "sliding":
            yield Execute(delete(table).where(counted, table.c.at <= now - per))
        window_of = Execute(
            select(func.min(table.c.at), func.count(), func.max(table.c.seq)).where(counted)
        )
        yield window_of
        start, count, last = window_of.result.rows[0]
        count, last = int(count), int(last or 0)
        if window == "fixed" and count and now >= int(start) + per:  # the window ended
            yield Execute(delete(table).where(counted))
            count = last = 0
        if count < limit:
            yield Execute(insert(table).values(name=name, kind=window, seq=last + 1, at=now))
            return Admission(True, 0.0, now / 1e6)
        if window == "fixed":
            frees = int(start) + per
        else:  # the oldest of the last ``limit`` admissions turns ``per`` old
            oldest = Execute(
                select(table.c.at)
                .where(counted)
                .order_by(table.c.at, table.c.seq)
                .offset(count - limit)
                .limit(1)
            )
            yield oldest
            frees = int(oldest.result.rows[0][0]) + per
        return Admission(False, max(0, frees - now) / 1e6, now / 1e6)

    def limit_use(self, name: str, per_ms: int, window: str) -> Flow[Execute, LimitUse]:
        """The use of the rate limiter ``name`` now; reads only (no lock row taken)."""
        per, table = per_ms * 1000, admissions
        clock = Execute(select(db_micros(self.dialect)))
        yield clock
        now = int(clock.result.rows[0][0])
        counted = and_(table.c.name == name, table.c.kind == window, table.c.seq > 0)
        if window == "sliding":
            counted = and_(counted, table.c.at > now - per)
        read = Execute(select(func.count(), func.min(table.c.at)).where(counted))
        yield read
        used, oldest = read.result.rows[0]
        if not used or (window == "fixed" and now >= int(oldest) + per):
            return LimitUse(0, None, now / 1e6)
        return LimitUse(int(used), max(0, int(oldest) + per - now) / 1e6, now / 1e6)


class FlowsIssuer(ABC):
    """The blocking issuer's calls (``Issuer``, ``Inspects``, ``ForceReleases``) as the
    flows of ``flows``, each run in one transaction by ``_run``: written once for
    ``SqlIssuer`` (on an engine) and ``fencing.django``'s issuer (on a Django cursor),
    which differ only in where a flow runs."""

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


class SqlIssuer(FlowsIssuer):
    """Issuer on SQLite or PostgreSQL (an ``Engine`` or URL); see the module docstring.

    The ``fencing_leases`` table must exist: run ``fencing migrate`` (or
    ``fencing.sql.create_tables``); SQLite files get it automatically on first use.
    Without it, every call raises ``FenceSetupError`` naming the command to run. It can
    be inspected and force-released (``fencing.issuer.Inspects``, ``ForceReleases``).
    """

    def __init__(self, engine: Engine | str) -> None:
        self.engine = issuer_engine(engine)
        self.dialect = self.engine.dialect.name
        self.flows = SqlFlows(self.dialect)
        self._ready = False
        self._ready_lock = threading.Lock()

    def _run(self, flow: Flow[Execute, T]) -> T:
        self._ensure_tables()
        with sql_errors(url=self.engine.url), self.engine.begin() as conn:
            return run_sync(flow, conn)

    def _ensure_tables(self) -> None:
        if self._ready:
            return
        with self._ready_lock, sql_errors("creating the fencing tables", self.engine.url):
            if not self._ready and self.dialect == "sqlite":
                from ._migrate import create_tables

                create_tables(self.engine)
            self._ready = True

    def admit(self, name: str, limit: int, per_ms: int, window: str) -> Admission:
        """One request of the rate limiter ``name``: one transaction, the database's clock."""
        return self._run(self.flows.admit(name, limit, per_ms, window))

    def limit_use(self, name: str, per_ms: int, window: str) -> LimitUse:
        """The use of the rate limiter ``name`` now, on the database's clock."""
        return self._run(self.flows.limit_use(name, per_ms, window))


_issuers: dict[object, SqlIssuer] = {}
_engine_issuers: weakref.WeakKeyDictionary[Engine, SqlIssuer] = weakref.WeakKeyDictionary()
_issuers_lock = threading.Lock()


def shared_issuer(source: Engine | str) -> SqlIssuer:
    """One issuer (and one pool) per engine or URL in this process."""
    with _issuers_lock:
        cache: Any = _engine_issuers if isinstance(source, Engine) else _issuers
        issuer: SqlIssuer | None = cache.get(source)
        if issuer is None:
            issuer = cache[source] = SqlIssuer(source)
        return issuer


class SqlFence(Fence):
    """A fence issued by a SQLite file or a PostgreSQL database.

    ``SqlFence(engine_or_url, "invoice:42", ttl=10)``; the same API and guarantees as
    every ``Fence``. Fences on the same engine or URL share one issuer and its pool.
    """

    def __init__(
        self,
        engine: Engine | str,
        name: str,
        ttl: float = DEFAULT_TTL,
        *,
        issuer: SqlIssuer | None = None,
        reentrant: bool = False,
    ) -> None:
        super().__init__(issuer or shared_issuer(engine), name, ttl, reentrant=reentrant)
