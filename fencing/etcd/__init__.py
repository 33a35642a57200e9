"""``fencing.etcd``: fence tokens on an etcd cluster (install ``fencing[etcd]``).

- ``EtcdFence`` / ``EtcdIssuer``: the issuer. A lease is an etcd lease, an acquire is
  one transaction that creates the fence's key on it only if absent, and the token is
  the revision of that creation (``fencing.etcd.aio`` has the asyncio twins).
- ``EtcdOptions`` / ``parse_etcd_url``: the cluster's members, auth, TLS and timeout.

Modules: ``_url`` (``etcd://`` URLs), ``_messages`` (the etcd requests and reply
parsers, no I/O), ``_cluster`` (gRPC channels, failover between members, auth, errors
to ``FenceUnavailable``), ``_issuer`` (the flows and the issuers), ``_backend``
(``fencing.connect("etcd://...")``). docs/etcd.md says why the client is aetcd's
generated etcd API on grpcio.

Imports the core, grpcio and aetcd's protobufs; never another backend.
"""

from __future__ import annotations

from .._base.lazy import needs_extra

with needs_extra("fencing.etcd"):  # say which extra brings a missing driver
    from ._issuer import EtcdFence, EtcdIssuer
    from ._url import EtcdOptions, parse_etcd_url

__all__ = ["EtcdFence", "EtcdIssuer", "EtcdOptions", "parse_etcd_url"]
