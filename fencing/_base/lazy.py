"""Optional dependencies: names a package gives without importing them, renamed names,
and the one way a missing optional dependency is reported.

- ``lazy_names``: each name is imported from its module on first use, so ``import
  fencing`` (or ``fencing.aio``, ``fencing.http``) needs no optional dependency; renamed
  names, kept for one release, still work with a ``DeprecationWarning`` that names
  their new spelling.
- ``needs_extra``: a ``ModuleNotFoundError`` for a module of ``EXTRAS`` becomes
  ``MissingExtra``, whose message names the extra to install. Every entry point
  that imports an optional dependency goes through them (``fencing.connect``, each
  backend package, ``fencing demo``), the outermost naming itself.

Imports the errors module only.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from .errors import MissingExtra

#: When the deprecated spellings go (they work, warning, until then): CHANGELOG's rule
#: for a renamed public name while the version is 0.x.
REMOVED_IN = "1.0"

#: Top-level module -> the extra of pyproject.toml that installs it.
EXTRAS: dict[str, str] = {
    "redis": "redis",
    "sqlalchemy": "sql",
    "alembic": "sql",
    "psycopg": "postgres",
    "greenlet": "async",
    "aiosqlite": "async",
    "asyncpg": "async",
    "matplotlib": "plot",
    "aetcd": "etcd",
    "grpc": "etcd",
    "httpx": "http",
    "requests": "http",
    "starlette": "http",
    "uvicorn": "http",
    "opentelemetry": "otel",
    "kazoo": "zookeeper",
    "celery": "celery",
    "kombu": "celery",
    "django": "django",
    "asgiref": "django",
}


@contextmanager
def needs_extra(what: str) -> Iterator[None]:
    """Re-raise a missing optional module imported inside as ``MissingExtra``, saying
    that ``what`` needs its extra (an inner ``MissingExtra`` is re-raised with this
    ``what``, so the caller's entry point names itself); any other error goes through."""
    try:
        yield
    except ImportError as exc:
        # the missing module, or the one a library's own ImportError was raised from
        # (SQLAlchemy's asyncio layer does so for a missing greenlet)
        module = (exc.name or getattr(exc.__cause__, "name", None) or "").partition(".")[0]
        extra = EXTRAS.get(module)
        if extra is None:
            raise
        raise MissingExtra(what, extra, module) from exc


def lazy_names(
    package: str, sources: Mapping[str, str], renamed: Mapping[str, str] | None = None
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``sources`` maps each lazy name to the
    module it is imported from (the same name there); once imported, the name is kept
    in the package's namespace, so the next lookup does not come here.

    ``renamed`` maps each deprecated name to its new spelling, ``"module.Name"``: that
    object, after a ``DeprecationWarning``, at every use (it is never kept in the
    namespace, so no use goes unwarned)."""
    namespace = sys.modules[package].__dict__
    renamed = renamed or {}

    def __getattr__(name: str) -> Any:
        new = renamed.get(name)
        if new is not None:
            warnings.warn(
                f"{package}.{name} is deprecated: use {new} (the same object); "
                f"the old name goes in {REMOVED_IN}",
                DeprecationWarning,
                stacklevel=2,
            )
            module, _, attribute = new.rpartition(".")
            return getattr(importlib.import_module(module), attribute)
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        with needs_extra(f"{package}.{name}"):
            value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    return __getattr__
