"""The service of ``test_http_e2e``: a small FastAPI app whose items live in Redis, each
fenced by a ``RedisMark``, run by uvicorn with several worker processes (so the workers
share the marks through Redis, as a real deployment's would).

``FENCING_HTTP_REDIS`` is the Redis URL. ``PUT /items/<key>`` stores ``<token>:<body>``;
``GET /items/<key>`` reads it back with the worker's pid.
"""

from __future__ import annotations

import os

import redis
from fastapi import FastAPI, Request

from fencing import RedisMark
from fencing.http import FenceMiddleware

client = redis.Redis.from_url(os.environ["FENCING_HTTP_REDIS"])
app = FastAPI()


@app.put("/items/{key}")
def put(key: str, request: Request, body: dict[str, str]) -> dict[str, object]:
    token = request.state.fence_token
    client.set(f"item:{key}", f"{token}:{body['value']}")
    return {"token": token, "pid": os.getpid()}


@app.get("/items/{key}")
def get(key: str) -> dict[str, object]:
    value = client.get(f"item:{key}")
    return {"value": value.decode() if isinstance(value, bytes) else value, "pid": os.getpid()}


def fenced(method: str, path: str) -> str | None:
    return path if method == "PUT" and path.startswith("/items/") else None


app.add_middleware(
    FenceMiddleware, resource=fenced, marks=lambda key: RedisMark(client, f"mark:{key}")
)
