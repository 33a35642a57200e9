"""Setup errors say what to do: a missing ``fencing_leases`` table names the command to
run, a Redis ACL that refuses fencing's commands names the rules to grant. Both are
``FenceSetupError`` (retrying does not help), never ``FenceUnavailable``."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fail_fast import failing_fast
from sqlalchemy.engine import make_url

import fencing
import fencing.aio
from fencing import FenceSetupError, FenceUnavailable, cli
from fencing.cli._operate import FAILED
from fencing.redis import RedisFence
from fencing.redis._errors import ACL_RULES
from fencing.sql import SqlFence
from fencing.testing.servers import RedisServer

#: The command in a missing-table message.
MIGRATE = re.compile(r"`(fencing migrate --url \S+)`")


def with_password(url: str) -> str:
    """The URL with a password (the test server trusts loopback, so any password works)."""
    return make_url(url).set(password="s3cret").render_as_string(hide_password=False)


def test_missing_table_names_the_migrate_command_and_it_works(
    empty_pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = with_password(empty_pg_url)
    fence = SqlFence(url, "before-migrate", ttl=5)
    with pytest.raises(FenceSetupError) as info:
        fence.acquire(timeout=0)
    assert not isinstance(info.value, FenceUnavailable)
    message = str(info.value)
    assert "s3cret" not in message and "fencing_leases" in message
    found = MIGRATE.search(message)
    assert found, message
    command = found.group(1).split()
    assert command[3] == empty_pg_url  # the URL without its password, sync driver
    assert cli.main(command[1:]) == 0  # the command it names does the job
    capsys.readouterr()
    fence.release(fence.acquire(timeout=0))


async def test_missing_table_from_asyncio_names_a_sync_driver(empty_pg_url: str) -> None:
    url = make_url(empty_pg_url).set(drivername="postgresql+asyncpg")
    fence = fencing.aio.SqlFence(url.render_as_string(hide_password=False), "async", ttl=5)
    with pytest.raises(FenceSetupError, match="fencing migrate --url postgresql\\+psycopg://"):
        await fence.acquire(timeout=0)
    await fence.issuer.aclose()  # type: ignore[attr-defined]


def test_missing_table_in_the_cli(empty_pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "x", "--url", with_password(empty_pg_url)]) == FAILED
    err = capsys.readouterr().err
    assert "FenceSetupError" in err and f"fencing migrate --url {empty_pg_url}`" in err
    assert "s3cret" not in err


@pytest.fixture(scope="module")
def acl_server() -> Iterator[RedisServer]:
    """A throwaway redis-server with users whose ACLs allow less than fencing needs."""
    server = RedisServer().start()
    admin = redis.Redis(port=server.port)
    everything = ["+@all"]
    admin.acl_setuser("noeval", enabled=True, passwords=["+pw"], keys=["*"],
                      commands=[*everything, "-evalsha", "-eval"])  # fmt: skip
    admin.acl_setuser("noset", enabled=True, passwords=["+pw"], keys=["*"],
                      commands=[*everything, "-set"])  # fmt: skip
    admin.acl_setuser("otherkeys", enabled=True, passwords=["+pw"], keys=["other:*"],
                      commands=everything)  # fmt: skip
    admin.acl_setuser("fencing", enabled=True, passwords=["+pw"])
    admin.execute_command(  # type: ignore[no-untyped-call]
        "ACL", "SETUSER", "fencing", *ACL_RULES.split()
    )
    admin.close()
    yield server
    server.close()


def client_of(server: RedisServer, user: str) -> redis.Redis:
    return redis.Redis(port=server.port, username=user, password="pw", socket_timeout=10)


@pytest.mark.parametrize("user", ["noeval", "noset", "otherkeys"])
def test_a_redis_acl_that_refuses_fencing_names_the_rules(
    acl_server: RedisServer, user: str
) -> None:
    fence = RedisFence(client_of(acl_server, user), f"acl:{uuid.uuid4().hex}", ttl=5)
    with pytest.raises(FenceSetupError) as info:
        fence.acquire(timeout=0)
    assert not isinstance(info.value, FenceUnavailable)
    assert f"ACL SETUSER <user> {ACL_RULES}" in str(info.value)
    assert isinstance(info.value.__cause__, redis.RedisError)  # the server's own answer


def test_the_rules_the_message_names_are_enough(acl_server: RedisServer) -> None:
    """A user with exactly ``ACL_RULES`` runs every operation: acquire, a hand-off to a
    waiter, renew, release, status, list, force-release."""
    client = client_of(acl_server, "fencing")
    name = f"acl:{uuid.uuid4().hex}"
    holder, waiter = RedisFence(client, name, ttl=5), RedisFence(client, name, ttl=5)
    token = holder.acquire(timeout=0)
    holder.renew(token)
    with pytest.raises(fencing.AcquireTimeout):
        waiter.acquire(timeout=0.05)  # queued, then gave up: BLPOP and the queue scripts
    holder.release(token)
    newer = waiter.acquire(timeout=0)
    issuer = waiter.issuer
    assert isinstance(issuer, fencing.RedisIssuer)
    assert issuer.status(name).token == newer
    assert name in set(issuer.names("acl:"))
    assert issuer.force_release(name).token == newer
    client.close()


def test_wrong_redis_credentials_say_where_they_go(acl_server: RedisServer) -> None:
    client = failing_fast(acl_server.port, 5, username="fencing", password="wrong")
    with pytest.raises(FenceSetupError, match=r"redis://<user>:<password>@host") as info:
        RedisFence(client, "auth", ttl=5).acquire(timeout=0)
    assert isinstance(info.value.__cause__, redis.AuthenticationError)
    client.close()


def test_a_sqlite_file_in_a_missing_directory_says_to_create_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'missing' / 'fencing.db'}"
    with pytest.raises(FenceSetupError, match=f"directory {tmp_path / 'missing'} does not exist"):
        SqlFence(url, "x", ttl=5).acquire(timeout=0)
    assert cli.main(["status", "x", "--url", url]) == FAILED
    assert "create it" in capsys.readouterr().err
    assert not (tmp_path / "missing").exists()  # nothing created on the way
