"""MemoryFence: what the contract (tests/test_contract_issuers.py) does not reach.

Its lease and token promises (release, expiry, exclusion, timeouts, renew, exact
holder, hold, bad input, racing threads) are checked there, blocking and asyncio.
"""

from __future__ import annotations

import pytest
from waiting import wait_until

import fencing
import fencing.aio
from fencing import MemoryIssuer


def test_hold_notices_a_lease_lost_under_it() -> None:
    """The background renewal finds the lease gone (released under the hold) and sets
    the hold's own flag at once, before the block ends; leaving raises ``LeaseLost``."""
    fence = fencing.MemoryFence("m:5", ttl=0.3, issuer=MemoryIssuer())
    hold = fence.hold()
    with pytest.raises(fencing.LeaseLost), hold as token:
        fence.release(token)  # the lease disappears under the holder
        wait_until(lambda: hold.lost, "the renewal marks the hold lost")


def test_hold_without_renewal_that_outlives_its_ttl_is_marked_lost() -> None:
    """``hold(auto_renew=False)`` past its ttl: leaving raises ``LeaseLost`` (the release
    finds the lease gone) and the hold says so, as a hold whose renewal failed does."""
    now = [0.0]  # the issuer's clock, moved by the test: the ttl passes without waiting
    fence = fencing.MemoryFence("m:6", ttl=5, issuer=MemoryIssuer(lambda: now[0]))
    hold = fence.hold(auto_renew=False)
    with pytest.raises(fencing.LeaseLost), hold:
        now[0] += 10
        assert not hold.lost  # nothing renews, so nothing has looked yet
    assert hold.lost


async def test_async_hold_without_renewal_that_outlives_its_ttl_is_marked_lost() -> None:
    """The asyncio twin of the test above."""
    now = [0.0]
    fence = fencing.aio.MemoryFence("m:7", ttl=5, issuer=MemoryIssuer(lambda: now[0]))
    hold = fence.hold(auto_renew=False)
    with pytest.raises(fencing.LeaseLost):
        async with hold:
            now[0] += 10
    assert hold.lost
