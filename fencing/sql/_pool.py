"""The issuer's own MySQL and MariaDB pool (blocking and asyncio), without a round trip per
checkout or per return that a lease does not need.

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

The asyncio engine (aiomysql) is checked the same way, on its stream: the event loop
reads its socket, taking an end of file or an error off it into the stream's reader,
so a connection is taken as live only when the reader has neither (nor buffered
bytes) and its socket has nothing waiting either; aiomysql's connection keeps
``server_status`` too. A driver without those attributes (mysqlclient) is pinged and
rolled back as SQLAlchemy would. A server that closes a connection after the check
fails the statement sent on it: a fencing error (``_errors``), as with
``pool_pre_ping``, whose ping is as old when the statement goes out.
Imports SQLAlchemy only.
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


def _stream_socket(driver: Any) -> Any:
    """aiomysql's socket, if its stream holds nothing the event loop read off it: no end
    of file, no error, no bytes in the reader (``_eof``/``_buffer``: asyncio's
    ``StreamReader`` keeps them; missing, the socket is not trusted); else None."""
    reader, writer = getattr(driver, "_reader", None), getattr(driver, "_writer", None)
    if reader is None or writer is None or writer.is_closing() or reader.exception():
        return None
    if getattr(reader, "_eof", True) or getattr(reader, "_buffer", True):
        return None
    return writer.get_extra_info("socket")


def _idle_and_open(driver: Any) -> bool:
    """Whether the driver's connection has nothing to read: its socket (PyMySQL's
    ``_sock``, aiomysql's stream's) polls empty. False when it has, or the question
    cannot be asked (no socket known, no ``poll``)."""
    sock = getattr(driver, "_sock", None)
    if sock is None:
        sock = _stream_socket(driver)
    if sock is None or not hasattr(select, "poll"):
        return False
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return not poller.poll(0)


def check_alive(connection: Any, record: Any, proxy: Any) -> None:
    """``checkout``: a connection the server may have closed is pinged; one it did not
    is used as is. A failed ping is a ``DisconnectionError``: the pool replaces it. The
    socket is the driver's own connection's (``record.driver_connection``: aiomysql's
    under SQLAlchemy's adapter, which pings it through the event loop)."""
    if _idle_and_open(record.driver_connection):
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


def lean(engine: Engine) -> Engine:
    """Listen on ``engine`` (created with ``OPTIONS``; an asyncio engine's
    ``sync_engine``) with ``check_alive`` and ``roll_back_if_open``; ``engine`` itself."""
    event.listen(engine, "checkout", check_alive)
    event.listen(engine, "reset", roll_back_if_open)
    return engine
