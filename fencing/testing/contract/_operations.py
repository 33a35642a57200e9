"""``OperationsContract``: the promises of the operators' capabilities, ``Inspects`` and
``ForceReleases``."""

from __future__ import annotations

from typing import Any

import pytest

from ... import Fence, LeaseLost
from ...issuer import ForceReleases, Inspects
from ._helpers import MakeFence, _assert_after
from ._terms import LeaseTerms


class OperationsContract(LeaseTerms):
    """The promises of the operators' capabilities, ``Inspects`` and ``ForceReleases``.

    Subclass it with the same ``make_fence`` fixture as ``FenceContract``; the issuer is
    the fences' ``issuer``. It checks: ``status`` follows the lease (free, held with its
    token and holder, free again with the last token); ``names`` lists the fences with a
    prefix and no others; ``force_release`` ends the lease whoever holds it, reports it,
    changes nothing when no lease is live, and the next token is higher, so the evicted
    holder's renew and release raise ``LeaseLost`` while the new lease is untouched.
    """

    @pytest.fixture
    def make_fence(self) -> MakeFence:
        """Override: return ``make(name, ttl)`` giving fresh fences on the issuer under test."""
        raise NotImplementedError("subclass OperationsContract and provide make_fence")

    @staticmethod
    def operations(fence: Fence) -> Any:
        """The fence's issuer, which must have both capabilities."""
        issuer = fence.issuer
        assert isinstance(issuer, Inspects), f"{issuer!r} is not fencing.issuer.Inspects"
        assert isinstance(issuer, ForceReleases), f"{issuer!r} is not ForceReleases"
        return issuer

    def test_status_follows_the_lease(self, make_fence: MakeFence) -> None:
        name = self.fresh_name("status")
        fence = make_fence(name, self.long_ttl)
        issuer = self.operations(fence)
        unused = issuer.status(name)
        assert unused.name == name and not unused.held, f"a name never used: {unused}"
        assert (unused.holder, unused.token, unused.expires_in) == (None, None, None), unused
        assert unused.last_token is None, f"a name never used has a last token: {unused}"
        token = fence.acquire(timeout=0)
        held = issuer.status(name)
        assert held.held and held.token == token == held.last_token, f"{held} after {token}"
        assert isinstance(held.holder, str) and held.holder, f"no holder id: {held}"
        left = held.expires_in
        assert left is None or 0 < left <= self.long_ttl, f"{left}s left of {self.long_ttl}"
        fence.release(token)
        free = issuer.status(name)
        assert not free.held and free.token is None and free.holder is None, f"{free}"
        assert free.last_token in (token, None), f"last token {free.last_token}, not {token}"

    def test_names_lists_the_fences_with_a_prefix(self, make_fence: MakeFence) -> None:
        prefix = self.fresh_name("names") + ":"
        names = [f"{prefix}a", f"{prefix}b*_%", f"{prefix}c"]  # glob and LIKE characters
        fences = [make_fence(name, self.long_ttl) for name in [*names, prefix[:-1] + "x:d"]]
        tokens = [fence.acquire(timeout=0) for fence in fences]
        issuer = self.operations(fences[0])
        listed = list(issuer.names(prefix))
        assert sorted(listed) == sorted(names), f"names({prefix!r}) gave {listed}"
        assert list(issuer.names(names[1])) == [names[1]], "a prefix is literal"
        for fence, token in zip(fences, tokens, strict=True):
            fence.release(token)

    def test_force_release_evicts_the_holder_and_the_next_token_is_higher(
        self, make_fence: MakeFence
    ) -> None:
        name = self.fresh_name("force")
        evicted, successor = make_fence(name, self.long_ttl), make_fence(name, self.long_ttl)
        issuer = self.operations(evicted)
        token = evicted.acquire(timeout=0)
        ended = issuer.force_release(name)
        assert ended.held and ended.token == token, f"ended {ended}, held token {token}"
        newer = successor.acquire(timeout=0)  # free at once, not after the ttl
        _assert_after(newer, token, "the evicted ")
        with pytest.raises(LeaseLost):
            evicted.renew(token)
        with pytest.raises(LeaseLost):
            evicted.release(token)
        successor.renew(newer)  # the evicted holder's calls did not touch the new lease
        successor.release(newer)
        nothing = issuer.force_release(name)
        assert not nothing.held and nothing.token is None, f"no lease was live: {nothing}"
        assert successor.acquire(timeout=0) > newer
