"""Every throwaway server of ``fencing.testing.servers`` gives its URL the same way: a
``url`` property, a ``str`` that ``fencing.connect`` takes. PostgreSQL's and pgbouncer's
``url(...)`` methods of old still answer, with a ``DeprecationWarning``."""

from __future__ import annotations

import inspect
import pickle

import pytest
from sqlalchemy import create_engine

import fencing
import fencing.testing.servers as servers
from fencing.sql import create_tables
from fencing.testing.servers import PgBouncer, PostgresServer


def server_classes() -> list[type]:
    return [
        cls
        for name in servers.__all__
        if inspect.isclass(cls := getattr(servers, name)) and hasattr(cls, "url")
    ]


def test_every_server_url_is_a_property() -> None:
    classes = server_classes()
    assert PostgresServer in classes and PgBouncer in classes and len(classes) >= 9
    methods = [
        c.__name__ for c in classes if not isinstance(inspect.getattr_static(c, "url"), property)
    ]
    assert methods == []


def test_connect_takes_a_postgres_url_as_is(postgres_server: PostgresServer) -> None:
    url = postgres_server.url
    assert url == f"postgresql+psycopg://postgres@127.0.0.1:{postgres_server.port}/fencing"
    engine = create_engine(url)
    create_tables(engine)  # the SDK's tables (``fencing migrate``); idempotent
    engine.dispose()
    fence = fencing.connect(url).fence("servers-url", ttl=5.0)
    token = fence.acquire(timeout=5.0)
    fence.release(token)
    assert postgres_server.url_for("asyncpg") == url.replace("+psycopg", "+asyncpg")


def test_calling_the_url_is_deprecated_and_still_answers(
    postgres_server: PostgresServer,
) -> None:
    with pytest.warns(DeprecationWarning, match="`url` is a property"):
        assert postgres_server.url("asyncpg") == postgres_server.url_for("asyncpg")
    with pytest.warns(DeprecationWarning):
        assert postgres_server.url() == postgres_server.url
    bouncer = PgBouncer(postgres_server.port, database="other")  # not started: no process
    try:
        assert bouncer.url == f"postgresql+psycopg://postgres@127.0.0.1:{bouncer.port}/other"
        with pytest.warns(DeprecationWarning):
            assert bouncer.url("db", "asyncpg") == bouncer.url_for("asyncpg", "db")
        assert bouncer.url_for("asyncpg").endswith(f":{bouncer.port}/other")
    finally:
        bouncer.close()


def test_a_url_pickles_as_a_plain_str(postgres_server: PostgresServer) -> None:
    """A child process gets the text, never the server behind the deprecated call."""
    copy = pickle.loads(pickle.dumps(postgres_server.url))
    assert type(copy) is str and copy == postgres_server.url
