# Generated from docs/etcd.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

# docs/etcd.md:18

import os

import fencing

url = os.environ.get("FENCING_URL", "etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379")
store = fencing.FileStore("invoice-42.json")  # any guarded resource
backend = fencing.connect(url)
fence = backend.fence("invoice:42", ttl=10)
with fence.hold() as token:  # renewed in the background
    store.write(b'{"total": 100}', token)  # the store refuses tokens older than one it saw

# or directly, sharing one issuer (one set of connections) between fences
from fencing.etcd import EtcdFence, EtcdIssuer

issuer = EtcdIssuer(url)
fence = EtcdFence(issuer, "invoice:42", ttl=10)
