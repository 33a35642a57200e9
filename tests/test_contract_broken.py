"""The contract can fail: run against the deliberately broken backends of tests/broken.py,
it fails the checks of the promise each one breaks, and the same checks pass against the
correct backend in the same harness (so the failures come from the backend).

Each test writes a small contract module, as a user would, with a class (or two: blocking
and asyncio) per backend of tests/broken.py, broken ones and the correct one, and runs it
once in process with ``pytester``: each run of a contract costs a pytest session and a
collection, so one run checks them all.
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


def key(backend: str) -> str:
    """The class-name part of a backend of tests/broken.py: "two-holders" -> "TwoHolders"
    (``-k`` selects a backend's classes by their whole names: ``-k`` also matches the
    names of the directories above, and pytester's is named after the test)."""
    return backend.title().replace("-", "")


def module(imports: str, template: str, backends: Iterable[str]) -> str:
    """A contract module: ``imports``, then ``template`` (classes named with ``{key}``, for
    the backend ``{backend!r}``) once per backend."""
    classes = "".join(template.format(key=key(b), backend=b) for b in backends)
    return "import pytest\n\n" + imports + classes


def of(backend: str, checks: Iterable[str]) -> set[str]:
    """``checks`` (``Class::test``, the class without its key) as the backend's own."""
    return {check.replace("::", f"{key(backend)}::", 1) for check in checks}


def run_contract(pytester: pytest.Pytester, source: str, *args: str) -> tuple[set[str], set[str]]:
    """Run a contract module; the ``Class::test`` names (parameters dropped) that
    passed and that failed."""
    pytester.makeini(INI)
    pytester.makepyfile(test_contract=source)
    passed, _, failed = pytester.inline_run("-p", "no:cacheprovider", *args).listoutcomes()

    def names(reports: Sequence[pytest.TestReport | pytest.CollectReport]) -> set[str]:
        return {r.nodeid.split("::", 1)[1].split("[")[0] for r in reports}

    return names(passed), names(failed)


def outcomes(names: tuple[set[str], set[str]], backend: str) -> tuple[set[str], set[str]]:
    """The passed and failed checks of ``backend``'s classes, named without its key."""
    part = f"{key(backend)}::"
    return tuple(  # type: ignore[return-value]
        {n.replace(part, "::", 1) for n in group if part in n} for group in names
    )


#: The classes of a fence contract for an issuer of tests/broken.py.
FENCE_CLASSES = """

class TestBlocking{key}(FenceContract):
    @pytest.fixture
    def make_fence(self):
        issuer = ISSUERS[{backend!r}]()
        return lambda name, ttl: fencing.MemoryFence(name, ttl, issuer=issuer)


class TestAsync{key}(AsyncFenceContract):
    @pytest.fixture
    def make_fence(self):
        issuer = ISSUERS[{backend!r}]()
        return lambda name, ttl: fencing.aio.MemoryFence(name, ttl, issuer=issuer)
"""
FENCE_IMPORTS = """import fencing
import fencing.aio
from broken import ISSUERS
from fencing.testing.contract import AsyncFenceContract, FenceContract
"""

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


def expected_issuer_failures(checks: Iterable[str]) -> set[str]:
    """``Class::test`` (the class without its key) of ``checks`` in both classes."""
    return {
        f"{cls}::{test.format(racers=racers)}"
        for cls, racers in (("TestBlocking", "threads"), ("TestAsync", "tasks"))
        for test in checks
    }


def selecting(checks: Iterable[str]) -> str:
    """The ``-k`` expression that runs ``checks`` (``ISSUER_FAILURES`` names) and no other."""
    return " or ".join(sorted({t.format(racers=r) for t in checks for r in ("threads", "tasks")}))


#: The checks that some broken issuer must fail: the correct issuer must pass them all.
SELECTED: set[str] = set().union(*ISSUER_FAILURES.values())


def test_fence_contract_fails_each_broken_issuer_and_passes_the_correct_one(
    pytester: pytest.Pytester,
) -> None:
    """Each broken issuer runs only the checks it must fail (how it does in the others
    proves nothing, and some would wait out their patience); the correct one runs them
    all, and passes."""
    checks = {**ISSUER_FAILURES, "correct": SELECTED}
    source = module(FENCE_IMPORTS, FENCE_CLASSES, checks)
    each = " or ".join(
        f"((TestBlocking{key(i)} or TestAsync{key(i)}) and ({selecting(c)}))"
        for i, c in checks.items()
    )
    names = run_contract(pytester, source, "-k", each)
    for issuer, fails in ISSUER_FAILURES.items():
        missing = expected_issuer_failures(fails) - outcomes(names, issuer)[1]
        assert not missing, f"the contract passed {sorted(missing)} for the broken {issuer!r}"
    passed, failed = outcomes(names, "correct")
    assert not failed, f"the correct issuer failed {sorted(failed)}"
    assert passed == expected_issuer_failures(SELECTED)


#: The operators' contract for an issuer of tests/broken.py.
OPERATIONS_CLASS = """

class TestOperations{key}(OperationsContract):
    @pytest.fixture
    def make_fence(self):
        issuer = ISSUERS[{backend!r}]()
        return lambda name, ttl: fencing.MemoryFence(name, ttl, issuer=issuer)
"""
OPERATIONS_IMPORTS = """import fencing
from broken import ISSUERS
from fencing.testing.contract import OperationsContract
"""


def test_operations_contract_fails_a_force_release_that_lets_tokens_go_back(
    pytester: pytest.Pytester,
) -> None:
    force = "TestOperations::test_force_release_evicts_the_holder_and_the_next_token_is_higher"
    backends = ("forgets-counter", "correct")
    names = run_contract(pytester, module(OPERATIONS_IMPORTS, OPERATIONS_CLASS, backends))
    assert outcomes(names, "forgets-counter")[1] == {force}
    passed, failed = outcomes(names, "correct")
    assert not failed and force in passed


#: The mark contract for a mark of tests/broken.py.
MARK_CLASS = """

class TestMark{key}(MarkContract):
    @pytest.fixture
    def make_mark(self):
        return MARKS[{backend!r}]
"""
MARK_IMPORTS = """from broken import MARKS
from fencing.testing.contract import MarkContract
"""
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


def test_mark_contract_fails_each_broken_mark_and_passes_the_correct_one(
    pytester: pytest.Pytester,
) -> None:
    backends = ("admits-lower", "claims-nothing", "correct")
    names = run_contract(pytester, module(MARK_IMPORTS, MARK_CLASS, backends))
    passed, failed = outcomes(names, "admits-lower")
    assert {f"TestMark::{test}" for test in MARK_FAILURES} <= failed
    assert "TestMark::test_fresh_mark_is_empty" in passed  # the harness itself runs
    passed, failed = outcomes(names, "claims-nothing")
    assert {f"TestMark::{test}" for test in CLAIM_FAILURES} <= failed
    assert "TestMark::test_lower_token_is_refused_without_calling" in passed
    passed, failed = outcomes(names, "correct")
    assert not failed, f"the correct mark failed {sorted(failed)}"
    assert {f"TestMark::{test}" for test in MARK_FAILURES | CLAIM_FAILURES} <= passed


#: The semaphore contract classes for an issuer of tests/broken.py.
SEMAPHORE_CLASSES = """

class TestBlocking{key}(SemaphoreContract):
    @pytest.fixture
    def make_semaphore(self):
        return ISSUERS[{backend!r}]().semaphore


class TestAsync{key}(AsyncSemaphoreContract):
    @pytest.fixture
    def make_semaphore(self):
        return ISSUERS[{backend!r}]().aio_semaphore
"""
SEMAPHORE_IMPORTS = """from broken import ISSUERS
from fencing.testing.contract import AsyncSemaphoreContract, SemaphoreContract
"""
#: The checks a semaphore that lets N+1 holders in must fail (the tasks race in
#: lockstep, so the extra holder shows on every run; threads may not meet in it).
SEMAPHORE_FAILURES = {
    "TestBlocking::test_permits_are_distinct_slots_and_one_more_waits",
    "TestAsync::test_permits_are_distinct_slots_and_one_more_waits",
    "TestAsync::test_racing_tasks_never_exceed_the_permits",
}
SEMAPHORE_CHECKS = "one_more_waits or never_exceed_the_permits"


def one_broken(
    pytester: pytest.Pytester, source: str, checks: str, broken: str, failures: set[str]
) -> set[str]:
    """Run the ``checks`` (a ``-k`` expression) of ``source``, a contract module with the
    backend ``broken`` and the correct one: ``broken`` must fail every one of
    ``failures`` and the correct one none; the checks the correct one passed."""
    names = run_contract(pytester, source, "-k", checks)
    missing = failures - outcomes(names, broken)[1]
    assert not missing, f"the contract passed {sorted(missing)} for {broken}"
    passed, failed = outcomes(names, "correct")
    assert not failed, f"the correct backend failed {sorted(failed)}"
    return passed


def test_semaphore_contract_fails_a_semaphore_with_one_permit_too_many_and_passes_the_correct_one(
    pytester: pytest.Pytester,
) -> None:
    source = module(SEMAPHORE_IMPORTS, SEMAPHORE_CLASSES, ("one-more-permit", "correct"))
    passed = one_broken(pytester, source, SEMAPHORE_CHECKS, "one-more-permit", SEMAPHORE_FAILURES)
    assert passed >= SEMAPHORE_FAILURES


#: A read-write lock contract class for an issuer of tests/broken.py (a shorter patience:
#: the starved writer's check waits for it to pass).
RWLOCK_CLASS = """

class Test{key}(RWLockContract):
    patience = 5.0

    @pytest.fixture
    def issuer(self):
        return ISSUERS[{backend!r}]()

    @pytest.fixture
    def make_rwlock(self, issuer):
        return issuer.rwlock

    @pytest.fixture
    def make_async_rwlock(self, issuer):
        return issuer.aio_rwlock
"""
RWLOCK_IMPORTS = """from broken import ISSUERS
from fencing.testing.contract import RWLockContract
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


def test_rwlock_contract_fails_each_broken_rwlock_and_passes_the_correct_one(
    pytester: pytest.Pytester,
) -> None:
    """Every class runs the checks some broken lock must fail."""
    checks = set().union(*RWLOCK_FAILURES.values())
    source = module(RWLOCK_IMPORTS, RWLOCK_CLASS, RWLOCK_FAILURES)
    names = run_contract(pytester, source, "-k", " or ".join(sorted(checks)))
    for issuer, fails in RWLOCK_FAILURES.items():
        passed, failed = outcomes(names, issuer)
        missing = {f"Test::{check}" for check in fails} - failed
        assert not missing, f"the contract passed {sorted(missing)} for the broken {issuer!r}"
        ok = {f"Test::{check}" for check in checks - fails}
        assert ok <= passed, f"{issuer!r} failed {sorted(ok - passed)}, which it keeps"


#: The limiter contract for an issuer of tests/broken.py.
LIMITER_CLASS = """

class TestLimiter{key}(LimiterContract):
    @pytest.fixture
    def issuer(self):
        return ISSUERS[{backend!r}]()

    @pytest.fixture
    def make_limiter(self, issuer):
        return issuer.limiter

    @pytest.fixture
    def make_async_limiter(self, issuer):
        return issuer.aio_limiter
"""
LIMITER_IMPORTS = """from broken import ISSUERS
from fencing.testing.contract import LimiterContract
"""
#: The checks a limiter that admits one request too many must fail (as both kinds of
#: limiter, but for the one check of both at once).
LIMITER_FAILURES = {
    "TestLimiter::test_at_most_limit_admissions_per_window",
    "TestLimiter::test_racing_requests_never_exceed_the_limit",
    "TestLimiter::test_blocking_and_asyncio_share_the_windows",
}
LIMITER_CHECKS = "at_most_limit or racing_requests or share_the_windows"


def test_limiter_contract_fails_a_limiter_that_admits_one_more_and_passes_the_correct_one(
    pytester: pytest.Pytester,
) -> None:
    source = module(LIMITER_IMPORTS, LIMITER_CLASS, ("one-more-admission", "correct"))
    passed = one_broken(pytester, source, LIMITER_CHECKS, "one-more-admission", LIMITER_FAILURES)
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
