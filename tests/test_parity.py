"""Parity by construction: every public blocking class has its asyncio twin under the
same name in the matching ``aio`` module, with the same public methods and the same
parameter names, and every backend's ``x`` has its ``aio_x``. A difference fails here
unless it is in the allow-lists below, each with the reason it is intended; so a method
added to one side only (as ``status`` once went missing from the asyncio Redlock and
advisory issuers, which docs/leadership.md says every issuer has) cannot go unnoticed.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, get_type_hints

import pytest

#: Each blocking module and its asyncio module.
MODULES = {
    "fencing": "fencing.aio",
    "fencing.redis": "fencing.redis.aio",
    "fencing.sql": "fencing.sql.aio",
    "fencing.etcd": "fencing.etcd.aio",
    "fencing.zookeeper": "fencing.zookeeper.aio",
}

#: Public blocking classes with no asyncio twin, and why: none of them does I/O that
#: asyncio would await, or it is used from both sides as is.
NO_ASYNCIO_TWIN = {
    # errors and plain data, shared by both sides
    "fencing": {
        "AcquireTimeout",
        "Admission",
        "Busy",
        "FenceSetupError",
        "FenceToken",
        "FenceUnavailable",
        "FencingError",
        "LeaseLost",
        "LimitUse",
        "MissingExtra",
        "NotReplicated",
        "Permit",
        "ReadToken",
        "StaleTokenError",
        "UnfencedWriteError",
        "WriteToken",
        # guards and marks run at the resource, inside the caller's write (a file, a
        # SQL statement, a Redis script): the blocking write path, asyncio or not
        "FileMark",
        "FileStore",
        "Guarded",
        "Mark",
        "MemoryMark",
        "RedisMark",
        # the in-memory issuer never blocks: fencing.aio.MemoryFence wraps it as is
        "MemoryIssuer",
    },
    "fencing.redis": {"RedisMark"},
    # the SQLAlchemy mixin and its errors belong to the ORM, used by both session kinds
    "fencing.sql": {"FencedMixin", "RowcountUnavailable", "StaleRowError"},
    "fencing.etcd": {"EtcdOptions"},  # the parsed URL, data
    "fencing.zookeeper": set(),
}

#: Public methods and attributes that only a blocking class has, and why.
BLOCKING_ONLY = {
    # the operators' commands (``fencing list``, ``release --force``, ``--lock``,
    # ``--rwlock``) are the blocking command line's: only ``status`` has an asyncio twin
    # (``AsyncInspects``), which asyncio elections read
    "names",
    "force_release",
    "lock_status",
    "force_release_lock",
    "rw_status",
    "rw_force_release",
    "PAGE",  # etcd's page size for ``names``
}

#: Closing, on either side, is checked on its own: a blocking ``close`` is an asyncio
#: ``aclose``; an asyncio object also closes what was opened on its own event loop (with
#: no blocking counterpart), and the asyncio issuers whose ``aclose`` was once named
#: ``close`` keep that name, deprecated.
CLOSING = {"close", "aclose"}

#: (class, method) -> parameters only one side has, and why.
PARAMETERS_DIFFER = {
    # an asyncio body runs as a task that a lost lease can cancel; a thread cannot be
    ("Fence", "hold"): {"cancel_on_loss"},
    ("Hold", "__init__"): {"cancel_on_loss"},
    ("Election", "campaign"): {"cancel_on_loss"},
    # redis-py's own signatures: its asyncio ``Lock.acquire`` has no ``sleep``
    ("FencedLock", "acquire"): {"sleep"},
    # a virtual clock for the blocking limiter's tests; asyncio runs on the loop's time
    ("Limiter", "__init__"): {"monotonic", "sleep"},
}


def pairs() -> list[tuple[str, str, Any, Any]]:
    """(module, name, blocking, asyncio) for every class or function of an ``aio`` module."""
    found = []
    for blocking_name, asyncio_name in MODULES.items():
        blocking = importlib.import_module(blocking_name)
        asyncio_ = importlib.import_module(asyncio_name)
        for name in asyncio_.__all__:
            found.append((asyncio_name, name, getattr(blocking, name), getattr(asyncio_, name)))
    return found


def public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def parameters(obj: Any) -> list[str]:
    return [p for p in inspect.signature(obj).parameters if p != "self"]


def family(cls: type) -> str:
    """The name the allow-lists use for ``cls``: its role, not its backend."""
    for role in ("Hold", "Fence", "Issuer"):
        if cls.__name__.endswith(role):
            return role
    return cls.__name__.removeprefix("Async")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_public_blocking_class_has_its_asyncio_twin_by_the_same_name(module: str) -> None:
    blocking = importlib.import_module(module)
    asyncio_ = importlib.import_module(MODULES[module])
    classes = {n for n in blocking.__all__ if inspect.isclass(getattr(blocking, n))}
    missing = classes - set(asyncio_.__all__) - NO_ASYNCIO_TWIN[module]
    assert not missing, f"{module} classes with no twin in {MODULES[module]}: {sorted(missing)}"
    stale = NO_ASYNCIO_TWIN[module] & set(asyncio_.__all__)
    assert not stale, f"allow-listed as blocking only, yet in {MODULES[module]}: {stale}"
    for name in asyncio_.__all__:
        assert not name.startswith("Async"), f"{MODULES[module]}.{name}: the blocking name"


@pytest.mark.parametrize(
    ("module", "name", "blocking", "asyncio_"),
    pairs(),
    ids=[f"{module}.{name}" for module, name, _, _ in pairs()],
)
def test_asyncio_twin_has_the_same_methods_and_parameters(
    module: str, name: str, blocking: Any, asyncio_: Any
) -> None:
    if blocking is asyncio_:
        return  # one object for both sides (``Leader``)
    if not inspect.isclass(blocking):  # a function: the same parameters
        assert parameters(blocking) == parameters(asyncio_), f"{module}.{name}"
        return
    only_blocking = public(blocking) - public(asyncio_) - BLOCKING_ONLY - CLOSING
    assert not only_blocking, f"{module}.{name} lacks {sorted(only_blocking)}"
    only_asyncio = public(asyncio_) - public(blocking) - CLOSING
    assert not only_asyncio, f"{module}.{name} has, alone, {sorted(only_asyncio)}"
    if "close" in public(blocking):
        assert "aclose" in public(asyncio_), f"{module}.{name}: close() but no aclose()"
    role = family(blocking)
    for method in ["__init__", *sorted(public(blocking) & public(asyncio_) - CLOSING)]:
        one, other = inspect.getattr_static(blocking, method), getattr(asyncio_, method)
        if not (callable(one) and inspect.isroutine(other)):
            # a property or a constant (redis-py's Lock keeps its scripts in class
            # attributes, None until a lock of the class registered them): present on
            # both, checked above
            continue
        differ = set(parameters(getattr(blocking, method))) ^ set(parameters(other))
        allowed = PARAMETERS_DIFFER.get((role, method), set())
        assert differ <= allowed, f"{module}.{name}.{method}: parameters {sorted(differ)} differ"
        shared = [p for p in parameters(other) if p not in allowed]
        assert shared == [p for p in parameters(getattr(blocking, method)) if p not in allowed]


BACKENDS = [
    "fencing._memory:MemoryIssuer",  # makes semaphores and limiters
    "fencing.redis._backend:RedisBackend",
    "fencing.redis._backend:RedisClusterBackend",
    "fencing.redis._backend:RedlockBackend",
    "fencing.sql._backend:SqlBackend",
    "fencing.etcd._backend:EtcdBackend",
    "fencing.zookeeper._backend:ZooKeeperBackend",
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_backend_makes_every_primitive_both_ways(backend: str) -> None:
    """``fencing.connect(url)``'s ``fence``/``aio_fence``, ``election``/``aio_election``,
    ``semaphore``/``aio_semaphore``, ``limiter``/``aio_limiter``: always in pairs, with the
    same parameters."""
    module, _, name = backend.partition(":")
    cls = getattr(importlib.import_module(module), name)
    makers = {"fence", "election", "semaphore", "limiter"}
    have = {m for m in makers if hasattr(cls, m)} | {
        m.removeprefix("aio_") for m in public(cls) if m.startswith("aio_")
    }
    for maker in sorted(have):
        assert hasattr(cls, maker) and hasattr(cls, f"aio_{maker}"), f"{name}: {maker} alone"
        blocking, asyncio_ = getattr(cls, maker), getattr(cls, f"aio_{maker}")
        assert parameters(blocking) == parameters(asyncio_), f"{name}.{maker}"


def given(cls: type, package: str) -> dict[str, type]:
    """The classes of ``package`` that ``cls``'s public methods return, by method."""
    found = {}
    for method in public(cls):
        member = getattr(cls, method)
        if not inspect.isroutine(member):
            continue
        try:
            returned = get_type_hints(member).get("return")
        except NameError:  # an annotation of a name only imported for type checking
            continue
        if inspect.isclass(returned) and returned.__module__.startswith(package):
            found[method] = returned
    return found


