"""fencing.http: the ASGI and WSGI middlewares, the FastAPI dependency and the clients.

Services run for real: ASGI apps are called through httpx's ASGI transport (the same
calls a server makes), the WSGI app is served by ``wsgiref`` on a loopback port, and
marks are real (memory, file, and a RedisMark on the session's redis-server). The
end-to-end run with uvicorn worker processes and a frozen client is in
``test_http_e2e.py``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import httpx
import pytest
import requests
from fail_fast import failing_fast
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import fencing
from fencing import FileMark, Mark, MemoryMark, RedisMark, StaleTokenError
from fencing.http import FenceAuth, FenceMiddleware, RequestsFenceAuth, WSGIFenceMiddleware
from fencing.testing.servers import RedisServer

if TYPE_CHECKING:
    from fastapi import FastAPI

MAX = 2**63 - 1


def items(method: str, path: str) -> str | None:
    """Writes to /items/<key> are fenced; everything else is not."""
    return path if method in ("PUT", "DELETE") and path.startswith("/items/") else None


class Store:
    """The resource behind the service: what was written, by which token."""

    def __init__(self) -> None:
        self.data: dict[str, tuple[str, int]] = {}


def starlette_app(store: Store) -> Starlette:
    async def put(request: Request) -> Response:
        token = request.state.fence_token
        store.data[request.url.path] = ((await request.body()).decode(), token)
        return JSONResponse({"token": token})

    async def get(request: Request) -> Response:
        return JSONResponse(store.data.get(request.url.path))

    return Starlette(
        routes=[Route("/items/{key}", put, methods=["PUT"]), Route("/items/{key}", get)]
    )


@pytest.fixture(params=["memory", "file", "redis"])
def marks(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], Mark]:
    """One mark per resource key, of each kind."""
    if request.param == "memory":
        made: dict[str, MemoryMark] = {}
        return lambda key: made.setdefault(key, MemoryMark())
    if request.param == "file":
        return lambda key: FileMark(tmp_path / key.replace("/", "_"))
    client = request.getfixturevalue("redis_client")
    return lambda key: RedisMark(client, f"mark:{key}")


def asgi_client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://svc")


def problem(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["status"] == response.status_code
    return body


async def test_asgi_admits_newer_and_equal_tokens_and_refuses_older(
    marks: Callable[[str], Mark],
) -> None:
    store = Store()
    app = FenceMiddleware(starlette_app(store), resource=items, marks=marks)
    async with asgi_client(app) as client:
        assert (
            await client.put("/items/a", content="v5", headers={"Fencing-Token": "5"})
        ).json() == {"token": 5}
        assert (
            await client.put("/items/a", content="v5b", headers={"Fencing-Token": "5"})
        ).status_code == 200
        refused = await client.put("/items/a", content="v4", headers={"Fencing-Token": "4"})
        assert refused.status_code == 409
        body = problem(refused)
        assert body["type"] == "urn:fencing:problem:stale-token"
        assert (body["token"], body["current"]) == (4, 5)
        assert store.data["/items/a"] == ("v5b", 5)  # the handler never ran for token 4
        # marks are per resource: another key starts afresh
        assert (
            await client.put("/items/b", content="v1", headers={"Fencing-Token": "1"})
        ).status_code == 200


@pytest.mark.parametrize(
    "value",
    ["", " ", "-1", "+3", "1.5", "1e3", "abc", "0x10", "1_000", "١٢", "9" * 20, str(MAX + 1)],
)
async def test_asgi_refuses_a_malformed_token_with_400_naming_the_header(value: str) -> None:
    store = Store()
    mark = MemoryMark()
    app = FenceMiddleware(starlette_app(store), resource=items, marks=mark, header="X-Lease-Token")
    async with asgi_client(app) as client:
        response = await client.put(
            "/items/a", content="x", headers={b"X-Lease-Token": value.encode()}
        )
    assert response.status_code == 400
    body = problem(response)
    assert body["header"] == "X-Lease-Token" and "X-Lease-Token" in body["detail"]
    assert store.data == {} and mark.current is None


async def test_asgi_answers_428_without_a_token_and_passes_unfenced_requests() -> None:
    store = Store()
    app = FenceMiddleware(starlette_app(store), resource=items, marks=MemoryMark())
    async with asgi_client(app) as client:
        missing = await client.put("/items/a", content="x")
        assert missing.status_code == 428
        assert problem(missing)["type"] == "urn:fencing:problem:missing-token"
        assert (await client.get("/items/a")).json() is None  # GET is not fenced
        ok = await client.put("/items/a", content="x", headers={"Fencing-Token": str(MAX)})
        assert ok.json() == {"token": MAX}
    assert store.data == {"/items/a": ("x", MAX)}


async def test_asgi_answers_503_when_the_mark_is_down(
    redis_factory: Callable[..., RedisServer],
) -> None:
    server = redis_factory()
    client = failing_fast(server.port, 2)
    store = Store()
    app = FenceMiddleware(
        starlette_app(store), resource=items, marks=lambda key: RedisMark(client, f"m:{key}")
    )
    server.stop()
    async with asgi_client(app) as http:
        response = await http.put("/items/a", content="x", headers={"Fencing-Token": "3"})
    assert response.status_code == 503
    assert problem(response)["type"] == "urn:fencing:problem:mark-unavailable"
    assert store.data == {}


def test_bad_configuration_is_refused_at_construction() -> None:
    app = starlette_app(Store())
    with pytest.raises(ValueError, match="header"):
        FenceMiddleware(app, resource=items, marks=MemoryMark(), header="")
    with pytest.raises(TypeError, match="marks"):
        FenceMiddleware(app, resource=items, marks="redis://")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="resource"):
        WSGIFenceMiddleware(lambda e, s: [], resource=None, marks=MemoryMark())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        FenceAuth(True)
    with pytest.raises(ValueError):
        RequestsFenceAuth(-1)


# -- WSGI, served by wsgiref; the requests client ---------------------------------------


def wsgi_app(store: Store) -> Callable[[dict[str, Any], Any], Iterable[bytes]]:
    def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        path = environ["PATH_INFO"]
        if environ["REQUEST_METHOD"] == "PUT":
            size = int(environ.get("CONTENT_LENGTH") or 0)
            store.data[path] = (environ["wsgi.input"].read(size).decode(), environ["fencing.token"])
        start_response("200 OK", [("content-type", "application/json")])
        return [json.dumps(store.data.get(path)).encode()]

    return app


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def wsgi_service(marks: Callable[[str], Mark]) -> Iterator[tuple[str, Store]]:
    store = Store()
    app = WSGIFenceMiddleware(wsgi_app(store), resource=items, marks=marks)
    server = make_server("127.0.0.1", 0, app, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", store
    finally:
        server.shutdown()
        server.server_close()


def test_wsgi_and_requests_client_refuse_a_stale_holder(wsgi_service: tuple[str, Store]) -> None:
    url, store = wsgi_service
    with requests.Session() as newer, requests.Session() as older:
        newer.auth, older.auth = RequestsFenceAuth(8), RequestsFenceAuth(7)
        assert newer.put(f"{url}/items/k", data="new").status_code == 200
        with pytest.raises(StaleTokenError) as refused:
            older.put(f"{url}/items/k", data="old")
        assert (refused.value.token, refused.value.current) == (7, 8)
        assert refused.value.resource == "/items/k"
        bare = requests.put(f"{url}/items/k", data="none", timeout=5)
        assert bare.status_code == 428
        assert bare.headers["content-type"] == "application/problem+json"
        bad = requests.put(f"{url}/items/k", data="x", headers={"Fencing-Token": "x"}, timeout=5)
        assert bad.status_code == 400
    assert store.data == {"/items/k": ("new", 8)}


# -- FastAPI dependency; the httpx client, blocking and asyncio ------------------------


def fastapi_app(store: Store, marks: Callable[[str], Mark]) -> FastAPI:
    """FastAPI imported here, not at the top: its import (0.3 s of CPU) would otherwise be
    paid by every pytest-xdist worker's collection, for this one test."""
    from fastapi import Depends, FastAPI

    from fencing.http import fastapi as fenced_fastapi

    app = FastAPI()
    fenced_fastapi.install(app)
    item_token = fenced_fastapi.fence_token(
        lambda request: f"item:{request.path_params['key']}", marks
    )

    @app.put("/items/{key}")
    async def put(key: str, request: Request, token: int = Depends(item_token)) -> dict[str, int]:
        store.data[key] = ((await request.body()).decode(), token)
        return {"token": token}

    return app


