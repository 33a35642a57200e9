"""The I/O of the etcd issuer: gRPC channels to the members, failover, auth, errors.

``Cluster`` (blocking, ``grpc``) and ``AsyncCluster`` (asyncio, ``grpc.aio``) are the
two ports the issuer's steps are carried out on (see ``_flow``): the steps (``Unary``,
``KeepAlive``, ``WatchRelease``) hold a request from ``_messages`` and say which call
of the etcd v3 API carries it; a port sends it to one member and
decides, in one place for both (``_next_move``), what a failure means:

- ``UNAVAILABLE`` (the member is down, or has no leader during an election) or
  ``DEADLINE_EXCEEDED`` (it did not answer in its share of the time: frozen,
  partitioned): try the next member, with a short back-off, until the port's
  ``timeout`` has passed. With several members, one attempt gets at most ``timeout``
  divided by their number, so a member that answers nothing leaves time for the others;
- ``INTERNAL: Internal error from Core``: not an answer from the member but grpc.aio's
  own status when its core fails a batch (a bidirectional call, a watch or keep-alive,
  that the member ended while the client still wrote its request): try again, on the
  same member;
- ``UNAUTHENTICATED`` with a user and password (the auth token expired): authenticate
  again, once, and retry;
- ``PERMISSION_DENIED``: ``FenceSetupError`` (the etcd user lacks a role);
- anything else, or the timeout spent: ``FenceUnavailable`` from the gRPC error.

So no call blocks longer than ``timeout`` (a ``Watch`` longer than that is asked for
explicitly, gets its whole time on one member, and ends quietly at its deadline).

That loop is written once, as a flow (``_Failover.failover``) of ``_Attempt`` and
``_Sleep`` steps, which ``Cluster.call`` drives with ``run_sync`` and ``AsyncCluster.call``
with ``run_async``.

Imports the core's errors and flows, the URL options and grpcio.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
import grpc.aio
from aetcd import rpc

from .._base.errors import FenceSetupError, FenceUnavailable, FencingError
from .._base.flow import Flow, run_async, run_sync
from ._url import EtcdOptions

R = TypeVar("R")

FIRST_BACKOFF = 0.02
MAX_BACKOFF = 0.25
_RETRY = "retry"
_AUTH = "auth"
_FAIL = "fail"
_MISSING = "missing"


def _credentials(options: EtcdOptions) -> grpc.ChannelCredentials:
    def read(path: str | None) -> bytes | None:
        if path is None:
            return None
        with open(path, "rb") as file:
            return file.read()

    return grpc.ssl_channel_credentials(
        root_certificates=read(options.ca),
        private_key=read(options.key),
        certificate_chain=read(options.cert),
    )


class _Member:
    """The stubs of one member's channel (blocking or asyncio: the same stub classes)."""

    __slots__ = ("auth", "channel", "kv", "lease", "watch")

    def __init__(self, channel: Any) -> None:
        self.channel = channel
        self.kv = rpc.KVStub(channel)
        self.lease = rpc.LeaseStub(channel)
        self.watch = rpc.WatchStub(channel)
        self.auth = rpc.AuthStub(channel)


class _Failover:
    """What the two ports share: the members, which one is current, the auth token, and
    the flow of a call (``failover``)."""

    def __init__(self, options: EtcdOptions) -> None:
        self.options = options
        self.timeout = options.timeout
        self._members: dict[int, _Member] = {}
        self._current = 0
        self._lock = threading.Lock()
        self.metadata: tuple[tuple[str, str], ...] | None = None

    def _open(self, endpoint: str) -> Any:
        raise NotImplementedError

    def _forget_members(self) -> list[_Member]:
        """Take every open member out (``close``: each port closes their channels)."""
        with self._lock:
            members, self._members = list(self._members.values()), {}
        return members

    def member(self) -> tuple[int, _Member]:
        with self._lock:
            index = self._current
            member = self._members.get(index)
            if member is None:
                member = self._members[index] = _Member(self._open(self.options.endpoints[index]))
            return index, member

    def skip(self, index: int) -> None:
        """Move on from member ``index`` (unless another call did already)."""
        with self._lock:
            if self._current == index:
                self._current = (index + 1) % len(self.options.endpoints)

    def _next_move(
        self, exc: grpc.RpcError, index: int, deadline: float, reauthed: bool, missing_ok: bool
    ) -> tuple[str, float]:
        """What to do after ``exc`` from member ``index``: (move, seconds to wait)."""
        code = exc.code()
        if code == grpc.StatusCode.NOT_FOUND and missing_ok:
            return _MISSING, 0.0
        if code == grpc.StatusCode.UNAUTHENTICATED and self.options.user and not reauthed:
            return _AUTH, 0.0
        if not client_core_failed(exc):
            if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                return _FAIL, 0.0
            self.skip(index)
        left = deadline - time.monotonic()
        return (_RETRY, left) if left > 0.001 else (_FAIL, 0.0)

    def share(self, deadline: float, whole: bool) -> float:
        """Seconds for one attempt: what is left, at most ``timeout`` / members unless
        ``whole`` (a watch, whose deadline is the end of the wait)."""
        left = deadline - time.monotonic()
        if not whole:
            left = min(left, self.timeout / len(self.options.endpoints))
        return max(left, 0.001)

    def failover(
        self, attempt: Callable[[_Member, float, Any], Any], timeout: float | None, missing_ok: bool
    ) -> Flow[_Attempt | _Sleep, Any]:
        """The flow of one call (see ``Cluster.call``): ``attempt`` on the current member,
        authenticated first when the port has a user and no token, failing over per
        ``_next_move``; its value is ``attempt``'s reply (``None`` for ``NOT_FOUND`` when
        ``missing_ok``)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        backoff, reauthed = FIRST_BACKOFF, False
        while True:
            index, member = self.member()
            try:
                if self.options.user and self.metadata is None:
                    auth = _Attempt(self._authenticate, member, self.share(deadline, False), None)
                    yield auth
                    self.metadata = (("token", auth.result.token),)
                call = _Attempt(
                    attempt, member, self.share(deadline, timeout is not None), self.metadata
                )
                yield call
                return call.result
            except grpc.RpcError as exc:
                move, left = self._next_move(exc, index, deadline, reauthed, missing_ok)
                if move == _MISSING:
                    return None
                if move == _FAIL:
                    raise _failed(exc) from exc
                if move == _AUTH:
                    self.metadata, reauthed = None, True
                    continue
                yield _Sleep(min(backoff, left))
                backoff = min(2 * backoff, MAX_BACKOFF)

    def _authenticate(self, member: _Member, seconds: float, metadata: Any) -> Any:
        """The ``Authenticate`` call (its reply, or an awaitable of it on ``grpc.aio``)."""
        request = rpc.AuthenticateRequest(name=self.options.user, password=self.options.password)
        return member.auth.Authenticate(request, timeout=seconds)


class _Attempt:
    """A step of ``failover``: ``call(member, seconds, metadata)`` once; ``result`` is its
    reply (on the asyncio port, what its awaitable gives)."""

    __slots__ = ("call", "member", "metadata", "result", "seconds")
    result: Any

    def __init__(
        self,
        call: Callable[[_Member, float, Any], Any],
        member: _Member,
        seconds: float,
        metadata: Any,
    ) -> None:
        self.call = call
        self.member = member
        self.seconds = seconds
        self.metadata = metadata

    def perform(self, port: object) -> None:
        self.result = self.call(self.member, self.seconds, self.metadata)

    async def aperform(self, port: object) -> None:
        self.result = await self.call(self.member, self.seconds, self.metadata)


class _Sleep:
    """A step of ``failover``: the back-off before the next member."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def perform(self, port: object) -> None:
        time.sleep(self.seconds)

    async def aperform(self, port: object) -> None:
        await asyncio.sleep(self.seconds)


