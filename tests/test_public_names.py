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
