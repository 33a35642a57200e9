"""The contract can fail: run against the deliberately broken backends of tests/broken.py,
it fails the checks of the promise each one breaks, and the same checks pass against the
correct backend in the same harness (so the failures come from the backend).

Each run writes a small contract module, as a user would, and runs it in process with
``pytester``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

import pytest

from fencing.testing.contract._drive import ASYNCIO, BLOCKING, Scenario

pytest_plugins = ["pytester"]

INI = """\
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""

#: A contract module for the issuer ``ISSUERS[{issuer!r}]`` of tests/broken.py.
FENCE_MODULE = """\
import pytest

import fencing
import fencing.aio
from broken import ISSUERS
from fencing.testing.contract import AsyncFenceContract, FenceContract


class TestBlocking(FenceContract):
    @pytest.fixture
    def make_fence(self):
        issuer = ISSUERS[{issuer!r}]()
        return lambda name, ttl: fencing.MemoryFence(name, ttl, issuer=issuer)


class TestAsync(AsyncFenceContract):
    @pytest.fixture
    def make_fence(self):
        issuer = ISSUERS[{issuer!r}]()
        return lambda name, ttl: fencing.aio.MemoryFence(name, ttl, issuer=issuer)
"""

#: A contract module for the mark ``MARKS[{mark!r}]`` of tests/broken.py.
MARK_MODULE = """\
import pytest

from broken import MARKS
from fencing.testing.contract import MarkContract


class TestMark(MarkContract):
    @pytest.fixture
    def make_mark(self):
        return MARKS[{mark!r}]
"""

#: A contract module of the operators' capabilities for ``ISSUERS[{issuer!r}]``.
OPERATIONS_MODULE = """\
import pytest

import fencing
from broken import ISSUERS
from fencing.testing.contract import OperationsContract


class TestOperations(OperationsContract):
    @pytest.fixture
    def make_fence(self):
        issuer = ISSUERS[{issuer!r}]()
        return lambda name, ttl: fencing.MemoryFence(name, ttl, issuer=issuer)
"""

#: A semaphore contract module for the issuer ``ISSUERS[{issuer!r}]``.
SEMAPHORE_MODULE = """\
import pytest

from broken import ISSUERS
from fencing.testing.contract import AsyncSemaphoreContract, SemaphoreContract


class TestBlocking(SemaphoreContract):
    @pytest.fixture
    def make_semaphore(self):
        return ISSUERS[{issuer!r}]().semaphore


class TestAsync(AsyncSemaphoreContract):
    @pytest.fixture
    def make_semaphore(self):
        return ISSUERS[{issuer!r}]().aio_semaphore
"""

#: The checks a semaphore that lets N+1 holders in must fail (the tasks race in
#: lockstep, so the extra holder shows on every run; threads may not meet in it).
SEMAPHORE_FAILURES = {
    "TestBlocking::test_permits_are_distinct_slots_and_one_more_waits",
    "TestAsync::test_permits_are_distinct_slots_and_one_more_waits",
    "TestAsync::test_racing_tasks_never_exceed_the_permits",
}
SEMAPHORE_CHECKS = "one_more_waits or never_exceed_the_permits"

#: A read-write lock contract class for the issuer ``ISSUERS[{issuer!r}]`` (a shorter
#: patience: the starved writer's check waits for it to pass).
RWLOCK_CLASS = """
class Test_{key}(RWLockContract):
    patience = 5.0

    @pytest.fixture
    def issuer(self):
        return ISSUERS[{issuer!r}]()

    @pytest.fixture
    def make_rwlock(self, issuer):
        return issuer.rwlock

    @pytest.fixture
    def make_async_rwlock(self, issuer):
        return issuer.aio_rwlock
"""

#: The checks each broken read-write lock must fail (the correct one passes them all).
RWLOCK_FAILURES: dict[str, set[str]] = {
    "correct": set(),
    "distinct-read-tokens": {
        "test_readers_together_share_one_token_and_exclude_writers",
        "test_blocking_and_asyncio_share_leases_and_tokens",
        "test_an_operator_sees_the_holders_and_force_release_ends_their_leases",
    },
    "writers-beside-readers": {
        "test_readers_together_share_one_token_and_exclude_writers",
        "test_blocking_and_asyncio_share_leases_and_tokens",
    },
    "starves-writers": {"test_a_waiting_writer_stops_new_readers"},
    "force-release-ends-nothing": {
        "test_an_operator_sees_the_holders_and_force_release_ends_their_leases"
    },
}

#: A limiter contract module for the issuer ``ISSUERS[{issuer!r}]``.
LIMITER_MODULE = """\
import pytest

from broken import ISSUERS
from fencing.testing.contract import LimiterContract


class TestLimiter(LimiterContract):
    @pytest.fixture
    def issuer(self):
        return ISSUERS[{issuer!r}]()

    @pytest.fixture
    def make_limiter(self, issuer):
        return issuer.limiter

    @pytest.fixture
    def make_async_limiter(self, issuer):
        return issuer.aio_limiter
"""

