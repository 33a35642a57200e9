"""Names a package gives without importing them: each is imported from its module on
first use, so ``import fencing`` (or ``fencing.aio``, ``fencing.http``) needs no optional
dependency. And renamed names, kept for one release: each still works, with a
``DeprecationWarning`` that names its new spelling. Imports nothing from the package.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

#: When the deprecated spellings go (they work, warning, until then): CHANGELOG's rule
#: for a renamed public name while the version is 0.x.
REMOVED_IN = "1.0"


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
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    return __getattr__
