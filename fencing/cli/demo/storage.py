"""Where the demo's clients read and write: one SQL row, or one item behind an HTTP service.

Both give a client ``read()`` and ``write(text, token)`` (``StaleTokenError`` when the
resource refuses the token), so the clients and the controller play the same scenario
on either. Fenced, the SQL row checks the token in its UPDATE (``FencedMixin``); the
HTTP service checks it in ``fencing.http.FenceMiddleware`` before the handler runs.
Unfenced, both accept any write.

Imports SQLAlchemy and ``fencing.sql`` (the row), or Starlette, uvicorn and httpx (the
service), each when used.
"""

from __future__ import annotations

import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Protocol

import fencing

from .models import Base, Note


class Storage(Protocol):
    """The shared resource as one client sees it."""

    def read(self) -> str: ...

    def write(self, text: str, token: int) -> None: ...


class SqlRow:
    """The row ``demo_notes`` id 1 of a SQLite file (``url``)."""

    description = "one SQL row (demo_notes, id=1)"

    def __init__(self, url: str, fenced: bool) -> None:
        from sqlalchemy import create_engine
        from sqlalchemy.orm import Session

        self.url, self.fenced = url, fenced
        self.engine = create_engine(url)
        self.session = Session(self.engine)

    @classmethod
    def create(cls) -> str:
        """A fresh SQLite file holding the row; its URL."""
        from sqlalchemy import create_engine
        from sqlalchemy.orm import Session

        url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='fencing-demo-')) / 'storage.db'}"
        engine = create_engine(url)
        Base.metadata.create_all(engine)
        with Session(engine) as session:
            session.add(Note(id=1, text="created"))
            session.commit()
        engine.dispose()
        return url

    def read(self) -> str:
        return self.session.get_one(Note, 1).text

    def write(self, text: str, token: int) -> None:
        from sqlalchemy import update

        from ...sql import UNFENCED_OPTION

        note = self.session.get_one(Note, 1)
        if self.fenced:
            note.text, note.fence_token = text, token
            self.session.commit()  # UPDATE ... WHERE id = 1 AND fence_token <= token
        else:
            statement = update(Note).where(Note.id == 1).values(text=text, fence_token=token)
            self.session.execute(statement.execution_options(**{UNFENCED_OPTION: True}))
            self.session.commit()

    def final(self) -> tuple[str, int]:
        """What the row holds at the end: text and token."""
        self.session.expire_all()
        note = self.session.get_one(Note, 1)
        return note.text, note.fence_token

    def close(self) -> None:
        self.session.close()
        self.engine.dispose()


class HttpItem:
    """The item ``/note`` of an HTTP service (``url``), written with ``FenceAuth``."""

    description = "one item of an HTTP service (PUT /note, uvicorn)"

    def __init__(self, url: str, fenced: bool) -> None:
        import httpx

        from ...http import FenceAuth

        self.url = url
        self.client = httpx.Client(base_url=url, timeout=10)
        self._auth = FenceAuth if fenced else None

    def read(self) -> str:
        text: str = self.client.get("/note").json()["text"]
        return text

    def write(self, text: str, token: int) -> None:
        import httpx

        # Unfenced, the token still goes along (the service records it), unchecked.
        auth = httpx.Auth() if self._auth is None else self._auth(token)
        headers = {"Fencing-Token": str(token)}
        self.client.put("/note", json={"text": text}, headers=headers, auth=auth).raise_for_status()

    def close(self) -> None:
        self.client.close()


class Service:
    """The demo's HTTP service, run by uvicorn in a thread of the controller."""

    def __init__(self, fenced: bool) -> None:
        import uvicorn
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        from ...http import FenceMiddleware

        self.text, self.token = "created", 0

        async def get(request: Request) -> JSONResponse:
            return JSONResponse({"text": self.text, "token": self.token})

        async def put(request: Request) -> JSONResponse:
            self.text = (await request.json())["text"]
            self.token = int(request.headers["Fencing-Token"])
            return JSONResponse({"token": self.token})

        app: Any = Starlette(routes=[Route("/note", get), Route("/note", put, methods=["PUT"])])
        if fenced:
            app = FenceMiddleware(
                app,
                resource=lambda method, path: path if method == "PUT" else None,
                marks=fencing.MemoryMark(),
            )
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self._server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def start(self) -> Service:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the demo's HTTP service did not start")
            time.sleep(0.01)
        return self

    def final(self) -> tuple[str, int]:
        return self.text, self.token

    def close(self) -> None:
        self._server.should_exit = True
        if self._thread.ident is not None:  # started
            self._thread.join(10)


def open_storage(kind: str, url: str, fenced: bool) -> SqlRow | HttpItem:
    """A client's view of the resource: ``kind`` ``"sql"`` (``url`` a SQLite URL) or
    ``"http"`` (``url`` the service's)."""
    return HttpItem(url, fenced) if kind == "http" else SqlRow(url, fenced)