#: The checks a limiter that admits one request too many must fail (as both kinds of
#: limiter, but for the one check of both at once).
LIMITER_FAILURES = {
    "TestLimiter::test_at_most_limit_admissions_per_window",
    "TestLimiter::test_racing_requests_never_exceed_the_limit",
    "TestLimiter::test_blocking_and_asyncio_share_the_windows",
}
LIMITER_CHECKS = "at_most_limit or racing_requests or share_the_windows"

#: The checks each broken issuer must fail, in both the blocking and the async class.
ISSUER_FAILURES: dict[str, set[str]] = {
    "reuses-tokens": {
        "test_tokens_increase_across_release",
        "test_lease_is_exclusive_and_timeout_zero_tries_once",
        "test_racing_{racers}_are_never_two_holders",
    },
    "ignores-holder": {"test_issuer_compares_holder_and_token"},
    "two-holders": {
        "test_lease_is_exclusive_and_timeout_zero_tries_once",
        "test_timeout_waits_at_least_that_long",
        "test_waiter_gets_the_lease_when_the_holder_releases",
        "test_racing_{racers}_are_never_two_holders",
    },
}

#: The checks a mark that admits lower tokens must fail.
MARK_FAILURES = {
    "test_lower_token_is_refused_without_calling",
    "test_equal_token_is_accepted_and_higher_raises_the_mark",
    "test_tokens_compare_exactly",
    "test_mark_stays_raised_when_the_call_fails",
    "test_racing_admissions_keep_token_order",
    "test_claim_raises_the_mark_without_calling",
    "test_claim_below_the_mark_is_refused_and_equal_is_a_no_op",
}
#: The checks a mark whose claim does not raise it must fail.
CLAIM_FAILURES = {
    "test_claim_raises_the_mark_without_calling",
    "test_claim_below_the_mark_is_refused_and_equal_is_a_no_op",
    "test_claim_waits_for_a_running_call_or_not_as_declared",
}


def expected_issuer_failures(issuer: str) -> set[str]:
    """``Class::test`` of every check ``issuer`` must fail."""
    return {
        f"{cls}::{test.format(racers=racers)}"
        for cls, racers in (("TestBlocking", "threads"), ("TestAsync", "tasks"))
        for test in ISSUER_FAILURES[issuer]
    }


def run_contract(pytester: pytest.Pytester, source: str, *args: str) -> tuple[set[str], set[str]]:
    """Run a contract module; the ``Class::test`` names (parameters dropped) that
    passed and that failed."""
    pytester.makeini(INI)
    pytester.makepyfile(test_contract=source)
    passed, _, failed = pytester.inline_run("-p", "no:cacheprovider", *args).listoutcomes()

    def names(reports: Sequence[pytest.TestReport | pytest.CollectReport]) -> set[str]:
        return {r.nodeid.split("::", 1)[1].split("[")[0] for r in reports}

    return names(passed), names(failed)


def selecting(checks: Iterable[str]) -> str:
    """The ``-k`` expression that runs ``checks`` (``ISSUER_FAILURES`` names) and no other."""
    return " or ".join(sorted({t.format(racers=r) for t in checks for r in ("threads", "tasks")}))


#: The checks that some broken issuer must fail: the correct issuer must pass them all.
SELECTED = selecting(check for checks in ISSUER_FAILURES.values() for check in checks)


@pytest.mark.parametrize("issuer", sorted(ISSUER_FAILURES))
def test_contract_fails_a_broken_issuer(pytester: pytest.Pytester, issuer: str) -> None:
    """Only the checks ``issuer`` must fail run: how it does in the others proves nothing."""
    checks = selecting(ISSUER_FAILURES[issuer])
    _, failed = run_contract(pytester, FENCE_MODULE.format(issuer=issuer), "-k", checks)
    missing = expected_issuer_failures(issuer) - failed
    assert not missing, f"the contract passed {sorted(missing)} for the broken {issuer!r}"


def test_the_same_checks_pass_for_the_correct_issuer(pytester: pytest.Pytester) -> None:
    passed, failed = run_contract(pytester, FENCE_MODULE.format(issuer="correct"), "-k", SELECTED)
    assert not failed, f"the correct issuer failed {sorted(failed)}"
    assert passed == set().union(*map(expected_issuer_failures, ISSUER_FAILURES))


def test_operations_contract_fails_a_force_release_that_lets_tokens_go_back(
    pytester: pytest.Pytester,
) -> None:
    force = "TestOperations::test_force_release_evicts_the_holder_and_the_next_token_is_higher"
    passed, failed = run_contract(pytester, OPERATIONS_MODULE.format(issuer="forgets-counter"))
    assert failed == {force}
    passed, failed = run_contract(pytester, OPERATIONS_MODULE.format(issuer="correct"))
    assert not failed and force in passed


