"""An interrupt placed exactly: after redis-py sent a command, before it reads the reply."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest


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
