"""A deterministic simulation of the pause scenario: clients, an issuer, pauses, a resource.

Martin Kleppmann's timeline ("How to do distributed locking", 2016), scripted::

    sim = Simulation(clients=2, ttl=10)          # virtual clock, guarded register
    c1, c2 = sim.clients
    c1.acquire()        # token 1
    c1.pause()          # frozen after checking its lease, just before writing
    sim.expire()        # the virtual clock jumps past the TTL: the lease is gone
    c2.acquire()        # token 2
    c2.write()          # accepted: high-water mark 2
    c1.resume()         # wakes up and sends its write with token 1 -> rejected
    print(sim.format_timeline())

A ``Simulation`` runs on a ``World``: the fences its clients use (one per client, same
name, same issuer), the resource they write to, the clients' clock and a way to let every
lease run out. ``virtual_world()`` gives a world on a ``VirtualClock`` where pauses and
expiry are instant; the test suite builds worlds on real issuers, where expiry is real
time past the TTL. ``fencing.testing.statemachine`` lets Hypothesis generate schedules.

The model of a client is the careful client of the scenario: before each write it checks
that its lease has not run out by its own clock, and skips the write if it has. A pause
freezes it *after* that check and *before* the write, so on resume the write goes out
with a token that may be long superseded. Only a guard at the resource can stop it.

How a client writes is the simulation's ``mode``:

- ``"write"`` (the default): blind writes, as above.
- ``"read-write"``: a client reads the value when it acquires (and again on ``read()``),
  and computes its writes from what it read (then from what it wrote). A token orders
  writes, not reads, so a stale holder's write that lands between a newer holder's read
  and its write is accepted, and the newer write, computed from the older read,
  silently drops it::

      client 1 (token 1): acquire+read, pause ....................... resume: write 1
      client 2 (token 2):            (expired) acquire+read ......................... write 2
                                                                       ^ accepted    ^ LOST UPDATE

- ``"claim-read-write"``: the client claims the resource with its token before each read
  (``resource.claim(token)``: raise the high-water mark, data untouched), so every older
  token is refused from then on and the window is closed.

Every step is recorded in ``timeline``; ``check`` (run after every step) raises
``InvariantViolation`` with the timeline when an invariant of docs/design.md is broken:

1. every issued token is unique and larger than all issued before;
2. accepted writes carry non-decreasing tokens;
3. a write whose token is below an already accepted (or claimed) one is never applied
   (against an unfenced resource this is the *lost update*);
4. in the read modes, an accepted write was computed from the value it replaces: no
   write landed between the writer's read and its write (else an update was lost);
   a claim never changes the value.

Imports the public package only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from .. import AcquireTimeout, Fence, LeaseLost, MemoryIssuer, StaleTokenError, guard

# -- the pieces of a world ------------------------------------------------------------


class VirtualClock:
    """A clock that moves only when told to: ``advance(seconds)``. Starts at 0.

    It is also a fence's ``Clock`` (``monotonic``/``sleep``): a fence waiting on it
    spends virtual time, instantly.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def __call__(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock cannot go back ({seconds}s)")
        self._now += seconds

    def monotonic(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)


class SimulatedIssuer(MemoryIssuer):
    """The in-memory issuer on a ``VirtualClock``: a blocked ``acquire`` waits in virtual
    time (the clock jumps ahead) instead of real time."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock)
        self.clock = clock

    def await_release(self, name: str, seconds: float) -> None:
        self.clock.advance(seconds)


class Resource(Protocol):
    """What the simulated clients write to: a single value plus a guard (or none).

    ``write`` applies ``value`` if ``token`` passes the guard and raises
    ``StaleTokenError`` otherwise (with no side effect); an unfenced resource applies
    every write. ``read`` returns the current value (``None`` before the first write).
    For the ``"claim-read-write"`` mode a resource also has ``claim(token)``: raise its
    high-water mark to ``token`` without changing the value, or ``StaleTokenError``.
    """

    def write(self, value: str, token: int) -> None: ...

    def read(self) -> str | None: ...


@runtime_checkable
class Claimable(Protocol):
    """A resource that can be claimed: ``claim(token)`` raises its high-water mark to
    ``token`` without changing its value, or raises ``StaleTokenError``."""

    def claim(self, token: int) -> None: ...


#: How the simulated clients write (see the module docstring).
Mode = Literal["write", "read-write", "claim-read-write"]
MODES: tuple[Mode, ...] = ("write", "read-write", "claim-read-write")


class Register:
    """An in-memory resource: one value and, when ``fenced``, a high-water-mark guard.

    ``Register(fenced=False)`` is the resource that trusts the lock alone: it is what a
    storage looks like to a redis-py ``Lock`` user, and where the lost update happens.
    """

    def __init__(self, *, fenced: bool = True) -> None:
        self.fenced = fenced
        self.value: str | None = None
        self.high_water_mark: int | None = None

    def __repr__(self) -> str:
        return f"Register(fenced={self.fenced})"

    def write(self, value: str, token: int) -> None:
        self.claim(token)
        self.value = value

    def claim(self, token: int) -> None:
        """Raise the mark to ``token`` (refused below it when fenced); the value stays."""
        if self.fenced and self.high_water_mark is not None and token < self.high_water_mark:
            raise StaleTokenError(token, self.high_water_mark, "register")
        if self.high_water_mark is None or token > self.high_water_mark:
            self.high_water_mark = token

    def read(self) -> str | None:
        return self.value


class StoreResource:
    """A ``Resource`` over a guarded store with ``write(data: bytes, token)`` and
    ``read() -> bytes`` (``FileStore``, or your own store under test)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def __repr__(self) -> str:
        return f"StoreResource({self.store!r})"

    def write(self, value: str, token: int) -> None:
        self.store.write(value.encode(), token)

    def claim(self, token: int) -> None:
        self.store.claim(token)

    def read(self) -> str | None:
        try:
            data: bytes = self.store.read()
        except FileNotFoundError:
            return None
        return data.decode()


class GuardedResource:
    """A ``Resource`` whose writes go through ``guard(set_value, mark=mark)``."""

    def __init__(self, mark: Any = None) -> None:
        self.value: str | None = None
        self.write_guarded = guard(self._set, mark=mark, name="simulated resource")

    def _set(self, value: str) -> None:
        self.value = value

    def write(self, value: str, token: int) -> None:
        self.write_guarded(token, value)

    def claim(self, token: int) -> None:
        self.write_guarded.claim(token)

    def read(self) -> str | None:
        return self.value


@dataclass
class World:
    """Everything a ``Simulation`` runs on.

    ``fences``: one fence per client, all for the same name on the same issuer.
    ``clock``: the clients' own clock, to check their lease before writing.
    ``expire``: make every lease run out (jump a virtual clock, or really sleep).
    ``exact``: the clock is the issuer's clock (virtual time), so the simulation can
    also assert when an acquire must succeed or fail.
    ``close``: release whatever the world holds (connections, files).
    """

    fences: Sequence[Fence]
    resource: Resource
    clock: Callable[[], float]
    expire: Callable[[], None]
    exact: bool = False
    close: Callable[[], None] = lambda: None

    @property
    def ttl(self) -> float:
        return self.fences[0].ttl


def virtual_world(
    clients: int = 3,
    *,
    ttl: float = 10.0,
    fenced: bool = True,
    name: str = "sim",
    resource: Resource | None = None,
) -> World:
    """A world on a virtual clock: a ``SimulatedIssuer`` and a ``Register``."""
    clock = VirtualClock()
    issuer = SimulatedIssuer(clock)
    fences = [Fence(issuer, name, ttl, clock=clock) for _ in range(clients)]
    return World(
        fences=fences,
        resource=resource if resource is not None else Register(fenced=fenced),
        clock=clock,
        expire=lambda: clock.advance(ttl * 1.5),
        exact=True,
    )


def real_time_world(
    fences: Sequence[Fence], resource: Resource, *, close: Callable[[], None] = lambda: None
) -> World:
    """A world on real issuers: expiry is a real sleep past the TTL (keep TTLs short)."""
    ttl = fences[0].ttl

    def expire() -> None:
        time.sleep(ttl * 1.5 + 0.02)

    return World(fences, resource, time.monotonic, expire, exact=False, close=close)


# -- the simulation ---------------------------------------------------------------------


class InvariantViolation(AssertionError):
    """A guarantee was broken; the message carries the timeline that broke it."""

    def __init__(self, problem: str, timeline: str) -> None:
        self.problem = problem
        self.timeline = timeline
        super().__init__(f"{problem}\n\ntimeline:\n{timeline}")


@dataclass(frozen=True)
class Event:
    """One step of the timeline: when, who, what, with which token, and the outcome."""

    time: float
    client: str
    action: str
    token: int | None = None
    outcome: str = ""


@dataclass
class SimClient:
    """One client of a ``Simulation``: acquire, write, pause, resume, release."""

    sim: Simulation
    index: int
    fence: Fence
    token: int | None = None
    acquired_at: float = 0.0
    paused: bool = False
    writes: int = 0
    #: In the read modes: the value its next write is computed from (what it last read
    #: or wrote), once it has read.
    base: str | None = None
    has_read: bool = False

    @property
    def name(self) -> str:
        return f"client {self.index + 1}"

    @property
    def holding(self) -> bool:
        """The client believes it holds a lease (it may have expired meanwhile)."""
        return self.token is not None

    def acquire(self) -> int | None:
        """Try once to take the lease; the token, or ``None`` when it is busy."""
        self._must_run("acquire")
        if self.holding:
            raise RuntimeError(f"{self.name} already holds token {self.token}")
        started = self.sim.world.clock()
        try:
            token = self.fence.acquire(timeout=0)
        except AcquireTimeout:
            self.sim._acquired(self, None)
            return None
        self.token, self.acquired_at = int(token), started
        self._forget_read()
        self.sim._acquired(self, self.token)
        if self.sim.reads:
            self.read()
        return self.token

    def read(self) -> bool:
        """Read the value the next writes are computed from (the read modes only; done
        on every acquire); in ``"claim-read-write"``, claim the resource first.

        Returns ``False`` if the claim was refused (a newer token holds the resource):
        then nothing was read.
        """
        self._must_run("read")
        token = self._token("read")
        if self.sim.mode == "write":
            raise RuntimeError("clients read only in the read modes")
        if self.sim.mode == "claim-read-write" and not self.sim._claim(self, token):
            self._forget_read()
            return False
        self.base, self.has_read = self.sim.world.resource.read(), True
        self.sim._record(self, "read", token, repr(self.base))
        return True

    def write(self, value: str | None = None) -> bool | None:
        """Check the lease by the client's clock, then write with its token.

        Returns ``True`` if the resource applied the write, ``False`` if its guard
        rejected it, ``None`` if the client saw its lease had run out and did not write.
        """
        self._must_run("write")
        token = self._token("write")
        if not self._lease_looks_valid():
            self.sim._record(self, "write skipped", token, "own lease ran out")
            self.token = None
            self._forget_read()
            return None
        return self._send(token, value)

    def pause(self) -> bool:
        """Freeze just after checking the lease and just before writing (a GC pause).

        Returns ``False`` (and drops the lease, like ``write``) if the check finds the
        lease already run out: then there is no write to freeze.
        """
        self._must_run("pause")
        token = self._token("pause")
        if not self._lease_looks_valid():
            self.sim._record(self, "pause skipped", token, "own lease ran out")
            self.token = None
            self._forget_read()
            return False
        self.paused = True
        self.sim._record(self, "paused", token, "lease checked, write pending")
        return True

    def resume(self, value: str | None = None) -> bool:
        """Wake up and send the pending write, believing the lease still held."""
        if not self.paused:
            raise RuntimeError(f"{self.name} is not paused")
        self.paused = False
        self.sim._record(self, "resumed", self.token)
        return bool(self._send(self._token("resume"), value))

    def release(self) -> bool:
        """Release the lease; ``False`` if it had already been lost."""
        self._must_run("release")
        token = self._token("release")
        self.token = None
        self._forget_read()
        try:
            self.fence.release(token)
        except LeaseLost:
            self.sim._record(self, "release", token, "lease already lost")
            self.sim._released(token, lost=True)
            return False
        self.sim._record(self, "release", token, "released")
        self.sim._released(token, lost=False)
        return True

    # -- helpers --

    def _must_run(self, what: str) -> None:
        if self.paused:
            raise RuntimeError(f"{self.name} is paused and cannot {what}")

    def _token(self, what: str) -> int:
        if self.token is None:
            raise RuntimeError(f"{self.name} holds no lease to {what} with")
        return self.token

    def _forget_read(self) -> None:
        self.base, self.has_read = None, False

    def _lease_looks_valid(self) -> bool:
        # Half the TTL as a safety margin: what a careful client does, and it still
        # does not help against a pause that comes after the check.
        return self.sim.world.clock() - self.acquired_at < self.fence.ttl / 2

    def _send(self, token: int, value: str | None) -> bool:
        self.writes += 1
        value = value if value is not None else f"{self.name}/token {token}/#{self.writes}"
        applied = self.sim._write(self, token, value)
        if applied:
            self.base = value  # the client's view: what it wrote
        return applied


class Simulation:
    """Clients taking a lease, writing, pausing, and a model that checks every step.

    Build it on a ``World`` or, by default, on ``virtual_world(clients, ttl=..., fenced=...)``.
    ``mode`` is how clients write: blind, or computed from a read (with or without a
    claim first); see the module docstring.
    """

    def __init__(
        self,
        world: World | None = None,
        *,
        clients: int = 3,
        ttl: float = 10.0,
        fenced: bool = True,
        mode: Mode = "write",
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.mode: Mode = mode
        self.world = world if world is not None else virtual_world(clients, ttl=ttl, fenced=fenced)
        if mode == "claim-read-write" and not isinstance(self.world.resource, Claimable):
            raise TypeError(f"mode {mode!r} needs a resource with claim(token)")
        self.clients = [SimClient(self, i, fence) for i, fence in enumerate(self.world.fences)]
        self.timeline: list[Event] = []
        self.issued: list[int] = []
        self.accepted: list[int] = []
        self.rejected: list[int] = []
        self.claimed: list[int] = []
        self._start = self.world.clock()
        self._lease: tuple[int, float] | None = None  # (token, expires at), if exact

    # -- steps that are not a client's --

    def expire(self) -> None:
        """Let every lease run out (instant on a virtual clock, a real sleep otherwise)."""
        self.world.expire()
        self._record(None, "time passes", None, f"> ttl ({self.world.ttl:g}s)")

    def advance(self, seconds: float) -> None:
        """Move a virtual clock forward by ``seconds``."""
        clock = self.world.clock
        if not isinstance(clock, VirtualClock):
            raise TypeError("advance() needs a world on a VirtualClock")
        clock.advance(seconds)
        self._record(None, "time passes", None, f"{seconds:g}s")

    def close(self) -> None:
        self.world.close()

    # -- what the model knows --

    @property
    def reads(self) -> bool:
        """Clients compute each write from a read (the read modes)."""
        return self.mode != "write"

    @property
    def high_water_mark(self) -> int | None:
        """The highest token an accepted write or claim carried, ``None`` before any."""
        seen = self.accepted + self.claimed
        return max(seen) if seen else None

    def format_timeline(self) -> str:
        """The timeline, one line per step, with times relative to the start."""
        lines = []
        for event in self.timeline:
            token = "" if event.token is None else f" token {event.token}"
            outcome = f": {event.outcome}" if event.outcome else ""
            who = event.client or "-"
            lines.append(f"t={event.time:8.3f}s  {who:<9} {event.action}{token}{outcome}")
        return "\n".join(lines)

    def check(self, ok: bool, problem: str) -> None:
        if not ok:
            raise InvariantViolation(problem, self.format_timeline())

    # -- bookkeeping called by the clients --

    def _now(self) -> float:
        return self.world.clock() - self._start

    def _record(
        self, client: SimClient | None, action: str, token: int | None, outcome: str = ""
    ) -> None:
        who = client.name if client is not None else ""
        self.timeline.append(Event(self._now(), who, action, token, outcome))

    def _acquired(self, client: SimClient, token: int | None) -> None:
        if token is None:
            self._record(client, "acquire", None, "busy")
        else:
            self._record(client, "acquire", token, "granted")
            self.check(
                not self.issued or token > max(self.issued),
                f"token {token} issued after token {max(self.issued or [0])}: not increasing",
            )
            self.issued.append(token)
        if self.world.exact:
            now = self.world.clock()
            live = self._lease is not None and now < self._lease[1]
            self.check(
                (token is None) == live,
                f"acquire {'failed' if token is None else 'succeeded'} while the lease was "
                f"{'held' if live else 'free'}",
            )
            if token is not None:
                self._lease = (token, now + self.world.ttl)

    def _released(self, token: int, *, lost: bool) -> None:
        if not self.world.exact:
            return
        mine = self._lease is not None and self._lease[0] == token
        live = mine and self._lease is not None and self.world.clock() < self._lease[1]
        self.check(lost != live, f"release of token {token}: lost={lost} but held={live}")
        if mine:
            self._lease = None

    def _claim(self, client: SimClient, token: int) -> bool:
        mark = self.high_water_mark
        before = self.world.resource.read()
        resource = self.world.resource
        assert isinstance(resource, Claimable)  # checked when the simulation was built
        try:
            resource.claim(token)
        except StaleTokenError as exc:
            self._record(client, "claim", token, f"REJECTED (stale: {exc.current} holds it)")
            self.rejected.append(token)
            self.check(
                mark is not None and token < mark,
                f"claim of token {token} rejected, but the highest token seen is {mark}",
            )
            return False
        self._record(client, "claim", token, "accepted")
        self.check(
            self.world.resource.read() == before, f"claim of token {token} changed the value"
        )
        self.check(
            mark is None or token >= mark,
            f"claim of token {token} accepted after token {mark} had been accepted",
        )
        self.claimed.append(token)
        return True

    def _write(self, client: SimClient, token: int, value: str) -> bool:
        mark = self.high_water_mark
        before = self.world.resource.read()
        try:
            self.world.resource.write(value, token)
        except StaleTokenError as exc:
            self._record(client, "write", token, f"REJECTED (stale: {exc.current} accepted)")
            self.rejected.append(token)
            self.check(
                self.world.resource.read() == before,
                f"rejected write of token {token} changed the resource",
            )
            self.check(
                mark is not None and token < mark,
                f"write of token {token} rejected, but the highest accepted token is {mark}",
            )
            return False
        applied = self.world.resource.read() == value
        self.check(applied, f"write of token {token} neither applied nor rejected")
        if mark is not None and token < mark:
            self._record(client, "write", token, f"APPLIED over token {mark}: LOST UPDATE")
            self.check(
                False,
                f"lost update: {client.name}'s write with token {token} was applied after a "
                f"write with token {mark} had been accepted",
            )
        if self.reads and before != client.base:
            self._record(client, "write", token, f"APPLIED over {before!r}: LOST UPDATE")
            self.check(
                False,
                f"lost update: {client.name}'s write with token {token} was computed from a "
                f"read of {client.base!r}, but {before!r} had been written since",
            )
        self._record(client, "write", token, "accepted")
        self.accepted.append(token)
        self.check(
            self.accepted == sorted(self.accepted), "accepted writes carry decreasing tokens"
        )
        return True