def test_contract_fails_a_mark_that_admits_lower_tokens(pytester: pytest.Pytester) -> None:
    passed, failed = run_contract(pytester, MARK_MODULE.format(mark="admits-lower"))
    assert {f"TestMark::{test}" for test in MARK_FAILURES} <= failed
    assert "TestMark::test_fresh_mark_is_empty" in passed  # the harness itself runs


def test_contract_fails_a_mark_whose_claim_changes_nothing(pytester: pytest.Pytester) -> None:
    passed, failed = run_contract(pytester, MARK_MODULE.format(mark="claims-nothing"))
    assert {f"TestMark::{test}" for test in CLAIM_FAILURES} <= failed
    assert "TestMark::test_lower_token_is_refused_without_calling" in passed


def test_mark_contract_passes_the_correct_mark(pytester: pytest.Pytester) -> None:
    passed, failed = run_contract(pytester, MARK_MODULE.format(mark="correct"))
    assert not failed, f"the correct mark failed {sorted(failed)}"
    assert {f"TestMark::{test}" for test in MARK_FAILURES | CLAIM_FAILURES} <= passed


def test_semaphore_contract_fails_a_semaphore_with_one_permit_too_many(
    pytester: pytest.Pytester,
) -> None:
    module = SEMAPHORE_MODULE.format(issuer="one-more-permit")
    _, failed = run_contract(pytester, module, "-k", SEMAPHORE_CHECKS)
    missing = SEMAPHORE_FAILURES - failed
    assert not missing, f"the contract passed {sorted(missing)} for N+1 holders"


def test_semaphore_contract_passes_the_correct_semaphore(pytester: pytest.Pytester) -> None:
    module = SEMAPHORE_MODULE.format(issuer="correct")
    passed, failed = run_contract(pytester, module, "-k", SEMAPHORE_CHECKS)
    assert not failed, f"the correct semaphore failed {sorted(failed)}"
    assert passed >= SEMAPHORE_FAILURES


def test_rwlock_contract_fails_each_broken_rwlock_and_passes_the_correct_one(
    pytester: pytest.Pytester,
) -> None:
    """One module with a class per issuer, run once (each run of a contract costs
    seconds of collection): every class runs the checks some broken lock must fail."""
    checks = set().union(*RWLOCK_FAILURES.values())
    classes = "".join(
        RWLOCK_CLASS.format(key=issuer.replace("-", "_"), issuer=issuer)
        for issuer in RWLOCK_FAILURES
    )
    module = "import pytest\n\nfrom broken import ISSUERS\n"
    module += "from fencing.testing.contract import RWLockContract\n" + classes
    passed, failed = run_contract(pytester, module, "-k", " or ".join(sorted(checks)))
    for issuer, fails in RWLOCK_FAILURES.items():
        key = f"Test_{issuer.replace('-', '_')}"
        missing = {f"{key}::{check}" for check in fails} - failed
        assert not missing, f"the contract passed {sorted(missing)} for the broken {issuer!r}"
        ok = {f"{key}::{check}" for check in checks - fails}
        assert ok <= passed, f"{issuer!r} failed {sorted(ok - passed)}, which it keeps"


def test_limiter_contract_fails_a_limiter_that_admits_one_more_and_passes_the_correct_one(
    pytester: pytest.Pytester,
) -> None:
    _, failed = run_contract(
        pytester, LIMITER_MODULE.format(issuer="one-more-admission"), "-k", LIMITER_CHECKS
    )
    missing = LIMITER_FAILURES - failed
    assert not missing, f"the contract passed {sorted(missing)} for one admission too many"
    passed, failed = run_contract(
        pytester, LIMITER_MODULE.format(issuer="correct"), "-k", LIMITER_CHECKS
    )
    assert not failed, f"the correct limiter failed {sorted(failed)}"
    assert passed == LIMITER_FAILURES


def test_each_driver_refuses_a_step_only_the_other_could_run() -> None:
    """A contract scenario that yields the wrong kind of call fails loudly: a coroutine
    would pass for a value un-awaited (blocking), and a ``TypeError`` thrown in could
    pass a bad-input check (asyncio). The control: each runs the other's step."""

    async def awaited() -> int:
        return 1

    def awaits() -> Scenario[int]:
        return (yield awaited())  # type: ignore[no-any-return]

    def blocks() -> Scenario[int]:
        return (yield 1)  # type: ignore[no-any-return]

    with pytest.raises(TypeError, match="to the blocking driver"):
        BLOCKING.run(awaits())
    with pytest.raises(TypeError, match="to the asyncio driver"):
        asyncio.run(ASYNCIO.run(blocks()))
    assert BLOCKING.run(blocks()) == 1
    assert asyncio.run(ASYNCIO.run(awaits())) == 1