def returned_differences(blocking: type, asyncio_: type, package: str = "fencing") -> list[str]:
    """Where what ``blocking``'s methods return and what ``asyncio_``'s return (both
    classes of the package, not one class for both sides) differ in public methods."""
    theirs = given(asyncio_, package)
    found = []
    for method, one in given(blocking, package).items():
        other = theirs.get(method)
        if other is None or other is one:
            continue  # the same class on both sides (data); a missing method: see above
        differ = (public(one) ^ public(other)) - BLOCKING_ONLY - CLOSING
        if differ:
            found.append(f"{method}: {one.__name__} ^ {other.__name__} = {sorted(differ)}")
    return found


@pytest.mark.parametrize(
    ("module", "name", "blocking", "asyncio_"),
    pairs(),
    ids=[f"{module}.{name}" for module, name, _, _ in pairs()],
)
def test_what_twins_return_are_twins_too(
    module: str, name: str, blocking: Any, asyncio_: Any
) -> None:
    """What a public method gives (a hold from ``hold()``, a term from ``campaign``) has the
    same public methods on both sides, exported or not: parity reaches past ``__all__``."""
    if blocking is asyncio_ or not inspect.isclass(blocking):
        return
    assert not returned_differences(blocking, asyncio_), f"{module}.{name}"


class _Given:
    def wait_lost(self) -> bool:
        return False


class _AsyncGiven:  # the control's asyncio twin, lacking ``wait_lost``
    pass


class _Giver:
    def hold(self) -> _Given:
        return _Given()


class _AsyncGiver:
    def hold(self) -> _AsyncGiven:
        return _AsyncGiven()


def test_a_returned_class_lacking_a_method_is_caught() -> None:
    """The control: an asyncio ``hold()`` whose hold lacks ``wait_lost`` is found."""
    assert returned_differences(_Giver, _AsyncGiver, __name__) == [
        "hold: _Given ^ _AsyncGiven = ['wait_lost']"
    ]
    assert returned_differences(_Giver, _Giver, __name__) == []
