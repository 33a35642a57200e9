"""``FencedTask``: a Celery task base class whose every run holds a fence lease.

::

    @app.task(bind=True, base=FencedTask, fence_key="invoice:{invoice_id}", fence_ttl=30)
    def bill(self, invoice_id):
        store.write(..., self.fence_token)   # a guarded write: stale attempts are refused

One run (an attempt: the first delivery, a retry or a redelivery) goes:

1. the fence name is ``fence_key`` formatted with the task's arguments, bound by name
   with the task's signature (or ``fence_key(*args, **kwargs)`` if it is a callable);
2. ``fence.hold()`` on ``fence_issuer`` (the task option: an issuer, or a callable
   returning one), else on the issuer of ``fence_url`` (the task option), else of the
   app's ``fencing_url`` setting, else of ``$FENCING_URL`` (``fencing.connect()``'s default):
   the lease is acquired, renewed every ttl/3 in a background thread while the task runs,
   and released when it returns, fails or retries;
3. busy (another attempt holds the lease): ``fence_on_busy`` says what to do: ``"wait"``
   (the default: wait up to ``fence_timeout`` seconds for the lease, then
   ``AcquireTimeout``), ``"retry"`` (``self.retry`` after a countdown) or ``"skip"``
   (return ``None`` without running, logged at WARNING with the task id and the key: the
   one choice that drops a call, for keys that name one piece of work);
4. with ``fence_once``, a completion record of the key (``_once``) is read first: a key
   whose work is recorded returns the recorded result without running; otherwise the
   result (JSON) is recorded after the run, written with the attempt's token.

The worker calls ``__call__`` (Celery calls a task's own ``__call__`` when a class
defines one, and keeps the request stack intact when it calls ``super().__call__``).

Imports the core and Celery; never another backend.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from celery import Task

from .._base.errors import AcquireTimeout, LeaseLost
from .._base.token import FenceToken
from .._base.validate import check_name
from .._connect import Backend, connect
from .._lease.fence import Fence, Hold
from ..issuer import Issuer
from ._once import FileOnceStore, OnceStore, default_once_dir
from ._options import check_options, is_issuer

log = logging.getLogger("fencing.celery")

#: One issuer connection per URL and process (dropped in a forked child: a prefork
#: worker's children connect on their own).
_backends: dict[str | None, Backend] = {}
_backends_lock = threading.Lock()
os.register_at_fork(after_in_child=_backends.clear)

#: The attempts running in this thread, innermost last: (task, hold).
_running = threading.local()


def _backend(url: str | None) -> Backend:
    with _backends_lock:
        backend = _backends.get(url)
        if backend is None:
            backend = _backends[url] = connect(url)
        return backend


def _attempts() -> list[tuple[FencedTask, Hold]]:
    stack: list[tuple[FencedTask, Hold]] | None = getattr(_running, "stack", None)
    if stack is None:
        stack = _running.stack = []
    return stack


class FencedTask(Task):  # type: ignore[misc]  # celery ships no type information
    """A Celery task base class: each run holds the lease of a fence named by its
    arguments, and ``self.fence_token`` is that run's token.

    Task options (``@app.task(base=FencedTask, ...)`` or class attributes):

    - ``fence_key``: a format string over the task's arguments (``"invoice:{invoice_id}"``;
      positional ``{0}`` works too) or a callable taking the task's arguments and
      returning the fence name. Required.
    - ``fence_ttl``: the lease's lifetime in seconds (default 30); renewed every ttl/3.
    - ``fence_url``: the issuer's URL. Wins over the app's ``fencing_url`` setting, which
      wins over ``$FENCING_URL`` (and then ``fencing.connect()``'s embedded default).
    - ``fence_issuer``: an issuer (``fencing.issuer.Issuer``), or a callable returning
      one, called at each run (``fencing.django.issuer``: Django's own database). Wins
      over every URL.
    - ``fence_on_busy``: ``"wait"`` (default), ``"retry"`` or ``"skip"``. The default
      never drops a call: distinct calls that share a key run one after the other.
    - ``fence_retry_countdown``: seconds before a ``"retry"`` (default: ``fence_ttl``).
      The task's ``max_retries`` applies (Celery's default is 3; ``None`` for no limit).
    - ``fence_timeout``: how long ``"wait"`` waits (default ``None``: as long as it takes).
    - ``fence_once``: record the result under the key, so that a repeated task whose
      work is done returns it without running (default ``False``).
    - ``fence_once_ttl``: how long a record is kept, seconds (default 86400).
    - ``fence_once_store``: an ``OnceStore``, or a directory for a ``FileOnceStore``;
      default: the app's ``fencing_once_dir`` setting, else ``default_once_dir()``.
    """

    fence_key: str | Callable[..., str] | None = None
    fence_ttl: float = 30.0
    fence_url: str | None = None
    fence_issuer: Issuer | Callable[[], Issuer] | None = None
    fence_on_busy: str = "wait"
    fence_retry_countdown: float | None = None
    fence_timeout: float | None = None
    fence_once: bool = False
    fence_once_ttl: float = 86400.0
    fence_once_store: OnceStore | str | os.PathLike[str] | None = None

    @classmethod
    def on_bound(cls, app: Any) -> None:
        """Check the fence options when Celery binds the task to its app (``_options``):
        a bad option, or a ``fence_key`` naming an argument the task does not take, is a
        ``TypeError``/``ValueError`` at definition, not at the first run."""
        super().on_bound(app)
        check_options(cls)

    # -- what the task body reads ---------------------------------------------------

    def _hold(self) -> Hold | None:
        for task, hold in reversed(_attempts()):
            if task is self:
                return hold
        return None

    @property
    def fence_token(self) -> FenceToken | None:
        """The running attempt's token (``None`` outside a run)."""
        hold = self._hold()
        return None if hold is None else hold.token

    @property
    def fence_lost(self) -> bool:
        """True once the running attempt's renewal found its lease lost: a newer
        attempt may hold it, and the guards will refuse this attempt's writes."""
        hold = self._hold()
        return hold is not None and hold.lost

    # -- the fence of one attempt ----------------------------------------------------

    @functools.cached_property
    def _run_signature(self) -> inspect.Signature:
        """The task body's signature, bound to each run's arguments: computed once (it
        costs more than the rest of naming the fence)."""
        return inspect.signature(self.run)

    def fence_name(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """The fence name of a run with these arguments."""
        # read from the class: a function there would otherwise be bound to the task
        key = inspect.getattr_static(self, "fence_key")
        if key is None:
            raise TypeError(f"task {self.name!r}: FencedTask needs fence_key")
        if isinstance(key, str):
            bound = self._run_signature.bind(*args, **kwargs)
            bound.apply_defaults()
            try:  # positions count arguments passed by name too: {0} is the first
                name: object = key.format(*bound.args, **bound.arguments)
            except (KeyError, IndexError) as exc:  # only a task taking *args or **kwargs
                raise ValueError(
                    f"task {self.name!r}: fence_key {key!r} names {exc}, which this call "
                    f"does not pass"
                ) from exc
        else:
            name = key(*args, **kwargs)
        return check_name(name)

    def fencing_url(self) -> str | None:
        """The issuer's URL: the ``fence_url`` option, else the app's ``fencing_url``
        setting, else ``None`` (``fencing.connect()``: ``$FENCING_URL``, else its default)."""
        if self.fence_url is not None:
            return self.fence_url
        url = self.app.conf.get("fencing_url")
        if url is not None and not isinstance(url, str):
            raise TypeError(f"the fencing_url setting must be a str, not {type(url).__name__}")
        return url

    def once_store(self) -> OnceStore:
        """Where ``fence_once`` records completion (see the class docstring)."""
        store = self.fence_once_store
        if isinstance(store, OnceStore):
            return store
        if store is None:
            store = self.app.conf.get("fencing_once_dir") or default_once_dir()
        return FileOnceStore(Path(store))

    def fence_of(self, name: str) -> Fence:
        """The fence of a run: on ``fence_issuer`` if set, else on the issuer of
        ``fencing_url()``."""
        # read from the class: a function there would otherwise be bound to the task
        source = inspect.getattr_static(self, "fence_issuer")
        if source is None:
            return _backend(self.fencing_url()).fence(name, ttl=self.fence_ttl)
        issuer = source if is_issuer(source) else source()
        return Fence(issuer, name, self.fence_ttl)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = self.fence_name(args, kwargs)
        fence = self.fence_of(name)
        waits = self.fence_on_busy == "wait"
        hold = fence.hold(timeout=self.fence_timeout if waits else 0)
        try:
            token = hold.__enter__()
        except AcquireTimeout:
            if waits:
                raise
            return self._busy(name)
        stack = _attempts()
        stack.append((self, hold))
        try:
            result = self._run_holding(name, token, args, kwargs)
        except BaseException as exc:
            stack.pop()
            self._leave(hold, name, exc)
            raise
        stack.pop()
        self._leave(hold, name, None)
        return result

    def _run_holding(
        self, name: str, token: FenceToken, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if not self.fence_once:
            return super().__call__(*args, **kwargs)
        store = self.once_store()
        recorded = store.get(name)
        if recorded is not None:
            log.info("%s: %r is done already (recorded); not run again", self.name, name)
            return json.loads(recorded)
        result = super().__call__(*args, **kwargs)
        try:
            text = json.dumps(result)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"task {self.name!r}: fence_once records the result as JSON, and "
                f"{type(result).__name__} is not JSON serializable"
            ) from exc
        store.put(name, token, text, self.fence_once_ttl)
        return result

    def _busy(self, name: str) -> Any:
        if self.fence_on_busy == "retry":
            countdown = self.fence_retry_countdown
            log.info("%s: %r is held by another attempt; retrying later", self.name, name)
            raise self.retry(countdown=self.fence_ttl if countdown is None else countdown)
        log.warning(
            "%s[%s]: %r is held by another attempt; this call is skipped, not run "
            '(fence_on_busy="skip")',
            self.name,
            self.request.id,
            name,
        )
        return None

    def _leave(self, hold: Hold, name: str, error: BaseException | None) -> None:
        """Release the lease. A lease found lost is logged (on ``fencing.lost``, by the
        fence) and not raised: the task's own outcome stands, and its writes with a
        superseded token were refused by the guards."""
        try:
            hold.__exit__(None if error is None else type(error), error, None)
        except LeaseLost:
            log.warning("%s: the lease of %r was lost during the run", self.name, name)
