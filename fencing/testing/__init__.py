"""``fencing.testing``: tools for testing code that uses fences.

- ``simulation``: a deterministic simulation of the pause scenario (clients, an issuer
  on a ``VirtualClock``, pauses, a guarded or unguarded resource) with a model that
  checks the guarantees after every step. Script a schedule with ``Simulation``; its
  ``mode`` makes clients write blind, or from a read with or without a claim first.
- ``statemachine``: ``FencingMachine``, a Hypothesis state machine over those clients,
  parameterised by a world factory, so the same rules run on the virtual clock, on real
  issuers and stores, or on an unfenced resource (where it finds the lost update); in
  the read modes it finds the read-then-write lost update unless clients claim.
  Needs Hypothesis.
- ``contract``: pytest test classes every issuer (``FenceContract``,
  ``AsyncFenceContract``) and every mark (``MarkContract``) must pass; subclass one and
  provide a fixture (see docs/issuers.md). Needs pytest.
- ``servers``: throwaway ``redis-server`` and PostgreSQL instances on free loopback
  ports, ``SentinelGroup`` (a primary, a replica and three Sentinels) for failovers, a
  real Redis Cluster (``RedisCluster``: 3 masters with a replica each) with the faults
  a test needs (freeze, kill, cut replication, promote a replica, migrate a slot, heal;
  talking to it needs redis-py), an etcd cluster and ZooKeeper.

Imports the public package only; import the submodules you need.
"""
