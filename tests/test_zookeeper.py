"""The ZooKeeper backend beyond the contract, on real servers: the token is the lease
znode's czxid; leader loss on a 3-server ensemble; an unreachable or frozen ensemble gives
``FenceUnavailable`` (never a hang) and an acquire whose reply came too late gives its
lease back; bad URLs and names; fence names that are not paths.

The contract (tests/test_zookeeper_contract.py) checks the promises every issuer keeps,
among them a holder process frozen past its session refused at a guard.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

import fencing
from fencing.issuer import Busy, WakesOnRelease
from fencing.testing.servers import ZooKeeperEnsemble, ZooKeeperServer
from fencing.zookeeper import ZooKeeperIssuer, encode_name
from fencing.zookeeper._backend import ZooKeeperBackend

#: Seconds: a limit against hangs, never a timing assertion.
PATIENCE = 60.0


def fresh(what: str) -> str:
    return f"zk:{what}:{uuid.uuid4().hex}"


@pytest.fixture
def backends() -> Iterator[list[ZooKeeperBackend]]:
    """Backends made by a test (``connect``), closed at its end."""
    made: list[ZooKeeperBackend] = []
    yield made
    for backend in made:
        backend.close()


def connect(url: str, made: list[ZooKeeperBackend]) -> ZooKeeperBackend:
    backend = fencing.connect(url)
    assert isinstance(backend, ZooKeeperBackend)
    made.append(backend)
    return backend


# -- the token -----------------------------------------------------------------------------


def test_token_is_the_lease_znode_czxid(
    zookeeper_server: ZooKeeperServer, backends: list[ZooKeeperBackend]
) -> None:
    backend = connect(zookeeper_server.url, backends)
    name = fresh("czxid")
    fence = backend.fence(name)
    token = fence.acquire(timeout=0)
    lease = f"/fencing/{encode_name(name)}/lease"
    _, stat = backend.client.get(lease)
    assert stat.czxid == token and stat.ephemeralOwner == backend.client.client_id[0]
    fence.release(token)
    assert backend.client.exists(lease) is None


# -- names and URLs ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["/", ".", "..", "a/../b", "../../zookeeper", "%2F", "é ü"])
def test_names_that_are_not_paths_are_one_znode_each(
    zookeeper_server: ZooKeeperServer, backends: list[ZooKeeperBackend], name: str
) -> None:
    """Every fence name is one escaped segment under /fencing: ``/``, ``.``, ``..`` never
    reach another znode, and different names never share a lease."""
    backend = connect(zookeeper_server.url, backends)
    segment = encode_name(name)
    assert "/" not in segment and segment not in (".", "..") and "." not in segment
    fence = backend.fence(name)
    token = fence.acquire(timeout=0)
    assert backend.client.exists(f"/fencing/{segment}/lease") is not None
    assert f"{segment}" in backend.client.get_children("/fencing")
    other = backend.fence(name + "x")  # a neighbouring name is another fence
    other.release(other.acquire(timeout=0))
    fence.release(token)


def test_encoding_is_one_to_one() -> None:
    names = ["a", "A", "a.b", "a%2Eb", "a b", "a/b", "a%2Fb", ".", "..", "%", "%25", "ü", ":@-_"]
    assert len({encode_name(n) for n in names}) == len(names)


@pytest.mark.parametrize("name", ["", "nul\x00", "x" * 257], ids=["empty", "nul", "too-long"])
def test_bad_names_are_refused_before_any_request(name: str) -> None:
    """Refused by the fence before any I/O: the URL points nowhere and nothing hangs."""
    backend = fencing.connect("zookeeper://127.0.0.1:1?timeout=0.1")
    with pytest.raises(ValueError):
        backend.fence(name)
    with pytest.raises(ValueError):
        encode_name(name)


WITHOUT_KAZOO = textwrap.dedent(
    """
    import sys

    class NoKazoo:
        def find_spec(self, name, path=None, target=None):
            if name == "kazoo" or name.startswith("kazoo."):
                raise ImportError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoKazoo())
    import fencing
    import fencing.aio

    try:
        fencing.connect("zookeeper://127.0.0.1:2181")
    except ImportError as exc:
        print(exc)
    """
)


def test_import_fencing_needs_no_kazoo() -> None:
    """Without kazoo, ``import fencing`` works, and a zookeeper:// URL says what to install."""
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_KAZOO], capture_output=True, text=True, check=True
    )
    assert "needs the 'zookeeper' extra" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize(
    "url",
    [
        "zookeeper://",
        "zookeeper:///chroot",
        "zookeeper://,",
        "zookeeper://host:port",
        "zookeeper://host:0",
        "zookeeper://host:99999",
        "zookeeper://:2181",
        "zookeeper://user@host:2181",
        "zookeeper://host/a//b",
        "zookeeper://host/a/../b",
        "zookeeper://host?ttl=3",
        "zookeeper://host?timeout=0",
        "zookeeper://host?timeout=-1",
        "zookeeper://host?session_timeout=nan",
        "zookeeper://host?session_timeout=soon",
        "zookeeper://host#frag",
    ],
)
def test_bad_urls_are_refused_by_connect(url: str) -> None:
    with pytest.raises(ValueError):
        fencing.connect(url)


