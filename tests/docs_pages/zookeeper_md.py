# Generated from docs/zookeeper.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

# docs/zookeeper.md:9

import os

import fencing

url = os.environ.get(
    "FENCING_URL", "zookeeper://zk1:2181,zk2:2181,zk3:2181/myapp?session_timeout=10"
)
zk = fencing.connect(url)
fence = zk.fence("invoice:42")
store = fencing.FileStore("invoice-42.json")  # any guarded resource

with fence.hold(timeout=30) as token:  # acquire, confirm every ttl/3, release
    store.write(b'{"total": 100}', token)  # the store refuses tokens below its mark

# docs/zookeeper.md:29

from urllib.parse import urlsplit

from kazoo.client import KazooClient

from fencing.zookeeper import ZooKeeperFence
from fencing.zookeeper.aio import ZooKeeperFence as AsyncZooKeeperFence

client = KazooClient(hosts=urlsplit(url).netloc, timeout=10)  # "zk1:2181,zk2:2181,zk3:2181"
client.start()
fence = ZooKeeperFence(client, "invoice:42")  # blocking
afence = AsyncZooKeeperFence(client, "invoice:42")  # asyncio, same session
token = fence.acquire(timeout=30)
fence.release(token)
client.stop()
client.close()
