"""The blocking issuer's own MySQL and MariaDB pool, without a round trip per checkout or
per return that a lease does not need.

SQLAlchemy's defaults cost an acquire + release (five statements: upsert, read, commit;
update, commit) four round trips more on PyMySQL (``benchmarks/mysql_family.py``):

- ``pool_pre_ping`` pings each connection at checkout (``COM_PING``). Instead,
  ``check_alive`` asks the kernel whether the idle connection's socket has anything to
  read: a server that restarted, crashed or closed an idle session has sent its end of
  file (or an error, then its end of file), which an idle MySQL session never gets
  otherwise. Only then is it pinged, and a failed ping makes the pool replace it (what
  ``pool_pre_ping`` does); a live one costs a ``poll()`` of zero timeout, no round trip.
- ``reset_on_return="rollback"`` sends ``ROLLBACK`` as each connection goes back to the
  pool, after the issuer's transaction was committed or rolled back already. Instead,
  ``roll_back_if_open`` rolls back only a connection whose last reply said a
  transaction is open (``SERVER_STATUS_IN_TRANS``, in every OK packet, kept by PyMySQL
  as ``server_status``): a connection never goes back with a transaction open.

A driver without those attributes (mysqlclient) is pinged and rolled back as
SQLAlchemy would. The asyncio engine (aiomysql, whose connection keeps ``server_status``
too) is rolled back only when open the same way, but keeps its ping at checkout: its
socket is read by the event loop, which takes an end of file or an error off it into a
buffer of its own, so ``poll()`` on it tells nothing. Imports SQLAlchemy only.
"""

from __future__ import annotations

import select
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError

#: MySQL's server status bit of an open transaction (``SERVER_STATUS_IN_TRANS``).
_IN_TRANS = 1

#: The pool options ``lean`` replaces with its listeners.
OPTIONS: dict[str, Any] = {"pool_pre_ping": False, "pool_reset_on_return": None}
#: Those ``lean(engine, ping=True)`` replaces (an asyncio engine's: see the docstring).
ASYNC_OPTIONS: dict[str, Any] = {"pool_reset_on_return": None}


def _idle_and_open(connection: Any) -> bool:
    """Whether ``connection``'s socket has nothing to read (PyMySQL's ``_sock``); False
    when it has, or the question cannot be asked (no socket known, no ``poll``)."""
    sock = getattr(connection, "_sock", None)
    if sock is None or not hasattr(select, "poll"):
        return False
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return not poller.poll(0)


def check_alive(connection: Any, record: Any, proxy: Any) -> None:
    """``checkout``: a connection the server may have closed is pinged; one it did not
    is used as is. A failed ping is a ``DisconnectionError``: the pool replaces it."""
    if _idle_and_open(connection):
        return
    try:
        connection.ping(False)
    except Exception as exc:  # the driver's own errors: the connection is gone
        raise DisconnectionError(f"the pooled connection is dead: {exc}") from exc


def roll_back_if_open(connection: Any, record: Any, state: Any) -> None:
    """``reset``: roll back a connection going back to the pool if a transaction may be
    open on it (unknown status: always). The status is the driver's own connection's
    (``record.driver_connection``: aiomysql's under SQLAlchemy's adapter)."""
    status = getattr(record.driver_connection, "server_status", None)
    if state.terminate_only or (isinstance(status, int) and not status & _IN_TRANS):
        return
    connection.rollback()


def lean(engine: Engine, ping: bool = False) -> Engine:
    """Listen on ``engine`` (created with ``OPTIONS``) with ``check_alive`` and
    ``roll_back_if_open`` (``ping``: created with ``ASYNC_OPTIONS``, and only the
    latter); ``engine`` itself."""
    if not ping:
        event.listen(engine, "checkout", check_alive)
    event.listen(engine, "reset", roll_back_if_open)
    return engine
