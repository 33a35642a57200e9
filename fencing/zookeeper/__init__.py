"""``fencing.zookeeper``: fence tokens on ZooKeeper (install ``fencing[zookeeper]``).

- ``ZooKeeperFence`` / ``ZooKeeperIssuer``: leases as ephemeral znodes of a kazoo
  client's session, tokens from their ``czxid`` (``fencing.zookeeper.aio`` has the
  asyncio twins); waiters woken by a watch.
- ``fencing.connect("zookeeper://host:port[,host:port...][/chroot]")``: the same, with a
  client of its own.

Modules: ``_layout`` (znode layout, name encoding, URL; no I/O), ``_flows`` (the
operations as flows of kazoo requests, one step for blocking and asyncio), ``_issuer``
(the two issuers and fences), ``_backend`` (``fencing.connect``). docs/zookeeper.md says
what each failure does.

Imports the core and kazoo; never another backend.
"""

from __future__ import annotations

from .._base.lazy import needs_extra

with needs_extra("fencing.zookeeper"):  # say which extra brings a missing driver
    from ._issuer import ZooKeeperFence, ZooKeeperIssuer
    from ._layout import encode_name

__all__ = ["ZooKeeperFence", "ZooKeeperIssuer", "encode_name"]
