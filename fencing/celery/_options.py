"""The options of a ``FencedTask``, checked when Celery binds the task to its app.

A bad option is a ``TypeError``/``ValueError`` at the task's definition, never at its
first run on a worker: a ``fence_key`` format string is parsed, and every argument it
names (``{account}``, ``{0}``) must be one the task takes, so a typo
(``"account:{acount}"``) is told at once instead of as a ``KeyError`` on a worker.

Imports the core's checks and the standard library (``inspect``, ``string``); the task
class is passed in, never imported.
"""

from __future__ import annotations

import inspect
import math
import os
import re
import string
from collections.abc import Iterator
from typing import Any

from .._base.validate import check_timeout, check_ttl
from ._once import OnceStore

#: What a run does when another run of the same key holds the lease.
ON_BUSY = ("wait", "retry", "skip")

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)

#: The argument a format field names: what comes before its first ``.`` or ``[``.
_FIELD_HEAD = re.compile(r"[^.\[]*")


def is_issuer(source: object) -> bool:
    """Whether ``source`` is an issuer itself (not a callable that returns one)."""
    return not isinstance(source, type) and all(
        callable(getattr(source, call, None)) for call in ("try_acquire", "renew", "release")
    )


def call_signature(task: type) -> inspect.Signature | None:
    """The signature the task is called with (its ``run`` without ``self`` when bound),
    or ``None`` when Python cannot tell it (a builtin)."""
    run = inspect.getattr_static(task, "run")
    if isinstance(run, staticmethod):  # @app.task without bind=True
        run, bound = run.__func__, False
    else:
        bound = inspect.isfunction(run)  # a method: bind=True, or a subclass's run
    try:
        signature = inspect.signature(run)
    except (TypeError, ValueError):
        return None
    parameters = list(signature.parameters.values())
    if bound and parameters and parameters[0].kind in _POSITIONAL:
        parameters = parameters[1:]  # self
    return signature.replace(parameters=parameters)


def key_fields(key: str) -> Iterator[str | int]:
    """The arguments a format-string key names, in order: a name, or a position
    (``{0}``, or ``{}`` numbered automatically). ``ValueError`` for a malformed string."""
    automatic = 0
    pending = [key]
    while pending:
        for _text, field, spec, _conversion in string.Formatter().parse(pending.pop(0)):
            if field is None:
                continue
            match = _FIELD_HEAD.match(field)
            head = match.group() if match else ""
            if not head:
                yield automatic
                automatic += 1
            elif head.isdigit():
                yield int(head)
            else:
                yield head
            if spec:  # a nested field: "{amount:{width}}"
                pending.append(spec)


def check_key_callable(task_name: str, key: Any, signature: inspect.Signature | None) -> None:
    """A callable ``fence_key`` is called with the task's arguments: it must take the
    task's required ones, passed by position or by name (``ValueError`` if neither)."""
    if signature is None:
        return
    try:
        takes = inspect.signature(key)
    except (TypeError, ValueError):  # a builtin: Python cannot tell
        return
    required = [
        p for p in signature.parameters.values() if p.default is p.empty and p.kind not in _VARIADIC
    ]
    only = inspect.Parameter.POSITIONAL_ONLY
    by_position = [None] * sum(p.kind in _POSITIONAL for p in required)
    by_name = {p.name: None for p in required if p.kind is not only}
    for args, kwargs in (
        (by_position, {}),
        ([None] * sum(p.kind is only for p in required), by_name),
    ):
        try:
            takes.bind(*args, **kwargs)
        except TypeError:
            continue
        return
    raise ValueError(
        f"task {task_name!r}: fence_key {key!r} cannot take the task's arguments "
        f"({', '.join(signature.parameters) or 'none'}): it takes {takes}"
    )


def check_key(task_name: str, key: object, signature: inspect.Signature | None) -> None:
    """``fence_key``: a callable that takes the task's arguments, or a format string
    whose every field is an argument the task takes (by name, or by position)."""
    if callable(key):
        check_key_callable(task_name, key, signature)
        return
    if not isinstance(key, str):
        raise TypeError(
            f"fence_key must be a format string or a callable, not {type(key).__name__}"
        )
    try:
        fields = list(key_fields(key))
    except ValueError as exc:
        raise ValueError(
            f"task {task_name!r}: fence_key {key!r} is not a format string: {exc}"
        ) from exc
    if signature is None:
        return
    parameters = list(signature.parameters.values())
    kinds = {parameter.kind for parameter in parameters}
    names = [parameter.name for parameter in parameters]
    positions = sum(parameter.kind in _POSITIONAL for parameter in parameters)
    for field in fields:
        if isinstance(field, int):
            if field < positions or inspect.Parameter.VAR_POSITIONAL in kinds:
                continue
            named = f"position {field}"
        elif field in names or inspect.Parameter.VAR_KEYWORD in kinds:
            continue
        else:
            named = repr(field)
        raise ValueError(
            f"task {task_name!r}: fence_key {key!r} names {named}, which is not an argument "
            f"of the task (its arguments: {', '.join(names) or 'none'})"
        )


def check_options(task: Any) -> None:
    """Every fence option of ``task`` (a ``FencedTask`` class being bound)."""
    key = inspect.getattr_static(task, "fence_key")
    if key is None:
        if getattr(task, "_decorated", False):  # a task, not an abstract base class
            raise TypeError(f"task {task.name!r}: FencedTask needs fence_key")
        return
    check_key(task.name, key, call_signature(task))
    check_ttl(task.fence_ttl, "fence_ttl")
    check_ttl(task.fence_once_ttl, "fence_once_ttl")
    check_timeout(task.fence_timeout)
    if task.fence_on_busy not in ON_BUSY:
        raise ValueError(f"fence_on_busy must be one of {ON_BUSY}, not {task.fence_on_busy!r}")
    countdown = task.fence_retry_countdown
    if countdown is not None:
        seconds = check_timeout(countdown)
        if seconds is None or not math.isfinite(seconds):
            raise ValueError("fence_retry_countdown must be a finite number of seconds")
    issuer = inspect.getattr_static(task, "fence_issuer")
    if issuer is not None and not (is_issuer(issuer) or callable(issuer)):
        raise TypeError(
            f"fence_issuer must be an issuer or a callable returning one, not "
            f"{type(issuer).__name__}"
        )
    if task.fence_url is not None and not isinstance(task.fence_url, str):
        raise TypeError(f"fence_url must be a str, not {type(task.fence_url).__name__}")
    if not isinstance(task.fence_once, bool):
        raise TypeError(f"fence_once must be a bool, not {type(task.fence_once).__name__}")
    store = task.fence_once_store
    if store is not None and not isinstance(store, (OnceStore, str, os.PathLike)):
        raise TypeError(
            f"fence_once_store must be an OnceStore or a directory, not {type(store).__name__}"
        )
