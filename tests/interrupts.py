"""Interrupts placed exactly: after redis-py sent a command, before it reads the reply;
at the n-th call into ``fencing``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import fencing


def interrupt_before_a_reply(call: Callable[[], object]) -> None:
    """Run ``call`` with a KeyboardInterrupt raised as redis-py starts reading its first
    reply: the command is sent, its reply not read (a trace function raises it there,
    where an interrupt timed by a clock lands only by chance)."""

    def at_read(frame: Any, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_name == "parse_response":
            sys.settrace(None)
            raise KeyboardInterrupt

    sys.settrace(at_read)
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
    finally:
        sys.settrace(None)


#: The package's own source files: ``interrupt_at_call`` counts calls made there only.
FENCING_DIR = str(Path(fencing.__file__).parent)


def interrupt_at_call(n: int, call: Callable[[], object]) -> bool:
    """Run ``call`` with a KeyboardInterrupt raised as the ``n``-th function of
    ``fencing`` starts (or resumes: a generator's step); True if it landed, False if
    ``call`` finished first.

    Sweeping ``n`` from 1 lands an interrupt at every such point of ``call`` in turn,
    each exactly once, where an interrupt timed by a clock lands where it happens to.
    """
    seen = 0

    def at_call(frame: Any, event: str, arg: object) -> None:
        nonlocal seen
        if event == "call" and frame.f_code.co_filename.startswith(FENCING_DIR):
            seen += 1
            if seen == n:
                sys.settrace(None)
                raise KeyboardInterrupt

    sys.settrace(at_call)
    try:
        call()
    except KeyboardInterrupt:
        return True
    finally:
        sys.settrace(None)
    return False
