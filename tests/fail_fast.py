"""Redis clients that give up at the first failure, for tests that point a client at a
stopped server, a port nothing listens on, or a wrong password.

By default redis-py retries a command whose connection failed (redis-py 8: ten times,
backing off up to a second between tries), so the error a test expects comes seconds
late. A client's retry policy is its owner's choice (fencing uses the client it is
given as it is), so these tests make the same call and get the same error without
waiting those retries out.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio
import redis.asyncio.retry
from redis.backoff import NoBackoff
from redis.retry import Retry


def failing_fast(port: int, timeout: float = 0.5, **options: Any) -> redis.Redis:
    """A blocking client of ``port`` without retries; ``timeout`` bounds a connect and a
    reply, ``options`` are more ``redis.Redis`` arguments."""
    return redis.Redis(
        port=port,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        **options,
    )


def failing_fast_async(port: int, timeout: float = 0.5) -> redis.asyncio.Redis:
    """``failing_fast`` for asyncio."""
    return redis.asyncio.Redis(
        port=port,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=redis.asyncio.retry.Retry(NoBackoff(), 0),
    )
