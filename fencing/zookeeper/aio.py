"""``fencing.zookeeper.aio``: the asyncio ZooKeeper fence and issuer.

They share znodes, leases and tokens with the blocking classes of ``fencing.zookeeper``.
"""

from __future__ import annotations

from ._issuer import AsyncZooKeeperFence as ZooKeeperFence
from ._issuer import AsyncZooKeeperIssuer as ZooKeeperIssuer

__all__ = ["ZooKeeperFence", "ZooKeeperIssuer"]
