"""``advisory_keys(name)``: the two int4 keys of a fence name's PostgreSQL advisory lock.

The derivation is public and stable (changing it would let two versions of fencing hold
the "same" lease at once): the first 8 bytes of the SHA-256 digest of the name's UTF-8
bytes, read as two big-endian signed 32-bit integers. psql gives the same keys::

    SELECT ('x' || substr(encode(sha256(convert_to(:name, 'UTF8')), 'hex'), 1, 8))::bit(32)::int4,
           ('x' || substr(encode(sha256(convert_to(:name, 'UTF8')), 'hex'), 9, 8))::bit(32)::int4;

so ``SELECT pg_try_advisory_lock(k1, k2)`` in psql or any hand-written code excludes a
``lease=advisory`` holder of that name, and is excluded by it. (django-pglock, pals and
sqlalchemy-dlock take the one-``bigint`` form only, another lock space: their own API
cannot exclude a fence.)

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
