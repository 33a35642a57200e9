"""A real Redis Cluster on loopback for tests: ``redis-server --cluster-enabled yes``
processes joined by ``redis-cli --cluster create``, and the faults a test needs.

``RedisCluster(masters=3, replicas=1).start()`` starts the nodes on free ports, creates
the cluster and waits until every node reports ``cluster_state:ok``, agrees on who
serves each slot, and every master has its replicas attached and in sync. Then a test
may:

- find the master serving a key or slot (``master_for``, ``slot_of``) and its replicas
  (``replicas_of``);
- freeze and thaw a node (SIGSTOP/SIGCONT: it keeps its sockets but answers nothing),
  kill one (SIGKILL: no shutdown, nothing saved) and bring it back (``revive``: it
  rejoins with its old node id, as a replica if its slots moved meanwhile);
- cut a master's replication links (``cut_replication``: ``CLIENT KILL TYPE replica``;
  with the replica frozen, writes made after the cut never reach it — freezing alone
  does not do that, the kernel buffers the stream; see DESIGN.md);
- promote a replica (``failover``: ``CLUSTER FAILOVER TAKEOVER``, which needs no
  agreement from a master that is dead or cut off; or wait for the cluster's own
  automatic failover);
- migrate a slot to another master (``migrate_slot``), or step by step
  (``begin_migration``, ``move_keys``, ``end_migration``) to act in between;
- ``heal()``: restart dead nodes, end half-done migrations and wait until the cluster is
  whole again, so one cluster serves a whole test session.

Nodes keep nothing on disk but ``nodes.conf`` (the cluster's own state file), so a
killed master comes back empty and resynchronises from whoever serves its slots now.
Automatic failover stays on, with a node timeout long enough (``NODE_TIMEOUT_MS``) that a
busy test machine does not trigger one by accident; a test may promote a replica itself
rather than wait that long.

Imports the throwaway ``RedisServer``, and redis-py when a node or the cluster is
talked to (so that importing ``fencing.testing.servers`` needs no redis-py).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._base import ServerError, free_port
from ._redis import RedisServer

if TYPE_CHECKING:
    import redis.asyncio.cluster
    import redis.cluster

#: How long (ms) a node may be unreachable before the others flag it as failing.
NODE_TIMEOUT_MS = 5000

#: Seconds to wait for the cluster to form, heal or agree on a failover.
READY_TIMEOUT = 30.0


class RedisClusterNode(RedisServer):
    """One node of a ``RedisCluster``: a ``redis-server`` with cluster mode on.

    Replicas start their full synchronisation at once (no diskless-sync delay), and a
    replica may be promoted however long its link was down (validity factor 0).
    """

    def __init__(self) -> None:
        super().__init__()
        self.pick_ports()

    def pick_ports(self) -> None:
        """Free ports for clients and for the cluster bus (not port + 10000, which may be
        taken or above 65535); before the node first starts, as it keeps them."""
        self.port, self.bus_port = free_port(), free_port()
        self.args = [
            "--cluster-enabled", "yes",
            "--cluster-port", str(self.bus_port),
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
            "--cluster-replica-validity-factor", "0",
            "--cluster-require-full-coverage", "no",
            "--repl-diskless-sync-delay", "0",
        ]  # fmt: skip

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def call(self, *args: Any) -> Any:
        """One command on this node alone (no cluster redirection), replies decoded."""
        import redis

        with redis.Redis(port=self.port, socket_timeout=5, decode_responses=True) as client:
            return client.execute_command(*args)

    def info(self, section: str) -> dict[str, Any]:
        """``INFO <section>`` (``CLUSTER INFO`` for "cluster"), as redis-py parses it."""
        if section == "cluster":
            text = self.call("CLUSTER", "INFO")
            pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
            return {key: value.strip() for key, value in pairs}
        parsed: dict[str, Any] = self.call("INFO", section)
        return parsed

    def kill(self) -> None:
        """SIGKILL the node (a frozen one too): no shutdown, nothing saved."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGKILL)
        self.stop()


