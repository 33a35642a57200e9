"""Helpers for tests that race threads in several processes against one guard."""

from __future__ import annotations

import os


def append_line(log: str, line: str) -> None:
    """Append ``line`` with one O_APPEND write, so lines from racing processes never mix."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def token_plan(me: int, racers: int, rounds: int) -> list[int]:
    """Racer ``me``'s tokens: climbing, interleaved with the others', and every fourth one
    replayed from five rounds ago (a paused holder waking up)."""
    return [
        max(0, i * racers + me - 5 * racers) if i % 4 == 3 else i * racers + me
        for i in range(rounds)
    ]
