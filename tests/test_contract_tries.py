"""The contract's tries (``LeaseTerms.in_time``): a machine too slow for a ``short_ttl``
lease makes a check try again, while a renew that fails any sooner still fails it."""

from __future__ import annotations

import time

import pytest

import fencing
from fencing import MemoryIssuer
from fencing.testing.contract import FenceContract, MakeFence


class NeverRenews(MemoryIssuer):
    """A broken issuer: renew finds no lease, however soon it comes."""

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        return False


class StallsTwice(MemoryIssuer):
    """A correct issuer on a stalled machine: its first two renews arrive after the
    lease they name has expired."""

    def __init__(self, stall: float) -> None:
        super().__init__()
        self.stall, self.stalls = stall, 0

    def renew(self, name: str, token: int, holder: str, ttl_ms: int) -> bool:
        if self.stalls < 2:
            self.stalls += 1
            time.sleep(self.stall)
        return super().renew(name, token, holder, ttl_ms)


class Contract(FenceContract):
    patience = 5.0


def fences(issuer: MemoryIssuer) -> MakeFence:
    return lambda name, ttl: fencing.MemoryFence(name, ttl, issuer=issuer)


def test_a_renew_that_fails_in_time_fails_the_check() -> None:
    # LeaseLost itself, not the end of the tries' patience (an AssertionError)
    with pytest.raises(fencing.LeaseLost):
        Contract().test_renew_extends_the_lease(fences(NeverRenews()))


def test_a_machine_too_slow_for_the_lease_is_tried_again() -> None:
    issuer = StallsTwice(stall=Contract.short_ttl + 0.1)
    Contract().test_renew_extends_the_lease(fences(issuer))
    assert issuer.stalls == 2


def test_tries_end_with_the_patience() -> None:
    class Impatient(Contract):
        patience = 0.5

    with pytest.raises(AssertionError, match="still waiting for a renew"):
        Impatient().test_renew_extends_the_lease(fences(StallsTwice(stall=1.0)))