def test_url_hosts_chroot_and_options() -> None:
    backend = fencing.connect("zookeeper://a:1,b,[::1]:3/app/locks?session_timeout=4&timeout=2.5")
    assert isinstance(backend, ZooKeeperBackend)
    config = backend.config
    assert config.hosts == (("a", 1), ("b", 2181), ("::1", 3))
    assert config.chroot == "/app/locks"
    assert (config.session_timeout, config.timeout) == (4.0, 2.5)
    assert config.connect_string == "a:1,b:2181,[::1]:3/app/locks"


def test_chroot_keeps_the_fences_below_it(
    zookeeper_server: ZooKeeperServer, backends: list[ZooKeeperBackend]
) -> None:
    chroot = f"/apps/{uuid.uuid4().hex}"
    admin = KazooClient(hosts=zookeeper_server.hosts)
    admin.start(timeout=10)
    try:
        admin.ensure_path(chroot)
        backend = connect(f"{zookeeper_server.url}{chroot}", backends)
        fence = backend.fence("orders")
        token = fence.acquire(timeout=0)
        assert admin.exists(f"{chroot}/fencing/orders/lease") is not None
        fence.release(token)
    finally:
        admin.stop()
        admin.close()


# -- waiting ---------------------------------------------------------------------------------


class CountingIssuer(ZooKeeperIssuer):
    """A ``ZooKeeperIssuer`` that counts the attempts to take a lease."""

    attempts = 0

    def try_acquire(self, name: str, holder: str, ttl_ms: int) -> int | Busy:
        self.attempts += 1
        return super().try_acquire(name, holder, ttl_ms)


def test_waiters_watch_the_lease_instead_of_polling(
    zookeeper_server: ZooKeeperServer, backends: list[ZooKeeperBackend]
) -> None:
    """A waiter tries once, sleeps on the lease znode's watch, and tries again when the
    release deletes it: two attempts for a 0.5 s wait (polling with back-off would make
    about six, a watch that never fired one every second)."""
    backend = connect(zookeeper_server.url, backends)
    warm = backend.fence(fresh("warm-up"))  # the session is up before the count starts
    warm.release(warm.acquire(timeout=0))
    name = fresh("watch")
    holder = backend.fence(name)
    token = holder.acquire(timeout=0)
    issuer = CountingIssuer(backend.client)
    assert isinstance(issuer, WakesOnRelease)
    waiter = fencing.Fence(issuer, name)
    got: list[fencing.FenceToken] = []
    thread = threading.Thread(target=lambda: got.append(waiter.acquire(timeout=PATIENCE)))
    thread.start()
    threading.Event().wait(0.5)
    holder.release(token)
    thread.join(PATIENCE)
    assert got and got[0] > token
    assert issuer.attempts <= 2, f"{issuer.attempts} attempts: the waiter polled"
    waiter.release(got[0])


# -- unavailable ---------------------------------------------------------------------------


def _acquire_in_thread(fence: fencing.Fence, timeout: float | None) -> BaseException | int:
    """The outcome of ``fence.acquire(timeout)``; fails the test if it hangs."""
    outcome: list[BaseException | int] = []

    def run() -> None:
        try:
            outcome.append(fence.acquire(timeout=timeout))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(PATIENCE)
    assert not thread.is_alive(), f"acquire still hangs after {PATIENCE}s"
    return outcome[0]


def test_unreachable_ensemble_is_unavailable_not_a_hang(backends: list[ZooKeeperBackend]) -> None:
    from fencing.testing.servers import free_port

    url = f"zookeeper://127.0.0.1:{free_port()},127.0.0.1:{free_port()}?timeout=0.5"
    outcome = _acquire_in_thread(connect(url, backends).fence(fresh("down")), None)
    assert isinstance(outcome, fencing.FenceUnavailable), outcome


def test_asyncio_first_use_starts_the_session_or_is_unavailable(
    zookeeper_server: ZooKeeperServer, backends: list[ZooKeeperBackend]
) -> None:
    """An asyncio fence may be the first to use a backend: it starts the session off the
    event loop; an unreachable ensemble is ``FenceUnavailable`` there too."""
    import asyncio

    from fencing.testing.servers import free_port

    up = connect(zookeeper_server.url, backends).aio_fence(fresh("aio-first"))
    down = connect(f"zookeeper://127.0.0.1:{free_port()}?timeout=0.5", backends)

    async def run() -> None:
        token = await up.acquire(timeout=0)
        await up.release(token)
        with pytest.raises(fencing.FenceUnavailable):
            await asyncio.wait_for(down.aio_fence(fresh("aio-down")).acquire(), PATIENCE)

    asyncio.run(run())


