"""The version lives in one place: ``fencing.__version__``, read by setuptools at build time."""

from __future__ import annotations

import importlib.metadata
import re

import fencing


def test_installed_metadata_carries_the_package_version() -> None:
    assert importlib.metadata.version("fencing") == fencing.__version__


def test_version_is_a_plain_release_number() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+([abc]|rc)?\d*(\.dev\d+)?", fencing.__version__)
