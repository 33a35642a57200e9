"""Where a fence lives in ZooKeeper, and what a ``zookeeper://`` URL says: no I/O.

Every fence name has two znodes under ``/fencing`` (below the URL's chroot, if any)::

    /fencing/<encoded name>          persistent; data: the holder id of the last acquire;
                                     its data version counts the acquisitions of the name
    /fencing/<encoded name>/lease    ephemeral; data: the holder id; exists while held

A semaphore whose slots are the fences ``<group><k>`` (``fencing._primitives.semaphore``) also has
one znode of its own, outside ``/fencing`` so that it is never listed as a fence::

    /fencing-slots/<encoded group>   persistent; data: one past the highest slot ever
                                     taken (decimal); each take of a slot checks its
                                     version, and raises it when it takes a higher slot

A fence name is any ``str`` the core accepts (not empty, at most 256 characters, no
NUL), so it cannot be used as a path as it is: ``/``, ``.``, ``..`` and ZooKeeper's
forbidden characters would name another node or be refused. ``encode_name`` escapes
every character outside ``[A-Za-z0-9_:@-]`` as ``%XX`` of its UTF-8 bytes, ``%`` and ``.``
included, so each name is exactly one path segment, never ``.`` or ``..``, and two
names never share one.

Imports the core's validation only.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

from .._base.validate import check_name

ROOT = "/fencing"
#: Where the semaphores' width znodes live (see the module docstring).
SLOTS_ROOT = "/fencing-slots"
#: Seconds: the session timeout asked of the servers when the URL does not say.
DEFAULT_SESSION_TIMEOUT = 10.0
#: Seconds: how long one request (or the first connection) may take.
DEFAULT_TIMEOUT = 5.0

_PLAIN = frozenset(string.ascii_letters + string.digits + "_:@-")


def encode_name(name: str) -> str:
    """The one path segment of fence ``name`` (see the module docstring)."""
    check_name(name)
    return "".join(
        char if char in _PLAIN else "".join(f"%{byte:02X}" for byte in char.encode())
        for char in name
    )


def decode_name(segment: str) -> str:
    """The fence name of a path segment made by ``encode_name``."""
    return unquote(segment, errors="strict")


@dataclass(frozen=True)
class FencePaths:
    """The two znodes of one fence (see the module docstring)."""

    fence: str
    lease: str

    @classmethod
    def of(cls, name: str) -> FencePaths:
        fence = f"{ROOT}/{encode_name(name)}"
        return cls(fence, f"{fence}/lease")


def width_path(group: str) -> str:
    """The width znode of the semaphore whose slots are the fences ``<group><k>``."""
    return f"{SLOTS_ROOT}/{encode_name(group)}"


@dataclass(frozen=True)
class ZooKeeperUrl:
    """``zookeeper://host:port[,host:port...][/chroot][?option=value&...]``, parsed.

    Options: ``session_timeout`` (seconds, default 10: how long the servers keep a
    silent client's session, and so its leases) and ``timeout`` (seconds, default 5: how
    long one request, or the first connection, may take before ``FenceUnavailable``).
    """

    hosts: tuple[tuple[str, int], ...]
    chroot: str
    session_timeout: float
    timeout: float

    @property
    def connect_string(self) -> str:
        """The hosts and chroot as kazoo (and every ZooKeeper client) spells them."""
        hosts = ",".join(
            f"[{host}]:{port}" if ":" in host else f"{host}:{port}" for host, port in self.hosts
        )
        return hosts + self.chroot

    @classmethod
    def parse(cls, url: str) -> ZooKeeperUrl:
        """Parse ``url``; ``ValueError`` for no host, a bad port, chroot or option."""
        scheme, _, rest = url.partition("://")
        if scheme.lower() != "zookeeper":
            raise ValueError(f"not a zookeeper:// URL: {url!r}")
        parts = urlsplit("zookeeper://" + rest)
        if parts.fragment:
            raise ValueError(f"zookeeper URL with a #fragment: {url!r}")
        hosts = tuple(_host(item, url) for item in parts.netloc.split(",") if item)
        if not hosts:
            raise ValueError(f"zookeeper URL names no host: {url!r}")
        chroot = parts.path.rstrip("/")
        if chroot and any(seg in ("", ".", "..") for seg in chroot.split("/")[1:]):
            raise ValueError(f"zookeeper URL with a bad chroot {parts.path!r}: {url!r}")
        options = dict(parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False))
        unknown = set(options) - {"session_timeout", "timeout"}
        if unknown:
            raise ValueError(
                f"unknown zookeeper URL option(s) {sorted(unknown)}: use session_timeout, timeout"
            )
        return cls(
            hosts,
            chroot,
            _seconds(options, "session_timeout", DEFAULT_SESSION_TIMEOUT),
            _seconds(options, "timeout", DEFAULT_TIMEOUT),
        )


def _host(item: str, url: str) -> tuple[str, int]:
    if "@" in item:
        raise ValueError(f"zookeeper URL with credentials (not supported): {url!r}")
    if item.startswith("["):  # [IPv6]:port
        host, _, port = item[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = item.rpartition(":") if ":" in item else (item, "", "")
    if not host:
        raise ValueError(f"zookeeper URL with an empty host in {item!r}: {url!r}")
    if not port:
        return host, 2181
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"zookeeper URL with a bad port {port!r}: {url!r}")
    return host, int(port)


def _seconds(options: dict[str, str], key: str, default: float) -> float:
    if key not in options:
        return default
    try:
        value = float(options[key])
    except ValueError:
        raise ValueError(f"zookeeper URL option {key}={options[key]!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"zookeeper URL option {key}={options[key]!r} must be positive")
    return value
