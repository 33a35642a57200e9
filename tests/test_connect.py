"""fencing.connect: one URL picks the backend; no URL means $FENCING_URL or embedded SQLite."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import redis
from sqlalchemy import create_engine

import fencing
import fencing.aio
from fencing.redis._backend import RedisBackend
from fencing.sql import SqlFence, create_tables
from fencing.sql._backend import SqlBackend
from fencing.testing.servers import RedisServer


def test_sql_urls_give_sql_fences(sql_url: str) -> None:
    if sql_url.startswith("postgresql"):
        engine = create_engine(sql_url)
        create_tables(engine)
        engine.dispose()
    backend = fencing.connect(sql_url)
    assert isinstance(backend, SqlBackend)
    fence = backend.fence(f"c:{uuid.uuid4().hex}", ttl=5)
    assert isinstance(fence, SqlFence) and fence.ttl == 5
    first = fence.acquire()
    fence.release(first)
    assert fence.acquire() > first


def test_postgres_spelling_is_accepted(pg_url: str) -> None:
    libpq = "postgres://" + pg_url.partition("://")[2]
    backend = fencing.connect(libpq)
    assert isinstance(backend, SqlBackend) and backend.url.startswith("postgresql://")


def test_redis_urls_give_redis_fences(redis_server: RedisServer) -> None:
    backend = fencing.connect(redis_server.url)
    assert isinstance(backend, RedisBackend)
    fence = backend.fence(f"c:{uuid.uuid4().hex}", ttl=5)
    assert isinstance(fence, fencing.RedisFence)
    token = fence.acquire()
    fence.release(token)
    assert fence.acquire() > token
    assert isinstance(fencing.connect("rediss://example.invalid:6380/0"), RedisBackend)
    assert isinstance(fencing.connect("unix:///tmp/redis.sock"), RedisBackend)
    redis.Redis.from_url(redis_server.url).close()


def test_no_url_uses_the_environment_then_the_embedded_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("FENCING_URL", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    backend = fencing.connect()
    assert isinstance(backend, SqlBackend)
    expected = tmp_path / "state" / "fencing" / "fencing.db"
    assert backend.url == f"sqlite:///{expected}"
    fence = backend.fence("embedded")
    assert fence.acquire(timeout=0) >= 1 and expected.exists()
    monkeypatch.setenv("FENCING_URL", f"sqlite:///{tmp_path / 'env.db'}")
    assert fencing.connect().url == f"sqlite:///{tmp_path / 'env.db'}"


def test_bad_urls() -> None:
    for url in ("mssql://u@h/db", "http://x", "nothing", "sqlite://"):
        with pytest.raises(ValueError):
            fencing.connect(url)
    with pytest.raises(TypeError):
        fencing.connect(5)  # type: ignore[arg-type]
