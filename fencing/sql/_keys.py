"""The advisory lock of a fence name: ``advisory_keys(name)``, the two int4 keys of its
PostgreSQL advisory lock, and ``lock_name(name)``, the name of its MySQL/MariaDB
``GET_LOCK``.

The derivation is public and stable (changing it would let two versions of fencing hold
the "same" lease at once): the first 8 bytes of the SHA-256 digest of the name's UTF-8
bytes, read as two big-endian signed 32-bit integers. psql gives the same keys::

    SELECT ('x' || substr(encode(sha256(convert_to(:name, 'UTF8')), 'hex'), 1, 8))::bit(32)::int4,
           ('x' || substr(encode(sha256(convert_to(:name, 'UTF8')), 'hex'), 9, 8))::bit(32)::int4;

so ``SELECT pg_try_advisory_lock(k1, k2)`` in psql or any hand-written code excludes a
``lease=advisory`` holder of that name, and is excluded by it. (django-pglock, pals and
sqlalchemy-dlock take the one-``bigint`` form only, another lock space: their own API
cannot exclude a fence.)

On MySQL and MariaDB a lock has a name of at most 64 characters (``GET_LOCK``'s limit,
server-wide, not per database): a fence name of up to 64 characters is its own lock
name, so ``SELECT GET_LOCK('invoice:42', 0)`` in your own SQL excludes that fence; a
longer one is ``fencing:`` and the first 56 hex digits (224 bits) of its SHA-256 digest,
64 characters.

Imports the standard library and the core's name check only (no I/O, no SQLAlchemy).
"""

from __future__ import annotations

import hashlib
import struct

from .._base.validate import check_name

#: The SQL that derives the keys of the bound parameter ``:name`` on the server (``k1``, ``k2``).
KEYS_SQL = (
    "SELECT ('x' || substr(encode(sha256(convert_to(:name, 'UTF8')), 'hex'), 1, 8))"
    "::bit(32)::int4 AS k1, "
    "('x' || substr(encode(sha256(convert_to(:name, 'UTF8')), 'hex'), 9, 8))::bit(32)::int4 AS k2"
)


def advisory_keys(name: str) -> tuple[int, int]:
    """The two int4 keys ``(k1, k2)`` of the advisory lock of fence ``name``.

    ``k1, k2`` are the first 8 bytes of ``sha256(name.encode("utf-8"))`` as two
    big-endian signed 32-bit integers, for ``pg_try_advisory_lock(k1, k2)``. Stable
    across versions and processes. A bad name (not a ``str``, empty, too long, NUL)
    raises ``TypeError``/``ValueError`` as everywhere else.
    """
    digest = hashlib.sha256(check_name(name).encode("utf-8")).digest()
    k1, k2 = struct.unpack(">ii", digest[:8])
    return k1, k2


#: The longest lock name MySQL's ``GET_LOCK`` takes (longer is an error there).
MYSQL_LOCK_NAME_MAX = 64


def lock_name(name: str) -> str:
    """The ``GET_LOCK`` name of fence ``name`` on MySQL and MariaDB: ``name`` itself up to
    64 characters, else ``fencing:`` + the first 56 hex digits of its SHA-256 digest (see
    the module docstring). A bad name raises ``TypeError``/``ValueError``."""
    if len(check_name(name)) <= MYSQL_LOCK_NAME_MAX:
        return name
    return "fencing:" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:56]
