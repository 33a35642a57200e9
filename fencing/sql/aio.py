"""``fencing.sql.aio``: the asyncio SQL fence and issuer, and the asyncio claims (needs
``fencing[async]``).

``SqlFence`` and ``SqlIssuer`` here are the asyncio twins of ``fencing.sql``'s, under the
same names, as in every backend's ``aio`` module; so are ``AdvisoryFence`` and
``AdvisoryIssuer`` (leases as PostgreSQL advisory locks), and ``advisory_xact``. The old
names ``AsyncSqlFence`` and ``AsyncSqlIssuer`` still work, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import warnings
from typing import Any

from ._async_advisory import AsyncAdvisoryFence as AdvisoryFence
from ._async_advisory import AsyncAdvisoryIssuer as AdvisoryIssuer
from ._async_advisory import advisory_xact
from ._async_claims import claim, claim_rows, fenced_get
from ._async_issuer import AsyncSqlFence as SqlFence
from ._async_issuer import AsyncSqlIssuer as SqlIssuer

#: Deprecated name -> the name it was renamed to.
_RENAMED = {"AsyncSqlFence": "SqlFence", "AsyncSqlIssuer": "SqlIssuer"}


def __getattr__(name: str) -> Any:
    new = _RENAMED.get(name)
    if new is None:
        raise AttributeError(f"module 'fencing.sql.aio' has no attribute {name!r}")
    warnings.warn(
        f"fencing.sql.aio.{name} is deprecated: use fencing.sql.aio.{new} (the same class)",
        DeprecationWarning,
        stacklevel=2,
    )
    return globals()[new]


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
