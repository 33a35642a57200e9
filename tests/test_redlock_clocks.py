"""Redlock's tokens while one node's wall clock is an hour off (issue 20): that node's
``redis-server`` runs under libfaketime (``RedisServer(faketime=...)``), its clock
jumped an hour ahead and then an hour back while it runs, and it is restarted empty
with its clock still behind. Each acquisition is made with a chosen majority (the third
node frozen for it), so every pair of nodes issues a token in turn.

The claim checked is the one of docs/redlock.md: tokens of completed acquisitions
strictly increase, whatever the clocks, while a majority keeps its data; so a guarded
store accepts every holder's write, and still refuses the oldest token at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from waiting import PATIENCE, wait_until

from fencing import FileStore, StaleTokenError
from fencing.redis import RedlockFence
from fencing.redis._redlock_scripts import redlock_keys
from fencing.testing.servers import RedisServer

NAME = "clocks"
HOUR_US = 3600 * 10**6


def _state(servers: list[RedisServer]) -> list[tuple[int | None, int]]:
    """(counter, lease keys) on every node."""
    keys = redlock_keys(NAME)
    found = []
    for server in servers:
        with redis.Redis(port=server.port) as client:
            raw = client.get(keys.counter)
            found.append((None if raw is None else int(raw), int(client.exists(keys.lease))))
    return found


def _now_us(client: redis.Redis) -> int:
    """A node's own clock (``TIME``), in microseconds."""
    seconds, micros = client.time()
    return seconds * 10**6 + micros


def test_tokens_keep_increasing_while_a_node_clock_is_an_hour_off(
    redis_factory: Callable[..., RedisServer], tmp_path: Path
) -> None:
    skewed = redis_factory(faketime="+0")  # on time, ready to jump
    servers = [skewed, redis_factory(), redis_factory()]
    # a frozen node's calls wait for its thaw (30 s), they do not fail
    clients = [
        redis.Redis(port=server.port, socket_timeout=30, retry=Retry(NoBackoff(), 0))
        for server in servers
    ]
    fence = RedlockFence(clients, NAME, ttl=2)
    store = FileStore(tmp_path / "ledger")
    tokens: list[int] = []

    def round_without(frozen: int | None) -> int:
        """Acquire with the other nodes as the majority, write, release; then wait until
        every node has committed the token (the frozen one once thawed) and none has a
        lease left, so that the next round starts from a repaired state."""
        if frozen is not None:
            servers[frozen].freeze()
        try:
            token = fence.acquire(timeout=PATIENCE)
            store.write(b"%d" % token, token)  # refused: StaleTokenError fails the test
            fence.release(token)
        finally:
            if frozen is not None:
                servers[frozen].thaw()
        assert not tokens or token > tokens[-1], (tokens, token)
        tokens.append(token)
        wait_until(
            lambda: _state(servers) == [(token, 0)] * 3,
            f"every node committed {token} and holds no lease",
        )
        return token

    round_without(None)
    skewed.jump("+1h")  # the running node's clock jumps an hour ahead
    ahead = round_without(2)  # {skewed, 1}: the token follows the clock that is ahead
    assert ahead > _now_us(clients[1]) + HOUR_US // 2  # an hour ahead of an on-time node
    skewed.jump("-1h")  # and then two hours back: an hour behind the real time
    # the control: this node's clock alone (a per-node clock floor) would now give a
    # token more than an hour below the last one
    assert _now_us(clients[0]) < tokens[-1] - HOUR_US
    round_without(1)  # {skewed, 2}: its counter carries the token, not its clock
    skewed.stop()
    skewed.start()  # empty, its clock still an hour behind (checked by start)
    round_without(2)  # {skewed (empty, behind), 1}: node 1's counter carries the token
    servers[1].stop()
    servers[1].start()  # empty, on time: its clock is an hour below the tokens
    round_without(2)  # {skewed (repaired), 1 (empty)}: skewed's counter carries it
    round_without(0)  # {1, 2}
    round_without(None)
    assert tokens == sorted(set(tokens))
    assert store.token == tokens[-1]
    with pytest.raises(StaleTokenError):  # the guard still refuses what it should
        store.write(b"stale", tokens[0])
    for client in clients:
        client.close()