def client_core_failed(exc: grpc.RpcError) -> bool:
    """Whether ``exc`` is grpc.aio's status for a batch its own core failed (seen when a
    member ends a bidirectional call while the client is still writing to it), not a
    status the member sent."""
    return bool(
        exc.code() == grpc.StatusCode.INTERNAL and exc.details() == "Internal error from Core"
    )


def _failed(exc: grpc.RpcError) -> FencingError:
    """The error for a gRPC error, in one line: its code and etcd's words.

    ``PERMISSION_DENIED`` is a ``FenceSetupError`` (retrying does not help: the etcd user
    needs a role); everything else ``FenceUnavailable``.
    """
    code = exc.code()
    said = f"{getattr(code, 'name', code)}: {exc.details()}"
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return FenceSetupError(
            f"etcd refused: {said}; grant the user a role with readwrite permission on the "
            "fences' key prefix (etcdctl role grant-permission ROLE --prefix=true readwrite "
            "fencing/)"
        )
    return FenceUnavailable(f"etcd failed: {said}")


class Cluster(_Failover):
    """The blocking port: calls to the cluster's members over ``grpc`` channels."""

    def _open(self, endpoint: str) -> Any:
        if self.options.tls:
            return grpc.secure_channel(endpoint, _credentials(self.options))
        return grpc.insecure_channel(endpoint)

    def call(
        self,
        attempt: Callable[[_Member, float, Any], R],
        timeout: float | None = None,
        missing_ok: bool = False,
    ) -> R | None:
        """``attempt(member, seconds, metadata)`` on the current member, failing over
        (see the module docstring); ``None`` for ``NOT_FOUND`` when ``missing_ok``.

        ``timeout`` (default: the port's, shared among the members) is this call's own
        time, given whole to each attempt: a watch's wait.
        """
        reply: R | None = run_sync(self.failover(attempt, timeout, missing_ok), self)
        return reply

    def close(self) -> None:
        for member in self._forget_members():
            member.channel.close()


class AsyncCluster(_Failover):
    """The asyncio port: the same calls over ``grpc.aio`` channels.

    A ``grpc.aio`` channel belongs to the event loop it was opened in; the port opens its
    channels on first use, in the loop of that call, and ``close`` ends them.
    """

    def __init__(self, options: EtcdOptions) -> None:
        super().__init__(options)
        self._loop: asyncio.AbstractEventLoop | None = None

    def _open(self, endpoint: str) -> Any:
        if self.options.tls:
            return grpc.aio.secure_channel(endpoint, _credentials(self.options))
        return grpc.aio.insecure_channel(endpoint)

    def member(self) -> tuple[int, _Member]:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # channels of another (finished) loop cannot serve
            with self._lock:
                self._members, self._loop = {}, loop
        return super().member()

    async def call(
        self,
        attempt: Callable[[_Member, float, Any], Awaitable[R]],
        timeout: float | None = None,
        missing_ok: bool = False,
    ) -> R | None:
        """See ``Cluster.call``."""
        reply: R | None = await run_async(self.failover(attempt, timeout, missing_ok), self)
        return reply

    async def close(self) -> None:
        self._loop = None
        for member in self._forget_members():
            await member.channel.close()