class RedisCluster:
    """A Redis Cluster of ``masters`` masters with ``replicas`` replicas each, on
    loopback; see the module docstring. Use as a context manager, or ``start``/``close``.
    """

    def __init__(self, masters: int = 3, replicas: int = 1) -> None:
        if masters < 3:
            raise ValueError("redis-cli --cluster create needs at least 3 masters")
        cli = shutil.which("redis-cli")
        if cli is None:
            raise ServerError("redis-cli not found on PATH")
        self.cli = cli
        self.masters_wanted = masters
        self.replicas_wanted = replicas
        self.nodes = [RedisClusterNode() for _ in range(masters * (1 + replicas))]

    @property
    def url(self) -> str:
        """``redis+cluster://host:port,host:port,...`` of every node, for ``fencing.connect``."""
        return "redis+cluster://" + ",".join(node.address for node in self.nodes)

    def client(self, **options: Any) -> redis.cluster.RedisCluster:
        """A blocking cluster client (it finds every node from a live one)."""
        import redis.cluster

        return redis.cluster.RedisCluster(host="127.0.0.1", port=self._live()[0].port, **options)

    def async_client(self, **options: Any) -> redis.asyncio.cluster.RedisCluster:
        """An asyncio cluster client; it connects on first use, on the caller's loop."""
        import redis.asyncio.cluster

        port = self._live()[0].port
        return redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=port, **options)

    def start(self) -> RedisCluster:
        try:
            for node in self.nodes:
                _first_start(node)
            create = [
                self.cli, "--cluster", "create", *(node.address for node in self.nodes),
                "--cluster-replicas", str(self.replicas_wanted), "--cluster-yes",
            ]  # fmt: skip
            result = subprocess.run(create, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise ServerError(f"redis-cli --cluster create failed: {result.stdout[-2000:]}")
            self.wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for node in self.nodes:
            node.close()

    def __enter__(self) -> RedisCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- topology ----------------------------------------------------------------------

    def _live(self) -> list[RedisClusterNode]:
        return [node for node in self.nodes if node.running]

    def _node_at(self, port: int) -> RedisClusterNode:
        for node in self.nodes:
            if node.port == port:
                return node
        raise ServerError(f"no node of this cluster on port {port}")

    def slot_owners(self, via: RedisClusterNode | None = None) -> dict[int, RedisClusterNode]:
        """Slot -> serving master, as one node (by default the first live one) sees it."""
        node = via or self._live()[0]
        owners: dict[int, RedisClusterNode] = {}
        for first, last, master, *_ in node.call("CLUSTER", "SLOTS"):
            owner = self._node_at(int(master[1]))
            owners.update(dict.fromkeys(range(int(first), int(last) + 1), owner))
        return owners

    def slot_of(self, key: str | bytes) -> int:
        """The slot of ``key``, as the server computes it (``CLUSTER KEYSLOT``)."""
        return int(self._live()[0].call("CLUSTER", "KEYSLOT", key))

    def master_for(self, key: str | bytes) -> RedisClusterNode:
        """The master serving ``key``'s slot right now."""
        return self.master_of_slot(self.slot_of(key))

    def master_of_slot(self, slot: int) -> RedisClusterNode:
        return self.slot_owners()[slot]

    def masters(self) -> list[RedisClusterNode]:
        """The live masters that serve slots, in port order."""
        return sorted(set(self.slot_owners().values()), key=lambda node: node.port)

    def replicas_of(self, master: RedisClusterNode) -> list[RedisClusterNode]:
        """The live nodes replicating ``master``."""
        found = []
        for node in self._live():
            info = node.info("replication")
            if info.get("role") == "slave" and int(info.get("master_port", 0)) == master.port:
                found.append(node)
        return found

    # -- faults -------------------------------------------------------------------------

    def cut_replication(self, master: RedisClusterNode) -> int:
        """Close ``master``'s links to its replicas (they reconnect unless frozen);
        returns how many were closed."""
        closed: int = master.call("CLIENT", "KILL", "TYPE", "replica")
        return closed

    def failover(self, replica: RedisClusterNode, *, automatic: bool = False) -> None:
        """Promote ``replica`` at once (``CLUSTER FAILOVER TAKEOVER``: no vote, no
        handshake with its master) or, with ``automatic``, let the cluster do it (its
        master must be dead or frozen: the others flag it after ``NODE_TIMEOUT_MS`` and
        the replica wins an election); wait until every live node sees it serving."""
        master = self.master_of_replica(replica)
        slots = {slot for slot, owner in self.slot_owners(via=replica).items() if owner is master}
        if not automatic:
            replica.call("CLUSTER", "FAILOVER", "TAKEOVER")

        def promoted() -> bool:
            if replica.info("replication").get("role") != "master":
                return False
            return all(self._served_by(node, replica) >= slots for node in self._live())

        _wait_until(promoted, f"{replica.address} to serve its master's slots on every node")

    def master_of_replica(self, replica: RedisClusterNode) -> RedisClusterNode:
        """The master ``replica`` replicates (by its own ``INFO replication``)."""
        info = replica.info("replication")
        if info.get("role") != "slave":
            raise ServerError(f"{replica.address} is not a replica")
        return self._node_at(int(info["master_port"]))

    def _served_by(self, via: RedisClusterNode, master: RedisClusterNode) -> set[int]:
        """The slots ``via`` believes ``master`` serves."""
        return {slot for slot, owner in self.slot_owners(via=via).items() if owner is master}

    def migrate_slot(self, slot: int, target: RedisClusterNode) -> None:
        """Move ``slot`` and its keys to the master ``target``, as ``redis-cli --cluster
        reshard`` does, in the three steps below (a test may act between them)."""
        self.begin_migration(slot, target)
        self.move_keys(slot, target)
        self.end_migration(slot, target)

    def begin_migration(self, slot: int, target: RedisClusterNode) -> RedisClusterNode:
        """``CLUSTER SETSLOT <slot> IMPORTING`` on ``target``, ``MIGRATING`` on the master
        serving it; returns that master. From now on, a command for a key the source
        lacks is redirected (``ASK``) to ``target``."""
        source = self.master_of_slot(slot)
        if source is target:
            raise ServerError(f"slot {slot} is already served by {target.address}")
        target.call("CLUSTER", "SETSLOT", slot, "IMPORTING", source.call("CLUSTER", "MYID"))
        source.call("CLUSTER", "SETSLOT", slot, "MIGRATING", target.call("CLUSTER", "MYID"))
        return source

    def move_keys(self, slot: int, target: RedisClusterNode) -> int:
        """``MIGRATE`` every key of ``slot`` from its source to ``target``, all in one
        command (atomic: a client sees all of them on one side); returns how many."""
        source = self.master_of_slot(slot)
        keys = source.call("CLUSTER", "GETKEYSINSLOT", slot, 1_000_000)
        if keys:
            source.call("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
        return len(keys)

    def end_migration(self, slot: int, target: RedisClusterNode) -> None:
        """``CLUSTER SETSLOT <slot> NODE <target>`` on both masters, then on the others;
        waits until every live node sees ``target`` serving the slot."""
        target_id = target.call("CLUSTER", "MYID")
        source = self.master_of_slot(slot)
        for node in [target, source, *(n for n in self.masters() if n not in (target, source))]:
            node.call("CLUSTER", "SETSLOT", slot, "NODE", target_id)
        _wait_until(
            lambda: all(self.slot_owners(via=node).get(slot) is target for node in self._live()),
            f"every node to see slot {slot} on {target.address}",
        )

    def revive(self, node: RedisClusterNode) -> None:
        """Start a killed or stopped node again, with its ``nodes.conf``: it rejoins."""
        if not node.running:
            node.start()

    def heal(self) -> None:
        """Revive every dead node, thaw every node, end half-done slot migrations (the
        slot stays where it is served), and wait until the cluster is whole."""
        for node in self.nodes:
            if node.running:
                node.thaw()
            else:
                self.revive(node)
        _wait_until(lambda: bool(self.slot_owners()), "a live node to answer")
        for node in self.masters():
            for slot in _slots_in_migration(node.call("CLUSTER", "NODES")):
                node.call("CLUSTER", "SETSLOT", slot, "STABLE")
        self.wait_ready()

    def flushall(self) -> None:
        """Delete every key on every master (the replicas follow)."""
        for node in self.masters():
            node.call("FLUSHALL")

    # -- readiness ------------------------------------------------------------------------

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Wait until the cluster is whole: see ``ready``."""
        _wait_until(self.ready, "the cluster to be ready", timeout)

    def ready(self) -> bool:
        """Every node is up, says ``cluster_state:ok`` and sees the same masters serving
        all 16384 slots; each master has ``replicas`` replicas online and caught up."""
        live = self._live()
        if len(live) != len(self.nodes):
            return False
        views = []
        for node in live:
            info = node.info("cluster")
            if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != "16384":
                return False
            views.append({slot: owner.port for slot, owner in self.slot_owners(node).items()})
        if any(view != views[0] for view in views) or len(views[0]) != 16384:
            return False
        masters = {self._node_at(port) for port in views[0].values()}
        if len(masters) != self.masters_wanted:
            return False
        return all(self._replicas_in_sync(master) for master in masters)

    def _replicas_in_sync(self, master: RedisClusterNode) -> bool:
        info = master.info("replication")
        offset = info.get("master_repl_offset")
        replicas = [
            value for key, value in info.items() if key[:5] == "slave" and key[5:].isdigit()
        ]
        caught_up = [r for r in replicas if r["state"] == "online" and r["offset"] == offset]
        return len(caught_up) >= self.replicas_wanted


def _first_start(node: RedisClusterNode, attempts: int = 3) -> None:
    """Start a new node; if it exits at once, as when a port it picked was taken since
    (twelve per cluster, on a machine where others pick ports too), on fresh ports."""
    for attempt in range(attempts):
        try:
            node.start()
            return
        except ServerError:
            node.stop()
            if attempt == attempts - 1:
                raise
            node.pick_ports()


def _slots_in_migration(nodes: str) -> list[int]:
    """The slots this node is migrating or importing: ``[slot->-id]`` / ``[slot-<-id]`` on
    its own (``myself``) line of ``CLUSTER NODES``."""
    mine = next(line for line in nodes.splitlines() if "myself" in line.split()[2])
    return [int(part[1:].split("-", 1)[0]) for part in mine.split() if part.startswith("[")]


def _wait_until(check: Callable[[], bool], what: str, timeout: float = READY_TIMEOUT) -> None:
    """Poll ``check`` (a Redis error counts as "not yet") until true or ``timeout``."""
    deadline = time.monotonic() + timeout
    while not _holds(check):
        if time.monotonic() > deadline:
            raise ServerError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def _holds(check: Callable[[], bool]) -> bool:
    import redis

    try:
        return check()
    except (redis.RedisError, ServerError):
        return False
