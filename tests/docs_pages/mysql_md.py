# Generated from docs/mysql.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

import subprocess as _subprocess

# docs/mysql.md:25

_subprocess.run("fencing migrate             # the SDK's tables on $FENCING_URL (or --url URL)", shell=True, check=True)

# docs/mysql.md:29

import asyncio
import os

import fencing

url = os.environ.get("FENCING_URL", "mysql+pymysql://app@db/app")  # or mariadb+pymysql://
backend = fencing.connect(url)
with backend.fence("invoice:42", ttl=10).hold() as token:
    print("holding invoice:42 with token", token)


async def main() -> None:
    fence = fencing.connect(url.replace("+pymysql", "+aiomysql")).aio_fence("job")
    token = await fence.acquire()
    await fence.release(token)
    await fence.aclose()


asyncio.run(main())

# docs/mysql.md:123

import asyncio

store = fencing.FileStore("invoice-42.json")  # any guarded resource
advisory = fencing.connect(url + "?lease=advisory")
with advisory.fence("invoice:42", ttl=10).hold() as token:  # GET_LOCK + the token
    store.write(b'{"total": 100}', token)


async def main() -> None:
    afence = fencing.connect(url.replace("+pymysql", "+aiomysql") + "?lease=advisory")
    fence = afence.aio_fence("invoice:42")  # asyncio: aiomysql or asyncmy
    token = await fence.acquire()
    await fence.release(token)
    await fence.aclose()


asyncio.run(main())
