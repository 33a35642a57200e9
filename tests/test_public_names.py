"""The public surface: every backend's fence and issuer is reachable the same way, from
``fencing`` (blocking) and ``fencing.aio`` (asyncio, under the same names), loaded on
first use so that ``import fencing`` needs no optional dependency."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import fencing
import fencing.aio

#: backend package -> its fence and issuer, by the names every module uses for them.
BACKENDS = {
    "etcd": ("EtcdFence", "EtcdIssuer"),
    "redis": ("RedisFence", "RedisIssuer"),
    "sql": ("SqlFence", "SqlIssuer"),
    "zookeeper": ("ZooKeeperFence", "ZooKeeperIssuer"),
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_each_backend_fence_and_issuer_from_fencing_and_fencing_aio(backend: str) -> None:
    blocking = importlib.import_module(f"fencing.{backend}")
    asyncio_ = importlib.import_module(f"fencing.{backend}.aio")
    for name in BACKENDS[backend]:
        assert getattr(fencing, name) is getattr(blocking, name)
        assert getattr(fencing.aio, name) is getattr(asyncio_, name)
        assert getattr(fencing.aio, name) is not getattr(fencing, name)
        for module in (fencing, fencing.aio, blocking, asyncio_):
            assert name in module.__all__, (module.__name__, name)


@pytest.mark.parametrize("module", [fencing, fencing.aio], ids=lambda m: m.__name__)
def test_every_listed_name_resolves(module: object) -> None:
    for name in module.__all__:  # type: ignore[attr-defined]
        assert getattr(module, name) is not None
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchFence'"):
        getattr(module, "NoSuchFence")  # noqa: B009


_LOADED = """
import sys
import fencing, fencing.aio
drivers = {"redis", "sqlalchemy", "alembic", "grpc", "aetcd", "kazoo", "httpx", "requests"}
drivers |= {"celery", "kombu", "django"}
backends = tuple(
    f"fencing.{b}"
    for b in ("redis", "sql", "etcd", "zookeeper", "http", "alembic", "celery", "django")
)
print(sorted(m for m in sys.modules if m.split(".")[0] in drivers or m.startswith(backends)))
"""


def test_import_fencing_and_fencing_aio_load_no_backend() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _LOADED], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


#: Every deprecated spelling (module, old name) -> its name now: the asyncio classes live
#: in ``fencing.aio`` (and each backend's ``aio``) under their blocking twins' names.
DEPRECATED = {
    ("fencing", "AsyncElection"): "fencing.aio.Election",
    ("fencing", "AsyncFence"): "fencing.aio.Fence",
    ("fencing", "AsyncHold"): "fencing.aio.Hold",
    ("fencing", "AsyncIssuer"): "fencing.aio.Issuer",
    ("fencing", "AsyncTerm"): "fencing.aio.Term",
    ("fencing.aio", "AsyncFence"): "fencing.aio.Fence",
    ("fencing.sql.aio", "AsyncSqlFence"): "fencing.sql.aio.SqlFence",
    ("fencing.sql.aio", "AsyncSqlIssuer"): "fencing.sql.aio.SqlIssuer",
}


@pytest.mark.parametrize(("module", "old"), sorted(DEPRECATED), ids=".".join)
def test_a_deprecated_name_warns_at_every_use_and_gives_the_same_object(
    module: str, old: str
) -> None:
    new = DEPRECATED[module, old]
    where, _, name = new.rpartition(".")
    current = getattr(importlib.import_module(where), name)
    found = importlib.import_module(module)
    for _ in range(2):  # never kept in the namespace: the second use warns too
        with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is deprecated: use {new}"):
            assert getattr(found, old) is current
    assert old not in found.__all__, "a star import would warn"
    assert name in importlib.import_module(where).__all__


def test_every_deprecated_name_is_listed_here() -> None:
    """The modules' own lists of renamed names are exactly ``DEPRECATED`` (and CHANGELOG's)."""
    listed = set()
    for module in ("fencing", "fencing.aio", "fencing.sql.aio"):
        renamed = importlib.import_module(module)._RENAMED
        listed |= {((module, old), new) for old, new in renamed.items()}
    assert listed == set(DEPRECATED.items())
