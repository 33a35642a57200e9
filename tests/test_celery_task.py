"""``FencedTask`` called in this process (no worker): fence names from the task's
arguments, the options checked at definition, the token inside a run, what a duplicate
does, where the issuer's URL comes from, and the ``fence_once`` records.

The proofs with real workers and redelivery are in tests/test_celery_workers.py.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery.exceptions import Retry
from waiting import joined, wait_until

import fencing
from fencing import AcquireTimeout, StaleTokenError
from fencing.celery import FencedTask, FileOnceStore
from fencing.issuer import Inspects
from fencing.testing.servers import RedisServer


@pytest.fixture
def app(redis_server: RedisServer, tmp_path: Path) -> Iterator[Celery]:
    app = Celery("fenced", set_as_current=False, broker="memory://")
    app.conf.fencing_url = redis_server.url
    app.conf.fencing_once_dir = str(tmp_path / "once")
    app.finalize()
    yield app
    app.close()


def fence(app: Celery, name: str) -> fencing.Fence:
    return fencing.connect(app.conf.fencing_url).fence(name, ttl=10)


def test_fence_name_from_the_arguments_bound_by_name(app: Celery) -> None:
    @app.task(shared=False, bind=True, base=FencedTask, fence_key="invoice:{invoice_id}:{kind}")
    def bill(self: FencedTask, invoice_id: int, kind: str = "final") -> None: ...

    assert bill.fence_name((42,), {}) == "invoice:42:final"
    assert bill.fence_name((), {"invoice_id": 7, "kind": "draft"}) == "invoice:7:draft"
    with pytest.raises(TypeError):  # arguments the task does not take
        bill.fence_name((1, 2, 3), {})


def test_fence_name_from_a_callable(app: Celery) -> None:
    @app.task(
        shared=False,
        bind=True,
        base=FencedTask,
        fence_key=lambda a, b: f"pair:{min(a, b)}:{max(a, b)}",
    )
    def swap(self: FencedTask, a: int, b: int) -> None: ...

    assert swap.fence_name((5, 3), {}) == "pair:3:5"


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({}, TypeError),  # no fence_key
        ({"fence_key": 42}, TypeError),
        ({"fence_key": "k", "fence_ttl": 0}, ValueError),
        ({"fence_key": "k", "fence_ttl": True}, TypeError),
        ({"fence_key": "k", "fence_on_busy": "queue"}, ValueError),
        ({"fence_key": "k", "fence_timeout": -1}, ValueError),
        ({"fence_key": "k", "fence_retry_countdown": float("inf")}, ValueError),
        ({"fence_key": "k", "fence_once_ttl": float("nan")}, ValueError),
        ({"fence_key": "k", "fence_url": b"redis://"}, TypeError),
        ({"fence_key": "k", "fence_issuer": "redis://"}, TypeError),
        ({"fence_key": "k", "fence_once": "yes"}, TypeError),
        ({"fence_key": "k", "fence_once_store": 42}, TypeError),
        ({"fence_key": "account:{"}, ValueError),  # not a format string
        ({"fence_key": "account:{account}"}, ValueError),  # job takes no argument
        ({"fence_key": "{0}"}, ValueError),
    ],
)
def test_bad_options_fail_at_definition(
    app: Celery, options: dict[str, Any], error: type[Exception]
) -> None:
    def job(self: FencedTask) -> None: ...

    with pytest.raises(error):
        app.task(shared=False, bind=True, base=FencedTask, name=f"bad-{len(app.tasks)}", **options)(
            job
        )


def test_a_fence_key_naming_an_argument_the_task_does_not_take_fails_at_definition(
    app: Celery,
) -> None:
    """A typo in ``fence_key`` is a ValueError naming it when the task is bound, not a
    KeyError on a worker at its first run; what the task takes is accepted (by name,
    by position, attributes of an argument, anything with ``**kwargs``)."""

    def deposit(self: FencedTask, account: str, amount: int) -> None: ...

    for typo in ("account:{acount}", "account:{2}", "{account}:{amount:{width}}"):
        with pytest.raises(ValueError, match="not an argument of the task") as refused:
            app.task(shared=False, bind=True, base=FencedTask, name=f"typo-{typo}", fence_key=typo)(
                deposit
            )
        assert "account, amount" in str(refused.value)  # what it does take
    for key in ("account:{account}", "{0}:{1}", "{}-{}", "{account.upper}", "{amount:>{1}}"):
        task = app.task(shared=False, bind=True, base=FencedTask, name=f"ok-{key}", fence_key=key)
        task(deposit)

    with pytest.raises(ValueError, match="cannot take the task's arguments"):
        app.task(
            shared=False, bind=True, base=FencedTask, name="short", fence_key=lambda a: f"{a}"
        )(deposit)
    for callable_key in (
        lambda a, b: f"{a}",  # by position
        lambda *, account, amount: account,  # by name
        lambda account, **more: account,
        lambda *args, **kwargs: "k",
    ):
        app.task(
            shared=False,
            bind=True,
            base=FencedTask,
            name=f"ok-{id(callable_key)}",
            fence_key=callable_key,
        )(deposit)

    class Transfer(FencedTask):  # a task class of its own: run's self is not an argument
        name = "transfer"
        fence_key = "transfer:{sourc}"

        def run(self, source: str, target: str) -> None: ...

    with pytest.raises(ValueError, match="'sourc', which is not an argument"):
        app.register_task(Transfer)

    def anything(*args: Any, **kwargs: Any) -> None: ...

    app.task(shared=False, base=FencedTask, name="any", fence_key="{who}:{5}")(anything)


def test_a_positional_field_names_an_argument_passed_by_name_too(app: Celery) -> None:
    @app.task(shared=False, bind=True, base=FencedTask, fence_key="{0}:{amount}")
    def deposit(self: FencedTask, account: str, amount: int) -> str:
        return str(self.fence_token)

    assert deposit.fence_name((), {"account": "alice", "amount": 5}) == "alice:5"


def test_token_inside_the_run_and_released_after(app: Celery) -> None:
    seen: list[tuple[int | None, bool]] = []

    @app.task(shared=False, bind=True, base=FencedTask, fence_key="job:{n}")
    def job(self: FencedTask, n: int) -> int:
        seen.append((self.fence_token, self.fence_lost))
        return n * 2

    assert job(21) == 42
    [(token, lost)] = seen
    assert isinstance(token, int) and token > 0 and not lost
    assert job.fence_token is None  # outside a run
    assert fence(app, "job:21").acquire(timeout=0) > token  # released, and the next is newer


def test_issuer_option_wins_over_the_url_an_issuer_or_a_callable(app: Celery) -> None:
    """``fence_issuer``: an issuer itself, or a function called at each run (bound to
    nothing: a function option is not a method of the task)."""
    issuer = fencing.MemoryIssuer()
    calls: list[str] = []

    def per_run() -> fencing.MemoryIssuer:
        calls.append("called")
        return issuer

    @app.task(shared=False, bind=True, base=FencedTask, fence_key="a", fence_issuer=issuer)
    def on_issuer(self: FencedTask) -> int:
        return int(self.fence_token or 0)

    @app.task(shared=False, bind=True, base=FencedTask, fence_key="b", fence_issuer=per_run)
    def on_callable(self: FencedTask) -> int:
        return int(self.fence_token or 0)

    first, second = on_issuer(), on_callable()
    assert issuer.status("a").last_token == first and issuer.status("b").last_token == second
    assert calls == ["called"]
    on_url = fence(app, "a").issuer  # the app's fencing_url: not used
    assert isinstance(on_url, Inspects) and on_url.status("a").last_token is None


def test_released_when_the_task_fails(app: Celery) -> None:
    @app.task(shared=False, bind=True, base=FencedTask, fence_key="failing")
    def failing(self: FencedTask) -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        failing()
    fence(app, "failing").acquire(timeout=0)


def test_a_call_whose_key_is_held_waits_by_default_and_then_runs(app: Celery) -> None:
    """Distinct calls that share a key run one after the other: none is dropped. The
    call is seen queued on the lease (Redis counts its waiters) before the lease is
    released, so it did meet the held lease."""
    ran: list[int] = []

    @app.task(shared=False, bind=True, base=FencedTask, fence_key="deposit:{account}")
    def deposit(self: FencedTask, account: str, amount: int) -> int:
        ran.append(amount)
        return amount

    held = fence(app, "deposit:alice")
    token = held.acquire()
    done: list[int] = []
    second = threading.Thread(target=lambda: done.append(deposit("alice", 5)), daemon=True)
    second.start()
    issuer = held.issuer
    assert isinstance(issuer, Inspects)
    wait_until(lambda: issuer.status("deposit:alice").waiters == 1, "the call waits")
    assert ran == []
    held.release(token)
    joined(second)
    assert done == ran == [5]


def test_skip_drops_a_call_whose_key_is_held_and_says_so_at_warning(
    app: Celery, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[int] = []

    @app.task(shared=False, bind=True, base=FencedTask, fence_key="skip:{n}", fence_on_busy="skip")
    def job(self: FencedTask, n: int) -> int:
        ran.append(n)
        return n

    held = fence(app, "skip:1")
    token = held.acquire()
    with caplog.at_level(logging.WARNING, logger="fencing.celery"):
        assert job.apply((1,), task_id="task-7").get() is None
    assert ran == []
    [record] = [r for r in caplog.records if r.name == "fencing.celery"]
    assert record.levelno == logging.WARNING
    assert "task-7" in record.getMessage() and "'skip:1'" in record.getMessage()
    held.release(token)
    assert job(1) == 1


def test_duplicate_retries_later(app: Celery) -> None:
    @app.task(
        shared=False,
        bind=True,
        base=FencedTask,
        fence_key="retry",
        fence_on_busy="retry",
        fence_ttl=5,
    )
    def job(self: FencedTask) -> None: ...

    held = fence(app, "retry")
    token = held.acquire()
    with pytest.raises(Retry):  # called directly, Celery raises the retry
        job()
    held.release(token)


def test_duplicate_waits_up_to_fence_timeout(app: Celery) -> None:
    @app.task(
        shared=False,
        bind=True,
        base=FencedTask,
        fence_key="wait",
        fence_on_busy="wait",
        fence_timeout=0,
    )
    def job(self: FencedTask) -> str:
        return "ran"

    held = fence(app, "wait")
    token = held.acquire()
    with pytest.raises(AcquireTimeout):
        job()
    held.release(token)
    assert job() == "ran"


def test_url_option_wins_over_setting_over_environment(
    app: Celery, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FENCING_URL", "redis://from-env")

    @app.task(
        shared=False, bind=True, base=FencedTask, fence_key="k", fence_url="redis://from-option"
    )
    def with_option(self: FencedTask) -> None: ...

    @app.task(shared=False, bind=True, base=FencedTask, fence_key="k")
    def without(self: FencedTask) -> None: ...

    assert with_option.fencing_url() == "redis://from-option"
    assert without.fencing_url() == app.conf.fencing_url
    app.conf.fencing_url = None
    assert without.fencing_url() is None  # fencing.connect() then reads $FENCING_URL


def test_fence_once_runs_once_and_returns_the_record(app: Celery, tmp_path: Path) -> None:
    ran: list[str] = []

    @app.task(shared=False, bind=True, base=FencedTask, fence_key="report:{name}", fence_once=True)
    def report(self: FencedTask, name: str) -> dict[str, Any]:
        ran.append(name)
        return {"name": name, "token": self.fence_token}

    first = report("q3")
    assert report("q3") == json.loads(json.dumps(first))
    assert ran == ["q3"]
    assert (tmp_path / "once" / "report%3Aq3.json").exists()


def test_fence_once_needs_a_json_result(app: Celery) -> None:
    @app.task(shared=False, bind=True, base=FencedTask, fence_key="bytes", fence_once=True)
    def job(self: FencedTask) -> bytes:
        return b"x"

    with pytest.raises(TypeError, match="JSON"):
        job()


def test_once_record_written_with_a_stale_token_is_refused(tmp_path: Path) -> None:
    store = FileOnceStore(tmp_path)
    store.put("k", 5, '"new"', ttl=60)
    with pytest.raises(StaleTokenError):
        store.put("k", 4, '"old"', ttl=60)
    assert store.get("k") == '"new"'


def test_once_record_expires(tmp_path: Path) -> None:
    store = FileOnceStore(tmp_path)
    store.put("k", 1, "1", ttl=0.001)
    wait_until(lambda: store.get("k") is None, "the record expired")
    store.put("k", 2, "2", ttl=60)  # the key's work is recorded anew
    assert store.get("k") == "2"


def test_once_keys_become_safe_file_names(tmp_path: Path) -> None:
    store = FileOnceStore(tmp_path)
    assert store.path_of("../etc/passwd").parent == tmp_path
    assert store.path_of("x" * 500).name.startswith("sha256-")
    assert store.get("never") is None
    with pytest.raises(ValueError):
        store.path_of("")
