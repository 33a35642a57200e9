"""Helpers for tests that race threads in several processes against one guard."""

from __future__ import annotations

import os

from fencing.testing.contract import racing_tokens as token_plan

__all__ = ["append_line", "token_plan"]


def append_line(log: str, line: str) -> None:
    """Append ``line`` with one O_APPEND write, so lines from racing processes never mix."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
