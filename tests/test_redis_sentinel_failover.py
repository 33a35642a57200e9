"""The failover proof (issue 10): a promoted replica that missed the last writes.

A real primary, one replica and three Sentinels (``fencing.testing.servers``). The
replica is frozen and cut off (docs/design.md, *Testing a failover that loses writes*),
tokens are issued on the primary, the primary is SIGKILLed, and Sentinel promotes the
replica. ``RedisFence``'s clock-floored tokens keep increasing across the failover; a
control counter that only ``INCR``s (what Redisson's ``RFencedLock`` does) goes back in
the same run, which shows that the test can fail.
"""

from __future__ import annotations

import pytest
import redis

import fencing
from fencing.redis._scripts import key_prefix
from fencing.testing.servers import SentinelGroup

CONTROL = "control:incr-only-token"


def issue(fence: fencing.RedisFence, client: redis.Redis, n: int) -> tuple[list[int], list[int]]:
    """``n`` acquire/release cycles: the fence's tokens and the INCR-only control's."""
    tokens, control = [], []
    for _ in range(n):
        token = fence.acquire(timeout=0)
        fence.release(token)
        tokens.append(int(token))
        control.append(int(client.incr(CONTROL)))  # an INCR-only fence token, as Redisson's
    return tokens, control


def test_tokens_increase_across_a_failover_that_lost_writes(sentinel_group: SentinelGroup) -> None:
    group = sentinel_group
    primary = redis.Redis(port=group.primary.port, socket_timeout=5)
    name = "orders:7"
    counter = (key_prefix(name) + "counter").encode()
    synced, synced_control = issue(fencing.RedisFence(primary, name), primary, 3)
    assert primary.wait(1, 5000) == 1  # the replica has these

    group.freeze_replica()
    lost, lost_control = issue(fencing.RedisFence(primary, name), primary, 3)
    assert int(primary.get(counter) or 0) == lost[-1]
    group.kill_primary()
    group.thaw_replica()
    group.wait_for_failover()
    assert group.primary_port() == group.replica.port

    promoted = redis.Redis(port=group.replica.port, socket_timeout=5)
    # the promoted replica really missed the last writes: its counter is the last synced token
    assert int(promoted.get(counter) or 0) == synced[-1]
    after, after_control = issue(fencing.RedisFence(promoted, name), promoted, 3)
    before = synced + lost
    print(f"tokens before: {before}\ntokens after:  {after}")
    print(f"INCR-only before: {synced_control + lost_control}, after: {after_control}")
    assert min(after) > max(before)
    assert after == sorted(set(after))
    # the control: an INCR-only token repeats (or goes below) one issued before the failover
    assert after_control[0] <= max(lost_control)
    assert set(after_control) & set(lost_control)

    # what that means at the resource: the holder of the last token before the failover
    # writes, then the first holder after it does; a guard keeps them apart only when the
    # second token is higher
    mark = fencing.MemoryMark()
    write = fencing.guard(lambda: None, mark=mark, name="orders")
    write(max(before))
    write(after[0])
    with pytest.raises(fencing.StaleTokenError):
        write(max(before))  # the old holder, late: refused
    repeated = after_control[0]
    control_write = fencing.guard(lambda: None, mark=fencing.MemoryMark(), name="control")
    control_write(repeated)  # the pre-failover holder of INCR token `repeated`
    control_write(repeated)  # and the post-failover one: both accepted, two holders wrote
