"""``etcd://`` URLs: the members, credentials and options of an etcd cluster, checked.

::

    etcd://[user:password@]host:port[,host:port...][?option=value&...]
    etcds://...                                      the same over TLS

=================  =========================================================================
option             meaning
=================  =========================================================================
``timeout``        seconds one request may take, retries on other members included
                   (default 5; one member gets at most its share); past it the call
                   raises ``FenceUnavailable``
``prefix``         key prefix of the fences (default ``fencing/``): the fence ``<name>`` is
                   the key ``<prefix><name>``
``tls``            ``true``: TLS (what ``etcds://`` means); ``false``: plain (the default)
``ca``             CA bundle (PEM file) to verify the members with (default: the system's)
``cert``, ``key``  client certificate and its key (PEM files), for TLS client auth
=================  =========================================================================

Parsing does no I/O (the files named by ``ca``/``cert``/``key`` are read when the first
channel opens). Anything else, no host, a bad port or an unknown option is a
``ValueError``. Imports the standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

DEFAULT_TIMEOUT = 5.0
DEFAULT_PREFIX = "fencing/"
_SCHEMES = {"etcd": False, "etcds": True}
_OPTIONS = ("timeout", "prefix", "tls", "ca", "cert", "key")
_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


@dataclass(frozen=True)
class EtcdOptions:
    """Where and how to reach an etcd cluster (see the module docstring)."""

    endpoints: tuple[str, ...]
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout: float = DEFAULT_TIMEOUT
    prefix: str = DEFAULT_PREFIX
    tls: bool = False
    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        if not self.endpoints:
            raise ValueError("an etcd cluster needs at least one host:port")
        for endpoint in self.endpoints:
            _check_endpoint(endpoint)
        if (self.user is None) != (self.password is None):
            raise ValueError("etcd auth needs both a user and a password")
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)):
            raise TypeError(f"timeout must be a number of seconds, not {self.timeout!r}")
        if not (math.isfinite(self.timeout) and self.timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, not {self.timeout}")
        if not isinstance(self.prefix, str) or "\x00" in self.prefix:
            raise ValueError(f"bad key prefix {self.prefix!r}")
        if (self.cert is None) != (self.key is None):
            raise ValueError("a TLS client certificate needs both cert and key")
        if not self.tls and (self.ca or self.cert):
            raise ValueError("ca, cert and key need TLS (etcds:// or tls=true)")


def _check_endpoint(endpoint: str) -> None:
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad etcd member {endpoint!r}: expected host:port")


def parse_etcd_url(url: str) -> EtcdOptions:
    """The ``EtcdOptions`` of an ``etcd://`` or ``etcds://`` URL; ``ValueError`` if bad."""
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, not {type(url).__name__}")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise ValueError(f"not an etcd URL (etcd:// or etcds://): {url!r}")
    if parts.path not in ("", "/") or parts.fragment:
        raise ValueError(f"an etcd URL has no path or fragment: {url!r}")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    user = password = None
    if userinfo:
        name, colon, secret = userinfo.partition(":")
        if not colon:
            raise ValueError("etcd auth needs user:password@ in the URL")
        user, password = unquote(name), unquote(secret)
    endpoints = tuple(host.strip() for host in hosts.split(",") if host.strip())
    options: dict[str, object] = {"tls": _SCHEMES[scheme]}
    for option, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if option not in _OPTIONS:
            raise ValueError(f"unknown etcd URL option {option!r} (known: {', '.join(_OPTIONS)})")
        options[option] = _option(option, value)
    return EtcdOptions(endpoints, user, password, **options)  # type: ignore[arg-type]


def _option(option: str, value: str) -> object:
    if option == "timeout":
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"etcd URL option timeout={value!r} is not a number") from None
    if option == "tls":
        if value.lower() not in _BOOLEANS:
            raise ValueError(f"etcd URL option tls={value!r}: use true or false")
        return _BOOLEANS[value.lower()]
    if not value and option != "prefix":
        raise ValueError(f"etcd URL option {option} is empty")
    return value
