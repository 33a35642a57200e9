"""``fencing.sql.aio``: the asyncio SQL fence and issuer, and the asyncio claims (needs
``fencing[async]``).

``SqlFence`` and ``SqlIssuer`` here are the asyncio twins of ``fencing.sql``'s, under the
same names, as in every backend's ``aio`` module; so are ``AdvisoryFence`` and
``AdvisoryIssuer`` (leases as PostgreSQL advisory locks), and ``advisory_xact``. The old
names ``AsyncSqlFence`` and ``AsyncSqlIssuer`` still work, with a ``DeprecationWarning``.
"""

from __future__ import annotations

from .._base.lazy import lazy_names
from ._async_advisory import AsyncAdvisoryFence as AdvisoryFence
from ._async_advisory import AsyncAdvisoryIssuer as AdvisoryIssuer
from ._async_advisory import advisory_xact
from ._async_claims import claim, claim_rows, fenced_get
from ._async_issuer import AsyncSqlFence as SqlFence
from ._async_issuer import AsyncSqlIssuer as SqlIssuer

#: Deprecated spelling -> its name now.
_RENAMED = {
    "AsyncSqlFence": "fencing.sql.aio.SqlFence",
    "AsyncSqlIssuer": "fencing.sql.aio.SqlIssuer",
}

__getattr__ = lazy_names(__name__, {}, _RENAMED)


__all__ = [
    "AdvisoryFence",
    "AdvisoryIssuer",
    "SqlFence",
    "SqlIssuer",
    "advisory_xact",
    "claim",
    "claim_rows",
    "fenced_get",
]
