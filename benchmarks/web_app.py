"""The service the ``http`` family measures, one variant per uvicorn process.

``FENCING_BENCH_HTTP`` picks the variant: ``plain`` (a Starlette app whose PUT handler
stores the body), ``redis-get`` (the same handler plus one Redis round trip: the floor
of a Redis mark's check), ``memory``, ``redis`` and ``redis-inline`` (the plain app
behind ``FenceMiddleware`` with a ``MemoryMark``, a ``RedisMark`` per item checked in a
thread (the default), and the same checked on the event loop, ``threaded=False``).
``FENCING_BENCH_REDIS`` is the Redis URL.
"""

from __future__ import annotations

import os
from typing import Any

import redis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fencing import MemoryMark, RedisMark
from fencing.http import FenceMiddleware

VARIANT = os.environ["FENCING_BENCH_HTTP"]
client = redis.Redis.from_url(os.environ["FENCING_BENCH_REDIS"])
items: dict[str, bytes] = {}


async def put(request: Request) -> Response:
    if VARIANT == "redis-get":
        client.get("bench:http")
    items[request.url.path] = await request.body()
    return Response(b"ok")


def fenced(method: str, path: str) -> str | None:
    return path if method == "PUT" else None


app: Any = Starlette(routes=[Route("/items/{key}", put, methods=["PUT"])])
if VARIANT == "memory":
    app = FenceMiddleware(app, resource=fenced, marks=MemoryMark())
elif VARIANT in ("redis", "redis-inline"):
    app = FenceMiddleware(
        app,
        resource=fenced,
        marks=lambda key: RedisMark(client, f"bm:{key}"),
        threaded=VARIANT == "redis",
    )
