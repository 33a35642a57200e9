"""The SQL issuer's transaction on the pool's DBAPI connection (``fencing.sql._driver.
transaction``, what ``SqlIssuer`` on its own engine runs each flow in): a flow that fails
after writing leaves nothing written and no transaction open on a pooled connection,
and one interrupted is closed for good, never pooled. On MariaDB and PostgreSQL (the
databases whose URL engines run it); each test has a control run that commits.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine

from fencing._base.flow import Flow
from fencing._sql.flows import Execute
from fencing.sql import SqlIssuer, create_tables


@pytest.fixture(params=["mariadb", "postgresql"])
def issuer(request: pytest.FixtureRequest) -> Iterator[SqlIssuer]:
    if request.param == "mariadb":
        url = str(request.getfixturevalue("mariadb_url"))
    else:
        url = str(request.getfixturevalue("pg_url"))
        engine = create_engine(url)
        create_tables(engine)
        engine.dispose()
    made = SqlIssuer(url)
    yield made
    made.engine.dispose()


def _pooled(issuer: SqlIssuer) -> object:
    """The driver's connection the pool gives next (it holds one, used by one thread)."""
    conn = issuer.engine.raw_connection()
    try:
        return conn.dbapi_connection
    finally:
        conn.close()


def _taken_then(issuer: SqlIssuer, name: str, error: BaseException | None) -> Flow[Execute, int]:
    """Acquire's statements (the lease written), then ``error`` raised before the commit."""
    token = yield from issuer.flows.try_acquire(name, "holder", 60_000)
    assert isinstance(token, int)
    if error is not None:
        raise error
    return token


@pytest.mark.timeout(120)
@pytest.mark.parametrize("error", [RuntimeError("after the write"), KeyboardInterrupt()])
def test_a_flow_failing_after_its_write_leaves_nothing_written(
    issuer: SqlIssuer, error: BaseException
) -> None:
    name = f"driver:{uuid.uuid4().hex}"
    issuer.status(name)  # one pooled connection, and the tables checked
    before = _pooled(issuer)
    with pytest.raises(type(error)):
        issuer._run(_taken_then(issuer, name, error))
    # interrupted: closed for good (the pool opens another); failed: rolled back, pooled
    assert (_pooled(issuer) is before) is not isinstance(error, KeyboardInterrupt)
    assert not issuer.status(name).held  # rolled back, or gone with its session
    token = issuer._run(_taken_then(issuer, name, None))  # control: the same flow commits
    status = issuer.status(name)
    assert status.held and status.token == token
