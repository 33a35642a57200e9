# Generated from docs/trying.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

# docs/trying.md:28

import fencing
from fencing.testing.servers import RedisServer

with RedisServer() as server:  # redis-server, started; stopped at the end
    print(server.url)  # redis://127.0.0.1:<port>/0
    fence = fencing.connect(server.url).fence("invoice:42", ttl=5)
    store = fencing.FileStore("invoice-42.json")
    with fence.hold(timeout=10) as token:  # acquire, renew in the background, release
        store.write(b'{"total": 100}', token)
    try:
        store.write(b'{"total": 0}', token - 1)  # an older token, as a paused holder's
    except fencing.StaleTokenError as exc:
        print("refused:", exc)

# docs/trying.md:53

import os

with RedisServer() as server:
    os.environ["FENCING_URL"] = server.url  # what the examples read
    backend = fencing.connect()  # the throwaway Redis now
    election = backend.election("scheduler", ttl=5)
    with election.campaign("host-1") as term:  # see leadership.md
        print("leading with term", term.token)
    workers = backend.semaphore("render", permits=2, ttl=5)  # see limits.md
    with workers.hold(timeout=10) as permit:
        print("slot", permit.slot, "token", permit.token)
del os.environ["FENCING_URL"]

# docs/trying.md:78

import subprocess

from fencing.testing.servers import PostgresServer

with PostgresServer() as pg:
    subprocess.run(
        ["fencing", "migrate", "--url", pg.url], check=True
    )  # or fencing.sql.upgrade(pg.url)
    fence = fencing.connect(pg.url).fence("invoice:42", ttl=5)
    store = fencing.FileStore("pg-invoice-42.json")  # one fence's tokens per store
    with fence.hold(timeout=10) as token:
        store.write(b'{"total": 110}', token)
    advisory = fencing.connect(pg.url + "?lease=advisory").fence("invoice:42", ttl=5)
    with advisory.hold(timeout=10) as token:  # a session advisory lock, the same tokens
        store.write(b'{"total": 120}', token)

# docs/trying.md:101

from fencing.testing.servers import EtcdCluster

with EtcdCluster(size=1) as etcd:
    fence = fencing.connect(etcd.url).fence("invoice:42", ttl=5)
    store = fencing.FileStore("etcd-invoice-42.json")
    with fence.hold(timeout=10) as token:  # the token is the lease key's revision
        store.write(b'{"total": 130}', token)

# docs/trying.md:116

from fencing.testing.servers import ZooKeeperServer

with ZooKeeperServer() as zk:
    fence = fencing.connect(zk.url).fence("invoice:42", ttl=5)
    store = fencing.FileStore("zk-invoice-42.json")
    with fence.hold(timeout=10) as token:  # the token is the lease znode's czxid
        store.write(b'{"total": 140}', token)
