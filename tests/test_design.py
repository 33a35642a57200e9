"""docs/design.md's "Architecture" describes the package as it is: every package of
``fencing`` is named there, and every module of the core's layer packages is named in the
core's own paragraph, so a module added, moved or renamed without its line fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fencing"


def _architecture() -> str:
    text = (ROOT / "docs" / "design.md").read_text()
    start = text.index("## Architecture")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _core_paragraph() -> str:
    text = _architecture()
    start = text.index("- **The core**")
    return text[start : text.index("\n- **`fencing.aio`**", start)]


def _named(text: str) -> set[str]:
    """The backticked names of ``text``, and each dotted or slashed name's last part."""
    names: set[str] = set()
    for quoted in re.findall(r"`([^`]+)`", text):
        name = quoted.strip("/").removesuffix(".py")
        names.add(name)
        names.add(re.split(r"[./]", name)[-1])
    return names


def test_every_package_of_fencing_is_named() -> None:
    named = _named(_architecture())
    packages = sorted(
        str(init.parent.relative_to(ROOT))
        for init in PACKAGE.rglob("__init__.py")
        if init.parent != PACKAGE and "__pycache__" not in init.parts
    )
    missing = [p for p in packages if not {p, p.replace("/", "."), p.rsplit("/", 1)[-1]} & named]
    assert not missing, f"packages not named in docs/design.md's Architecture: {missing}"


def test_every_module_of_the_core_is_named_in_its_paragraph() -> None:
    named = _named(_core_paragraph())
    layers = [d for d in PACKAGE.iterdir() if d.is_dir() and d.name.startswith("_")]
    assert layers, "the core's layer packages are gone"
    modules = [m for layer in layers for m in layer.glob("*.py") if m.name != "__init__.py"]
    modules += [m for m in PACKAGE.glob("_*.py") if m.name not in ("__init__.py", "__main__.py")]
    missing = sorted(str(m.relative_to(ROOT)) for m in modules if m.stem not in named)
    assert not missing, f"core modules not named in docs/design.md's core paragraph: {missing}"