def test_frozen_server_is_unavailable_and_the_late_lease_is_given_back(
    zookeeper_server: ZooKeeperServer, backends: list[ZooKeeperBackend]
) -> None:
    """A request to a frozen server gives ``FenceUnavailable`` after ``timeout``; the
    acquire that the server applies once thawed is given back, so the lease is free
    again (not held by the session for ever). The session's server, frozen for about
    half a second (its tests run one at a time on one worker, the zookeeper group):
    a JVM of its own cost a start of its own."""
    name = fresh("frozen")
    backend = connect(f"{zookeeper_server.url}?timeout=0.5&session_timeout=30", backends)
    fence = backend.fence(name)
    fence.release(fence.acquire(timeout=0))  # connected, the fence znode exists
    with zookeeper_server.frozen():
        outcome = _acquire_in_thread(fence, 0)
    assert isinstance(outcome, fencing.FenceUnavailable), outcome
    other = connect(zookeeper_server.url, backends).fence(name)
    token = other.acquire(timeout=PATIENCE)  # the late lease was given back
    other.release(token)


# -- leader loss ---------------------------------------------------------------------------


def _renew_through(fence: fencing.Fence, token: fencing.FenceToken) -> str:
    """Renew until the ensemble answers: ``survived`` or ``lost``."""
    for _ in range(int(PATIENCE / 0.1)):
        try:
            fence.renew(token)
        except fencing.LeaseLost:
            return "lost"
        except fencing.FenceUnavailable:
            threading.Event().wait(0.1)  # the client moves to another member
            continue
        return "survived"
    pytest.fail(f"the ensemble did not answer for {PATIENCE}s after losing its leader")


@pytest.mark.parametrize("how", ["kill", "freeze"])
def test_leader_loss_while_a_fence_is_held(
    zookeeper_ensemble: ZooKeeperEnsemble, backends: list[ZooKeeperBackend], how: str
) -> None:
    """Kill (SIGKILL) or freeze (SIGSTOP) the leader while a fence is held: the fence
    keeps working through the other members, its lease either survives or is reported
    lost, and every later token is higher."""
    url = f"{zookeeper_ensemble.url}?timeout=2&session_timeout=4"
    holder, rival = connect(url, backends), connect(url, backends)
    name = fresh(f"leader-{how}")
    fence = holder.fence(name)
    token = fence.acquire(timeout=0)
    leader = zookeeper_ensemble.leader()
    try:
        if how == "kill":
            zookeeper_ensemble.kill_leader()
        else:
            leader.freeze()
            zookeeper_ensemble.wait_serving(
                [m for m in zookeeper_ensemble.members if m is not leader]
            )
        outcome = _renew_through(fence, token)
        if outcome == "survived":
            with pytest.raises(fencing.AcquireTimeout):
                rival.fence(name).acquire(timeout=0)
            fence.release(token)
        successor = rival.fence(name)
        newer = successor.acquire(timeout=PATIENCE)
        assert newer > token, f"token {newer} after {token} (the lease {outcome})"
        successor.release(newer)
        latest = fence.acquire(timeout=0)  # the first holder's fence works on
        assert latest > newer, f"token {latest} after {newer}"
        fence.release(latest)
    finally:
        if how == "freeze":
            leader.thaw()
        zookeeper_ensemble.heal()


# -- the operators' commands ---------------------------------------------------------------


def test_status_command_on_a_zookeeper_url(
    zookeeper_server: ZooKeeperServer,
    backends: list[ZooKeeperBackend],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``fencing status`` on a zookeeper:// URL: the lease has no expiry (it lives with
    its session), and a free fence shows its last token. What status, list and
    force-release promise is ``OperationsContract``'s (test_zookeeper_contract.py)."""
    from fencing import cli

    url, tag = zookeeper_server.url, uuid.uuid4().hex[:8]
    backend = connect(url, backends)
    held, free = backend.fence(f"ops{tag}:held"), backend.fence(f"ops{tag}:free")
    token = held.acquire(timeout=0)
    free.release(last := free.acquire(timeout=0))
    capsys.readouterr()
    assert cli.main(["status", "--url", url, f"ops{tag}:held", f"ops{tag}:free"]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert f"with token {int(token)}, no expiry" in first
    assert second == f"ops{tag}:free: free; last token {int(last)}"
    held.release(token)
