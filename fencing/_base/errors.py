"""The exception tree of ``fencing``.

::

    FencingError
    ├── AcquireTimeout      (also a TimeoutError)  nothing granted (lease, permit, admission,
    │                                              term) within the timeout
    ├── LeaseLost                                  renew/release by someone who no longer holds it
    ├── StaleTokenError                            a guard refused a token below its high-water mark
    ├── UnfencedWriteError                         a fenced SQL row was updated without a new token
    ├── FenceUnavailable                           the issuer or mark backend is unreachable/failing
    │   └── NotReplicated                          too few replicas acknowledged a lease in time
    ├── FenceSetupError                            the backend answers but is not set up for fencing
    └── MissingExtra    (also a ModuleNotFoundError) an optional dependency is not installed

Backend errors are never raised bare: they are wrapped in ``FenceUnavailable`` with
``raise ... from driver_error`` so the cause stays visible (``issuer_error``).

A leaf: imports nothing from the package (the standard library only), so every other
module can import it. Logging and counting a stale rejection is the guards' part
(``rejected`` in ``_resource.marks``), not the exception's.
"""

from __future__ import annotations


class FencingError(Exception):
    """Base class of every error raised by ``fencing``."""


#: What each kind of primitive did not get in time, for ``AcquireTimeout``'s message.
_NOT_GOT = {
    "fence": "lease not acquired",
    "semaphore": "no permit",
    "limiter": "no admission",
    "election": "not elected",
}


class AcquireTimeout(FencingError, TimeoutError):
    """Nothing was granted within the ``timeout`` of ``acquire`` (or ``campaign``): the
    lease stayed taken, every permit of a semaphore stayed taken, a limiter's window
    stayed full, or another candidate stayed leader. ``kind`` says which (``"fence"``,
    ``"semaphore"``, ``"limiter"``, ``"election"``) and the message says it too."""

    def __init__(self, name: str, timeout: float | None, kind: str = "fence") -> None:
        self.name = name
        self.timeout = timeout
        self.kind = kind
        super().__init__(f"{kind} {name!r}: {_NOT_GOT[kind]} within {timeout}s")


class LeaseLost(FencingError):
    """The caller no longer holds the lease it names (it expired or was never held).

    Raised by ``renew`` and ``release``, and on leaving ``hold()`` when a background
    renewal found the lease gone. Work done since the lease was lost may be stale:
    guards at the resource reject its writes.
    """

    def __init__(
        self, name: str, token: int | None, detail: str = "lease is no longer held"
    ) -> None:
        self.name = name
        self.token = token
        super().__init__(f"fence {name!r}, token {token}: {detail}")


class StaleTokenError(FencingError):
    """A guard refused a write: ``token`` is below the high-water mark ``current``.

    Nothing was written. The writer's lease was superseded by a newer holder.
    """

    def __init__(self, token: int, current: int | None, resource: str = "") -> None:
        self.token = token
        self.current = current
        self.resource = resource
        where = f" by {resource}" if resource else ""
        super().__init__(
            f"stale fence token {token} rejected{where}: a write with token {current} "
            "was already accepted"
        )


class UnfencedWriteError(FencingError):
    """A fenced resource was changed without stamping a fence token (see the SQL guide)."""


class FenceUnavailable(FencingError):
    """The issuer or a mark backend could not be reached or failed.

    The operation did not take effect on our side. For ``acquire`` the lease may still
    have been taken on the server if only the reply was lost; that orphan lease simply
    expires, and a retry receives a newer token.
    """


class NotReplicated(FenceUnavailable):
    """Fewer replicas than ``min_replicas`` acknowledged a lease within the replica timeout.

    From ``acquire``: the lease was released again, nothing is held (``token`` is the
    token it had). From ``renew``: the lease is still held on the primary with its new
    lifetime, but a failover now could lose the renewal; ``hold()`` retries it like an
    unreachable issuer. ``acks`` replicas acknowledged, ``wanted`` were asked for.
    """

    def __init__(self, name: str, token: int, acks: int, wanted: int, detail: str) -> None:
        self.name = name
        self.token = token
        self.acks = acks
        self.wanted = wanted
        super().__init__(
            f"fence {name!r}, token {token}: {acks} of {wanted} replicas acknowledged; {detail}"
        )


class FenceSetupError(FencingError):
    """The backend answers but is not set up for fencing; the message says what to do.

    For instance the ``fencing_leases`` table is missing (run ``fencing migrate``), or
    the Redis user's ACL forbids running the scripts. Retrying does not help: it is
    not a ``FenceUnavailable``. Nothing was changed.
    """


class MissingExtra(FencingError, ModuleNotFoundError):
    """A part of ``fencing`` needs an optional dependency that is not installed; the
    message names the extra that brings it (``pip install -e '.[sql]'``).

    ``name`` is the missing module (as for every ``ModuleNotFoundError``), ``extra`` the
    extra of ``pyproject.toml`` that installs it, ``what`` the part that needs it.
    """

    def __init__(self, what: str, extra: str, module: str) -> None:
        self.what = what
        self.extra = extra
        super().__init__(
            f"{what} needs the {extra!r} extra: pip install -e '.[{extra}]' "
            f"(or 'fencing[{extra}]'); {module!r} is not installed",
            name=module,
        )


def issuer_error(backend: str, exc: BaseException) -> FenceUnavailable:
    """The ``FenceUnavailable`` for a driver error; raise it ``from exc``."""
    return FenceUnavailable(f"{backend} failed: {type(exc).__name__}: {exc}")
