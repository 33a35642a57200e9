"""The version lives in one place: ``fencing.__version__``, read by setuptools at build time."""

from __future__ import annotations

import importlib.metadata
import re

import pytest

import fencing
from fencing.cli import main


def test_installed_metadata_carries_the_package_version() -> None:
    assert importlib.metadata.version("fencing") == fencing.__version__


def test_version_is_a_plain_release_number() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+([abc]|rc)?\d*(\.dev\d+)?", fencing.__version__)


def test_the_command_prints_its_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"fencing {fencing.__version__}\n"
