"""Names a package gives without importing them: each is imported from its module on
first use, so ``import fencing`` (or ``fencing.aio``, ``fencing.http``) needs no optional
dependency. Imports nothing from the package.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, sources: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``sources`` maps each lazy name to the
    module it is imported from (the same name there); once imported, the name is kept
    in the package's namespace, so the next lookup does not come here."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    return __getattr__
