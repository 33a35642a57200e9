"""Every code block of README.md and docs/*.md runs as pasted, or is marked a fragment
on purpose (``<!-- fragment -->``; see tests/docs_blocks.py for the conventions).

Each page's blocks run in order, as one script with a fresh namespace, in a process and
a directory of its own, with ``$FENCING_URL`` on the throwaway server the page asks for. mypy
(``make lint``) checks the same scripts, ``--strict``; the first test here keeps them
current with the pages.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from importlib.metadata import metadata
from pathlib import Path

import docs_blocks
import pytest
import redis
from processes import CONTEXT

from fencing._connect import _BACKENDS
from fencing.testing.servers import (
    EtcdCluster,
    RedisServer,
    ZooKeeperServer,
)

PAGES = {page.name: page for page in docs_blocks.pages() if page.runnable}


def test_scripts_are_current() -> None:
    """tests/docs_pages/ is what the pages say (run ``python tests/docs_blocks.py``)."""
    files = docs_blocks.expected()
    found = {p.name: p.read_text() for p in docs_blocks.OUT.glob("*.py")}
    stale = sorted(
        name for name in files.keys() | found.keys() if files.get(name) != found.get(name)
    )
    assert stale == [], f"stale: {stale}; run `python tests/docs_blocks.py`"


def test_sql_page_names_every_url_scheme() -> None:
    """docs/sql.md's list of ``fencing.connect`` schemes is the code's."""
    text = (docs_blocks.ROOT / "docs" / "sql.md").read_text()
    assert [s for s in _BACKENDS if f"`{s}://" not in text] == []


def test_readme_names_every_extra() -> None:
    """README.md's install section names every extra of the package (pyproject.toml's,
    as installed)."""
    extras = metadata("fencing").get_all("Provides-Extra") or []
    assert "redis" in extras
    readme = (docs_blocks.ROOT / "README.md").read_text()
    install = readme[readme.index("## Install") : readme.index("## Quick start")]
    assert [name for name in extras if f"`{name}`" not in install] == []


def run_page(name: str, url: str, tmp_path: Path) -> None:
    """Run the page's script in ``tmp_path``, ``$FENCING_URL`` set to ``url``; the
    ``fencing`` command on ``PATH``, as after an install. It runs in a child of the
    suite's forkserver (``docs_blocks.run_script``), as the script's own ``__main__``."""
    env = {
        **os.environ,
        "FENCING_URL": url,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    output = tmp_path / "output.txt"
    script = str(docs_blocks.OUT / PAGES[name].module)
    child = CONTEXT.Process(
        target=docs_blocks.run_script, args=(script, env, str(tmp_path), str(output))
    )
    child.start()
    child.join(120)
    if child.exitcode is None:
        child.kill()
        child.join()
    assert child.exitcode == 0, f"{name} ended with {child.exitcode}:\n{output.read_text()}"


@pytest.fixture
def redlock_url() -> Iterator[str]:
    """Three throwaway Redis servers, as ``redis+redlock://`` over them."""
    servers = [RedisServer().start() for _ in range(3)]
    yield "redis+redlock://" + ",".join(f"127.0.0.1:{s.port}" for s in servers)
    for server in servers:
        server.close()


#: The fixture that gives the URL of each server kind a page may name.
URLS = {
    None: "sqlite_url",
    "redis": "redis_url",
    "redlock": "redlock_url",
    "postgresql": "empty_pg_url",  # a new database: the page runs `fencing migrate`
    "mariadb": "empty_mariadb_url",  # the same
    "etcd": "etcd_url",
    "zookeeper": "zookeeper_url",
}
#: The servers that are costly to start run on their own worker (tests/conftest.py).
GROUPS = {"etcd": "etcd", "zookeeper": "zookeeper"}


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fencing.db'}"


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """A database of the session's Redis that only these pages use, emptied: no lease
    another page left (a page that failed in a hold) makes the next one wait."""
    url = redis_server.url.replace("/0", "/9")
    with redis.Redis.from_url(url) as client:
        client.flushdb()
    return url


@pytest.fixture
def etcd_url(etcd_cluster: EtcdCluster) -> str:
    return etcd_cluster.url


@pytest.fixture
def zookeeper_url(zookeeper_server: ZooKeeperServer) -> str:
    return zookeeper_server.url


def test_every_server_kind_has_a_url() -> None:
    assert set(URLS) == {None, *docs_blocks.SERVERS}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=[pytest.mark.xdist_group(GROUPS[page.server])])
        if page.server in GROUPS
        else name
        for name, page in PAGES.items()
    ],
)
def test_page(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url: str = request.getfixturevalue(URLS[PAGES[name].server])
    run_page(name, url, tmp_path)
