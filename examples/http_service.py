"""A fenced HTTP service and its clients: a holder that paused past its lease is refused.

Runs as is (``python examples/http_service.py``): uvicorn serves a FastAPI app on a free
loopback port, in a thread of this process; leases come from an in-memory fence.
``FenceMiddleware`` claims each item's mark with the request's ``Fencing-Token`` before
the handler runs; ``FenceAuth`` sends a holder's token and turns the service's 409 into
``StaleTokenError``. With several worker processes, use a ``RedisMark`` per item
(``marks=lambda key: RedisMark(r, f"mark:{key}")``) so that every worker sees every
token.
"""

from __future__ import annotations

import socket
import threading
import time

import httpx
import uvicorn
from fastapi import FastAPI, Request

import fencing
from fencing.http import FenceAuth, FenceMiddleware

items: dict[str, str] = {}
app = FastAPI()


@app.put("/items/{key}")
async def put_item(key: str, request: Request) -> dict[str, int]:
    items[key] = (await request.body()).decode()
    return {"token": request.state.fence_token}


marks: dict[str, fencing.MemoryMark] = {}
fenced = FenceMiddleware(
    app,
    resource=lambda method, path: path if method == "PUT" else None,  # writes are fenced
    marks=lambda key: marks.setdefault(key, fencing.MemoryMark()),
)


def serve() -> str:
    """Start uvicorn in a thread on a free port; its base URL once it answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(fenced, port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    return f"http://127.0.0.1:{port}"


def main() -> None:
    url = serve()
    fence = fencing.MemoryFence("invoice:42", ttl=0.2)
    old = fence.acquire()  # holder 1 ...
    time.sleep(0.3)  # ... pauses past its lease (a GC pause, a stopped VM)
    new = fence.acquire()  # holder 2 takes over
    with httpx.Client(base_url=url, auth=FenceAuth(new)) as client:
        client.put("/items/invoice-42", content="total=100").raise_for_status()
        print(f"holder 2 wrote with token {new:d}")
    with httpx.Client(base_url=url, auth=FenceAuth(old)) as client:
        try:
            client.put("/items/invoice-42", content="total=0")
        except fencing.StaleTokenError as refused:
            print(f"holder 1 refused: {refused}")
    print(f"the service holds {items['invoice-42']!r}")
    missing = httpx.put(f"{url}/items/invoice-42", content="x")
    print(f"no token: {missing.status_code} {missing.json()['title']}")


if __name__ == "__main__":
    main()