async def test_fastapi_dependency_and_httpx_auth(marks: Callable[[str], Mark]) -> None:
    store = Store()
    transport = httpx.ASGITransport(app=fastapi_app(store, marks))
    fence = fencing.MemoryFence("http:fastapi", ttl=30, issuer=fencing.MemoryIssuer())
    first, second = fence.acquire(), None
    fence.release(first)
    second = fence.acquire()
    async with (
        httpx.AsyncClient(
            transport=transport, base_url="http://svc", auth=FenceAuth(second)
        ) as new,
        httpx.AsyncClient(
            transport=transport, base_url="http://svc", auth=FenceAuth(lambda: first)
        ) as old,
    ):
        assert (await new.put("/items/x", content="new")).json() == {"token": second}
        with pytest.raises(StaleTokenError) as refused:
            await old.put("/items/x", content="old")
        assert (refused.value.token, refused.value.current) == (first, second)
        bare = await new.put("/items/x", content="x", auth=httpx.Auth())  # sends no token
        assert bare.status_code == 428
    assert store.data == {"x": ("new", second)}


def test_httpx_auth_sends_a_holds_current_token() -> None:
    """A hold is read at each request: before it is entered there is nothing to send."""
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["Fencing-Token"])
        return httpx.Response(200)

    fence = fencing.MemoryFence("http:hold", ttl=30, issuer=fencing.MemoryIssuer())
    hold = fence.hold()
    with httpx.Client(transport=httpx.MockTransport(handler), auth=FenceAuth(hold)) as client:
        with pytest.raises(ValueError, match="no token"):
            client.get("http://svc/")
        with hold as token:
            client.get("http://svc/")
    assert seen == [str(int(token))]


def test_a_409_that_is_not_ours_is_left_to_the_caller() -> None:
    """Only our problem type becomes StaleTokenError; any other 409 is an ordinary answer."""
    answers = [
        httpx.Response(409, json={"detail": "conflict"}),
        httpx.Response(409, headers={"content-type": "application/problem+json"}, content=b"{"),
        httpx.Response(
            409, headers={"content-type": "application/problem+json"}, json={"type": "x"}
        ),
    ]
    with httpx.Client(
        transport=httpx.MockTransport(lambda r: answers.pop(0)), auth=FenceAuth(3)
    ) as client:
        assert [client.get("http://svc/").status_code for _ in range(3)] == [409, 409, 409]
