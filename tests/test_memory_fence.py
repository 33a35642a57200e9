"""MemoryFence: what the contract (tests/test_contract_issuers.py) does not reach.

Its lease and token promises (release, expiry, exclusion, timeouts, renew, exact
holder, hold, bad input, racing threads) are checked there, blocking and asyncio.
"""

from __future__ import annotations

import time

import pytest

import fencing
from fencing import MemoryIssuer


def test_hold_notices_a_lease_lost_under_it() -> None:
    """The background renewal finds the lease gone (released under the hold) and sets
    the hold's own flag at once, before the block ends; leaving raises ``LeaseLost``."""
    fence = fencing.MemoryFence("m:5", ttl=0.06, issuer=MemoryIssuer())
    hold = fence.hold()
    with pytest.raises(fencing.LeaseLost), hold as token:
        fence.release(token)  # the lease disappears under the holder
        time.sleep(0.1)
        assert hold.lost
