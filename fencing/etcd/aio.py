"""``fencing.etcd.aio``: the asyncio etcd fence and issuer, on ``grpc.aio`` channels.

They share keys, leases and tokens with the blocking classes of ``fencing.etcd``.
"""

from __future__ import annotations

from ._issuer import AsyncEtcdFence as EtcdFence
from ._issuer import AsyncEtcdIssuer as EtcdIssuer

__all__ = ["EtcdFence", "EtcdIssuer"]
