# Generated from docs/index.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

import subprocess as _subprocess

# docs/index.md:20

import fencing

fence = fencing.connect().fence("invoice:42", ttl=10.0)  # FENCING_URL, else an embedded SQLite file
store = fencing.FileStore("invoice-42.json")

with fence.hold() as token:  # acquire, renew in the background, release on exit
    store.write(b'{"total": 120}', token)

# docs/index.md:103

_subprocess.run('fencing --version', shell=True, check=True)
