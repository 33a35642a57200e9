"""Throwaway ``redis-server``, PostgreSQL (and pgbouncer in front of it), MariaDB, Redis Sentinel
groups, a Redis Cluster, etcd (a 3-member cluster) and ZooKeeper (a server or a 3-server
ensemble) on free loopback ports; a TCP proxy whose links a test can cut.

Used by the test suite, the chaos run and the benchmarks: each server lives in its own
temporary directory, so a test may stop, restart, flush or freeze (SIGSTOP) it without
touching anything else on the machine. One module per server kind; every name is
importable from here. Imports nothing from the package outside ``fencing.testing``.
"""

from ._base import ServerError, all_frozen, free_port, frozen, stopped
from ._etcd import Certificates, EtcdCluster, EtcdMember
from ._mariadb import MariaDBServer
from ._pgbouncer import PgBouncer
from ._postgres import PostgresServer, _postgres_bin
from ._proxy import CuttableProxy
from ._redis import RedisServer, faketime_environment
from ._redis_cluster import RedisCluster, RedisClusterNode
from ._sentinel import SentinelGroup, SentinelServer
from ._zookeeper import ZOOKEEPER_JAR, ZooKeeperEnsemble, ZooKeeperServer, four_letter

__all__ = [
    "ZOOKEEPER_JAR",
    "Certificates",
    "CuttableProxy",
    "EtcdCluster",
    "EtcdMember",
    "MariaDBServer",
    "PgBouncer",
    "PostgresServer",
    "RedisCluster",
    "RedisClusterNode",
    "RedisServer",
    "SentinelGroup",
    "SentinelServer",
    "ServerError",
    "ZooKeeperEnsemble",
    "ZooKeeperServer",
    "_postgres_bin",
    "all_frozen",
    "faketime_environment",
    "four_letter",
    "free_port",
    "frozen",
    "stopped",
]
