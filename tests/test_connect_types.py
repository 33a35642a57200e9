"""``fencing.connect()``'s type: every backend class it can return is a ``Backend``, with
every method of the protocol, and a primitive that a backend lacks is a clear error."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable

import pytest

import fencing
from fencing._connect import _BACKENDS, Backend
from fencing.etcd._backend import EtcdBackend
from fencing.redis._backend import RedisBackend, RedisClusterBackend, RedlockBackend
from fencing.sql._backend import SqlBackend
from fencing.zookeeper._backend import ZooKeeperBackend

#: The methods of the protocol (``url`` is its one attribute).
METHODS = sorted(
    name
    for name, value in vars(Backend).items()
    if inspect.isfunction(value) and not name.startswith("_")
)


def typed(url: str) -> list[Backend]:
    """Checked by mypy (``make lint``), not run: each class where a ``Backend`` goes."""
    return [
        RedisBackend(url),
        RedisClusterBackend(url),
        RedlockBackend(url),
        SqlBackend(url),
        EtcdBackend(url),
        ZooKeeperBackend(url),
    ]


def test_the_protocol_has_what_the_docs_use() -> None:
    assert {
        "fence",
        "aio_fence",
        "election",
        "aio_election",
        "semaphore",
        "aio_semaphore",
        "limiter",
        "aio_limiter",
        "rwlock",
        "aio_rwlock",
        "close",
    } <= set(METHODS)


@pytest.mark.parametrize("where", sorted(set(_BACKENDS.values())), ids=lambda w: w[1])
def test_every_backend_class_has_every_method(where: tuple[str, str]) -> None:
    cls = getattr(importlib.import_module(where[0]), where[1])
    for name in METHODS:
        method = getattr(cls, name, None)
        assert callable(method), f"{cls.__name__} has no {name}"
        wanted = inspect.signature(getattr(Backend, name))
        got = inspect.signature(method)
        assert list(got.parameters.values()) == list(wanted.parameters.values()), (
            f"{cls.__name__}.{name}{got} is not Backend.{name}{wanted}"
        )


@pytest.mark.parametrize(
    ("url", "call", "message"),
    [
        ("redis+redlock://a:1,b:2,c:3", lambda b: b.semaphore("s", 2), "no semaphore"),
        ("redis+redlock://a:1,b:2,c:3", lambda b: b.aio_semaphore("s", 2), "no semaphore"),
        ("redis+redlock://a:1,b:2,c:3", lambda b: b.election("e"), "no election"),
        ("redis+redlock://a:1,b:2,c:3", lambda b: b.aio_election("e"), "no election"),
        ("redis+redlock://a:1,b:2,c:3", lambda b: b.limiter("l", 5, 1.0), "no limiter"),
        ("etcd://localhost:2379", lambda b: b.limiter("l", 5, 1.0), "no limiter"),
        ("zookeeper://localhost:2181", lambda b: b.aio_limiter("l", 5, 1.0), "no limiter"),
    ],
)
def test_a_primitive_a_backend_lacks_is_a_clear_error(
    url: str, call: Callable[[Backend], object], message: str
) -> None:
    backend = fencing.connect(url)
    with pytest.raises(ValueError, match=f"{message}.* are on .*Redis") as caught:
        call(backend)
    assert type(backend).__name__ in str(caught.value)
