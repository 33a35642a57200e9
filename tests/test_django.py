"""fencing.django on a real Django, on a SQLite file and on PostgreSQL (a database of its
own on the session's server): guarded saves and updates, refusals of the unguarded ones,
claims, and the guard's atomicity under two writer threads (with the control that loses
updates)."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from waiting import joined, wait_until

import fencing

django = pytest.importorskip("django")

import django_project  # noqa: E402
from django.db import IntegrityError, connections, transaction  # noqa: E402

import fencing.django as fd  # noqa: E402

ALIASES = django_project.ALIASES


@pytest.fixture(params=ALIASES, ids=django_project.VENDORS)
def db(request: pytest.FixtureRequest, django_dbs: Any) -> str:
    return str(request.param)


@pytest.fixture
def Account(django_dbs: Any) -> Any:
    return django_dbs


def new_row(Account: Any, db: str, balance: int = 0) -> Any:
    row = Account(name=uuid.uuid4().hex[:8], balance=balance)
    row.save(using=db)  # a plain save() of a new row is an INSERT: allowed
    return row


def stored(Account: Any, db: str, pk: int) -> tuple[int, int]:
    row = Account.objects.using(db).get(pk=pk)
    return row.balance, row.fence_token


def test_a_fresh_token_is_applied_and_a_stale_one_refused_with_nothing_written(
    Account: Any,
    db: str,
) -> None:
    row = new_row(Account, db)
    assert stored(Account, db, row.pk) == (0, 0)
    old = Account.objects.using(db).get(pk=row.pk)  # the stale holder's copy
    row.balance = 10
    fd.fenced_save(row, 5)
    assert stored(Account, db, row.pk) == (10, 5)
    row.balance = 11
    row.save(fence_token=5)  # the same holder again: accepted
    assert stored(Account, db, row.pk) == (11, 5)
    old.balance = 99
    with pytest.raises(fd.StaleRowError) as refused:
        fd.fenced_save(old, 4)
    assert isinstance(refused.value, fencing.StaleTokenError)
    assert (refused.value.token, refused.value.current) == (4, 5)
    assert stored(Account, db, row.pk) == (11, 5)
    with pytest.raises(fencing.StaleTokenError):
        old.save(fence_token=3, update_fields=["balance"])
    assert stored(Account, db, row.pk) == (11, 5)


def test_update_fields_write_only_those_fields_and_the_token(Account: Any, db: str) -> None:
    row = new_row(Account, db)
    other = Account.objects.using(db).get(pk=row.pk)
    other.note = "kept"
    fd.fenced_save(other, 1)
    row.balance, row.note = 7, "lost"
    row.save(fence_token=2, update_fields=["balance"])
    fresh = Account.objects.using(db).get(pk=row.pk)
    assert (fresh.balance, fresh.note, fresh.fence_token) == (7, "kept", 2)
    with pytest.raises(ValueError, match="no such updatable fields"):
        fd.fenced_save(row, 3, update_fields=["nope"])


def test_a_save_is_one_update_and_expressions_are_guarded_too(Account: Any, db: str) -> None:
    """An accepted save is one statement, the guarded UPDATE (a refused one reads the
    current token after it); a value that is an expression (written through the ORM,
    not the prepared statement) is guarded the same."""
    from django.db.models import F
    from django.test.utils import CaptureQueriesContext

    row = new_row(Account, db, balance=1)
    row.balance = 2
    with CaptureQueriesContext(connections[db]) as accepted:
        row.save(fence_token=3)
    (update,) = [query["sql"] for query in accepted.captured_queries]
    assert update.startswith("UPDATE") and "<=" in update
    with CaptureQueriesContext(connections[db]) as refused, pytest.raises(fd.StaleRowError):
        row.save(fence_token=2)
    assert [q["sql"].split()[0] for q in refused.captured_queries] == ["UPDATE", "SELECT"]
    row.balance = F("balance") + 10
    row.save(fence_token=4)
    assert stored(Account, db, row.pk) == (12, 4)
    row.balance = F("balance") + 100
    with pytest.raises(fd.StaleRowError) as stale:
        row.save(fence_token=3)
    assert stale.value.current == 4
    assert stored(Account, db, row.pk) == (12, 4)


def test_a_missing_row_is_told_apart_from_a_stale_token(Account: Any, db: str) -> None:
    row = new_row(Account, db)
    with fd.unfenced():  # another holder's delete, outside the guard
        Account.objects.using(db).filter(pk=row.pk).delete()
    with pytest.raises(fd.StaleRowError, match="does not exist") as refused:
        fd.fenced_save(row, 1)
    assert refused.value.current is None
    assert not Account.objects.using(db).filter(pk=row.pk).exists()
    assert fd.fenced_get(Account.objects.using(db), 1, pk=row.pk) is None


def test_a_new_instance_saved_with_a_token_is_inserted_with_it(Account: Any, db: str) -> None:
    row = Account(name="n", balance=3)
    fd.fenced_save(row, 8, using=db)
    assert stored(Account, db, row.pk) == (3, 8)


def test_stamping_the_token_then_save_is_the_guarded_write(Account: Any, db: str) -> None:
    """``row.fence_token = token; row.save()`` is ``save(fence_token=token)``: applied
    when fresh, ``StaleRowError`` with nothing written when stale; the stamp lasts until
    the instance is loaded again. A row loaded and not stamped is still refused."""
    row = new_row(Account, db)
    stale = Account.objects.using(db).get(pk=row.pk)  # another holder's copy
    row.fence_token, row.balance = 5, 10
    assert row.fence_stamped and not stale.fence_stamped
    row.save()
    assert stored(Account, db, row.pk) == (10, 5)
    row.balance = 11
    row.save(update_fields=["balance"])  # still stamped: guarded by 5 again
    assert stored(Account, db, row.pk) == (11, 5)
    stale.fence_token, stale.balance = 4, 99
    with pytest.raises(fd.StaleRowError) as refused:
        stale.save()
    assert (refused.value.token, refused.value.current) == (4, 5)
    assert stored(Account, db, row.pk) == (11, 5)
    loaded = Account.objects.using(db).get(pk=row.pk)
    loaded.balance = 50
    with pytest.raises(fencing.UnfencedWriteError, match="stamp the lease's token"):
        loaded.save()  # loaded, not stamped: its token says nothing about its holder
    with pytest.raises(TypeError):
        loaded.fence_token = "6"
        loaded.save()
    assert stored(Account, db, row.pk) == (11, 5)
    # stamped with the token the row holds already (claimed by fenced_get): accepted
    claimed = fd.fenced_get(Account.objects.using(db), 6, pk=row.pk)
    claimed.fence_token, claimed.balance = 6, 12
    claimed.save()
    assert stored(Account, db, row.pk) == (12, 6)
    # a load clears the stamp: claim (which reloads), refresh_from_db
    fd.claim(claimed, 7)
    assert not claimed.fence_stamped
    row.refresh_from_db()
    assert not row.fence_stamped and row.fence_token == 7
    with pytest.raises(fencing.UnfencedWriteError):
        row.save()
    # a guarded save sets the token the row holds, but is no stamp by the program
    row.save(fence_token=8)
    assert row.fence_token == 8 and not row.fence_stamped


def test_a_new_row_stamped_is_inserted_with_its_token_then_guarded(Account: Any, db: str) -> None:
    """Inserts are as before (an INSERT, with the token set); a stamp then guards the
    row's later saves. The column is Django's plain BigIntegerField to migrations."""
    row = Account(name="stamped", balance=1)
    assert not row.fence_stamped  # what __init__ sets is no stamp
    row.fence_token = 3
    row.save(using=db)
    assert stored(Account, db, row.pk) == (1, 3)
    row.balance = 2
    row.save()
    assert stored(Account, db, row.pk) == (2, 3)
    field = Account._meta.get_field("fence_token")
    assert field.deconstruct()[1:] == (
        "django.db.models.BigIntegerField",
        [],
        {"default": 0, "editable": False},
    )


def test_asave_after_a_stamp_is_guarded_too(Account: Any, db: str) -> None:
    import asyncio

    pk = new_row(Account, db).pk

    async def main() -> None:
        row = await Account.objects.using(db).aget(pk=pk)
        stale = await Account.objects.using(db).aget(pk=pk)
        row.fence_token, row.balance = 3, 30
        await row.asave()
        stale.fence_token, stale.balance = 2, 20
        with pytest.raises(fd.StaleRowError):
            await stale.asave()
        await row.arefresh_from_db()
        with pytest.raises(fencing.UnfencedWriteError):
            await row.asave()

    asyncio.run(main())
    assert stored(Account, db, pk) == (30, 3)


def test_unguarded_writes_are_refused_unless_opted_out(Account: Any, db: str) -> None:
    row = new_row(Account, db, balance=1)
    rows = Account.objects.using(db).filter(pk=row.pk)
    row.balance = 50
    with pytest.raises(fencing.UnfencedWriteError, match=r"save\(\) of an existing row"):
        row.save()
    with pytest.raises(fencing.UnfencedWriteError):
        row.save(update_fields=["balance"])
    with pytest.raises(fencing.UnfencedWriteError, match=r"QuerySet.update\(\)"):
        rows.update(balance=50)
    with pytest.raises(fencing.UnfencedWriteError, match=r"bulk_update\(\)"):
        Account.objects.db_manager(db).bulk_update([row], ["balance"])
    with pytest.raises(fencing.UnfencedWriteError):
        Account.objects.using(db).update_or_create(pk=row.pk, defaults={"balance": 50})
    assert stored(Account, db, row.pk) == (1, 0)
    # a new instance with an existing key is an INSERT (refused by the key), never an
    # unguarded UPDATE of the row
    with pytest.raises(IntegrityError), transaction.atomic(using=db):
        Account(pk=row.pk, name="x", balance=50).save(using=db)
    assert stored(Account, db, row.pk) == (1, 0)
    # the explicit opt-outs, for migrations and admin
    row.save(unfenced=True)
    assert stored(Account, db, row.pk) == (50, 0)
    with fd.unfenced():
        rows.update(balance=51)
        row.balance = 52
        Account.objects.db_manager(db).bulk_update([row], ["balance"])
    assert stored(Account, db, row.pk) == (52, 0)
    with pytest.raises(fencing.UnfencedWriteError):
        rows.update(balance=53)


def test_bad_tokens_and_unfenced_models_are_refused_before_any_sql(
    Account: Any,
    db: str,
) -> None:
    row = new_row(Account, db)
    row.balance = 9
    for token, error in [
        (True, TypeError),
        ("5", TypeError),
        (-1, ValueError),
        (2**63, ValueError),
    ]:
        with pytest.raises(error):
            fd.fenced_save(row, token)  # type: ignore[arg-type]
        with pytest.raises(error):
            fd.fenced_update(Account.objects.using(db), token, balance=9)  # type: ignore[arg-type]
        with pytest.raises(error):
            fd.claim(row, token)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="set by the guard"):
        fd.fenced_update(Account.objects.using(db), 1, fence_token=1)
    with pytest.raises(TypeError, match="not a FencedModel"):
        fd.fenced_get(django.db.models.Model, 1, pk=1)
    with pytest.raises(TypeError, match="expected a Django model"):
        fd.fenced_get(int, 1, pk=1)
    assert stored(Account, db, row.pk) == (0, 0)


def test_fenced_update_is_all_or_nothing(Account: Any, db: str) -> None:
    a, b = new_row(Account, db), new_row(Account, db)
    both = Account.objects.using(db).filter(pk__in=[a.pk, b.pk])
    assert fd.fenced_update(both, 3, balance=30) == 2
    fd.fenced_update(Account.objects.using(db).filter(pk=b.pk), 6, balance=60)
    with pytest.raises(fd.StaleRowError) as refused:
        fd.fenced_update(both, 5, balance=50)
    assert refused.value.current == 6
    assert stored(Account, db, a.pk) == (30, 3)  # rolled back with the refusal
    assert stored(Account, db, b.pk) == (60, 6)
    assert fd.fenced_update(both, 7, balance=70) == 2
    assert [stored(Account, db, pk) for pk in (a.pk, b.pk)] == [(70, 7), (70, 7)]


def test_a_guarded_write_that_changes_nothing_is_not_taken_for_a_stale_one(
    Account: Any, db: str
) -> None:
    """The same values with the same token again change no column. MySQL and MariaDB
    count such a row as matched but not changed; Django's MySQL backend asks for rows
    matched (``CLIENT.FOUND_ROWS``), so the save, the update and the claim are accepted.
    The control, on MariaDB: the very UPDATE on a session counting rows changed (the
    server's default) reports none, which a guard would take for a refusal."""
    row = new_row(Account, db, balance=5)
    row.save(fence_token=7)
    row.save(fence_token=7)  # nothing changes: not stale
    rows = Account.objects.using(db).filter(pk=row.pk)
    assert fd.fenced_update(rows, 7, balance=5) == 1
    assert fd.claim(row, 7) == 1
    assert fd.fenced_get(rows, 7, pk=row.pk).fence_token == 7
    assert stored(Account, db, row.pk) == (5, 7)
    if connections[db].vendor != "mysql":
        return
    import pymysql

    settings = connections[db].settings_dict
    changed_only = pymysql.connect(
        host=settings["HOST"], port=int(settings["PORT"]), user=settings["USER"]
    )
    try:
        with changed_only.cursor() as cursor:
            cursor.execute(f"USE {settings['NAME']}")
            table = Account._meta.db_table
            same = f"UPDATE {table} SET balance = 5, fence_token = 7 WHERE id = %s"
            assert cursor.execute(same + " AND fence_token <= 7", [row.pk]) == 0
    finally:
        changed_only.close()


def test_fenced_update_sees_a_token_raised_after_its_transactions_snapshot(
    Account: Any,
) -> None:
    """MariaDB at REPEATABLE READ (a project's ``isolation_level``): a read inside the
    caller's ``atomic()`` fixes the transaction's snapshot, then another holder raises a
    row's token to 9 and commits. ``fenced_update`` with 5 must still refuse, all or
    nothing: its check reads the newest rows, not the snapshot. The control: a plain
    read in that transaction still shows the row's old token, which a check reading the
    snapshot would have let pass (writing the other row)."""
    db = "maria"
    a, b = new_row(Account, db), new_row(Account, db)
    both = Account.objects.using(db).filter(pk__in=[a.pk, b.pk])

    def raise_b() -> None:  # another holder, on its thread's own connection
        fd.fenced_update(Account.objects.using(db).filter(pk=b.pk), 9, balance=90)
        connections[db].close()

    with transaction.atomic(using=db):
        with connections[db].cursor() as cursor:  # the level of the next transaction
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        assert sorted(row.fence_token for row in both) == [0, 0]  # the snapshot
        other = threading.Thread(target=raise_b)
        other.start()
        joined(other)
        assert Account.objects.using(db).get(pk=b.pk).fence_token == 0  # control
        with pytest.raises(fd.StaleRowError) as refused:
            fd.fenced_update(both, 5, balance=50)
        assert refused.value.current == 9
    assert stored(Account, db, a.pk) == (0, 0)  # nothing written
    assert stored(Account, db, b.pk) == (90, 9)


def test_claims_raise_the_token_without_changing_data(Account: Any, db: str) -> None:
    row = new_row(Account, db, balance=4)
    with fd.unfenced():  # another holder's delete, outside the guard
        Account.objects.using(db).filter(pk=row.pk).delete()
    with pytest.raises(fd.StaleRowError):
        fd.claim(row, 1)
    row = new_row(Account, db, balance=4)
    assert fd.claim(row, 5) == 1
    assert row.fence_token == 5 and stored(Account, db, row.pk) == (4, 5)
    with pytest.raises(fd.StaleRowError) as refused:
        fd.claim(row, 4)
    assert refused.value.current == 5
    assert fd.claim(Account.objects.using(db).filter(pk=row.pk), 6) == 1
    assert stored(Account, db, row.pk) == (4, 6)
    claimed = fd.fenced_get(Account.objects.using(db), 7, pk=row.pk)
    assert (claimed.balance, claimed.fence_token) == (4, 7)
    with pytest.raises(fd.StaleRowError):
        fd.fenced_get(Account.objects.using(db), 6, pk=row.pk)


def test_claim_before_read_closes_the_read_then_write_window(Account: Any, db: str) -> None:
    """Kleppmann's window: A (token 4) reads, B (token 5) reads, A writes, B writes from
    its stale read. Write-only guards accept both (the control: A's +1 is lost); B's claim
    before its read makes A's write refused."""
    for claim_first in (False, True):
        pk = new_row(Account, db, balance=100).pk
        a = Account.objects.using(db).get(pk=pk)
        if claim_first:
            b = fd.fenced_get(Account.objects.using(db), 5, pk=pk)
        else:
            b = Account.objects.using(db).get(pk=pk)
        a.balance += 1
        if claim_first:
            with pytest.raises(fencing.StaleTokenError):
                fd.fenced_save(a, 4)
        else:
            fd.fenced_save(a, 4)  # accepted: nothing newer has written the row yet
        b.balance += 10
        fd.fenced_save(b, 5)
        # without the claim A's accepted +1 is lost; with it A was told, and only B's
        # change is there, computed from what B claimed and read
        assert stored(Account, db, pk) == (110, 5)


def _race(
    Account: Any,
    db: str,
    write: Callable[[Any, int], None],
    enough: Callable[[list[tuple[int, int]], int], bool],
) -> tuple[list[tuple[int, int]], list[int], int]:
    """Two writer threads (a connection each) take interleaved tokens from one counter
    and write ``balance = token`` with it; an observer thread records the row. Runs
    until ``enough(observed, refused)``; returns what was observed, accepted, refused."""
    pk = new_row(Account, db).pk
    tokens, lock, stop = itertools.count(1), threading.Lock(), threading.Event()
    observed: list[tuple[int, int]] = []
    accepted: list[int] = []
    refused = [0]
    failures: list[BaseException] = []

    def writer() -> None:
        try:
            row = Account.objects.using(db).get(pk=pk)
            while not stop.is_set():
                with lock:
                    token = next(tokens)
                try:
                    write(row, token)
                except fencing.StaleTokenError:
                    with lock:
                        refused[0] += 1
                else:
                    with lock:
                        accepted.append(token)
        except BaseException as exc:
            failures.append(exc)
        finally:
            connections.close_all()

    def observer() -> None:
        try:
            rows = Account.objects.using(db).filter(pk=pk)
            while not stop.is_set():
                observed.append(rows.values_list("fence_token", "balance").get())
                time.sleep(0.002)  # leave the writers the database (SQLite's one lock)
        except BaseException as exc:
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=f, daemon=True) for f in (writer, writer, observer)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: failures or enough(observed, refused[0]), "the race happened")
    finally:
        stop.set()
        joined(*threads)
    assert not failures, failures
    return observed, accepted, refused[0]


def test_the_guard_is_atomic_under_two_concurrent_writers(Account: Any, db: str) -> None:
    def fenced(row: Any, token: int) -> None:
        row.balance = token
        time.sleep(0.001)  # let the other writer take a newer token first, now and then
        fd.fenced_save(row, token)

    observed, accepted, refused = _race(
        Account, db, fenced, lambda seen, refused: refused >= 5 and len(seen) >= 10
    )
    # lower tokens did arrive after higher ones (refused), and none of them ever landed
    assert refused >= 5
    assert all(balance == token for token, balance in observed)
    marks = [token for token, _ in observed]
    assert marks == sorted(marks)
    final = Account.objects.using(db).order_by("-pk").first()  # the race's row
    assert (final.balance, final.fence_token) == (max(accepted), max(accepted))


def test_control_check_then_save_lets_a_lower_token_land_after_a_higher_one(
    Account: Any,
    db: str,
) -> None:
    """The same race with the check in Python and a plain save(): the check and the
    write are two steps, so a lower token lands after a higher one (the lost update)."""

    def check_then_save(row: Any, token: int) -> None:
        row.refresh_from_db()
        if row.fence_token > token:
            raise fencing.StaleTokenError(token, row.fence_token)
        time.sleep(0.001)  # widen the gap between check and write that the guard closes
        row.balance = row.fence_token = token
        row.save(unfenced=True)

    def went_back(seen: list[tuple[int, int]], refused: int) -> bool:
        marks = [token for token, _ in list(seen)]
        return any(later < earlier for earlier, later in itertools.pairwise(marks))

    observed, _, _ = _race(Account, db, check_then_save, went_back)
    assert went_back(observed, 0)


def test_asyncio_saves_updates_and_claims(Account: Any, db: str) -> None:
    import asyncio

    pk = new_row(Account, db).pk

    async def main() -> None:
        row = await Account.objects.using(db).aget(pk=pk)
        row.balance = 5
        await row.asave(fence_token=2)
        await fd.afenced_save(row, 3)
        with pytest.raises(fencing.UnfencedWriteError):
            await row.asave()
        with pytest.raises(fencing.UnfencedWriteError):
            await Account.objects.using(db).filter(pk=row.pk).aupdate(balance=1)
        rows = Account.objects.using(db).filter(pk=row.pk)
        assert await fd.afenced_update(rows, 4, balance=6) == 1
        assert await fd.aclaim(row, 5) == 1 and row.balance == 6
        with pytest.raises(fd.StaleRowError):
            await fd.afenced_save(row, 4)
        got = await fd.afenced_get(Account.objects.using(db), 6, pk=row.pk)
        assert (got.balance, got.fence_token) == (6, 6)

    asyncio.run(main())


def test_fenced_delete_deletes_with_a_fresh_token_and_refuses_a_stale_one(
    Account: Any, db: str
) -> None:
    from django.db.models.signals import post_delete

    row = new_row(Account, db, balance=3)
    old = Account.objects.using(db).get(pk=row.pk)  # the stale holder's copy
    fd.fenced_save(row, 5)
    with pytest.raises(fd.StaleRowError) as refused:
        fd.fenced_delete(old, 4)
    assert (refused.value.token, refused.value.current) == (4, 5)
    with pytest.raises(fencing.StaleTokenError):
        old.delete(fence_token=4)
    assert stored(Account, db, row.pk) == (3, 5)  # nothing deleted, nothing claimed
    seen: list[int] = []

    def deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
        seen.append(instance.pk)

    post_delete.connect(deleted, sender=Account)
    try:
        pk = row.pk
        assert row.delete(fence_token=5) == (1, {"django_app.Account": 1})
    finally:
        post_delete.disconnect(deleted, sender=Account)
    assert seen == [pk] and row.pk is None
    assert not Account.objects.using(db).filter(pk=pk).exists()
    # the row is gone: told apart from a stale token
    with pytest.raises(fd.StaleRowError, match="does not exist") as missing:
        fd.fenced_delete(old, 6)
    assert missing.value.current is None
    with pytest.raises(ValueError, match="a saved row"):
        fd.fenced_delete(Account(name="new"), 1)
    with pytest.raises(TypeError):
        fd.fenced_delete(old, True)


def test_fenced_delete_of_a_queryset_is_all_or_nothing(Account: Any, db: str) -> None:
    a, b, c = (new_row(Account, db) for _ in range(3))
    both = Account.objects.using(db).filter(pk__in=[a.pk, b.pk])
    fd.fenced_save(b, 6)
    with pytest.raises(fd.StaleRowError) as refused:
        fd.fenced_delete(both, 5)
    assert refused.value.current == 6
    assert [stored(Account, db, pk) for pk in (a.pk, b.pk)] == [(0, 0), (0, 6)]  # rolled back
    assert fd.fenced_delete(both, 6) == (2, {"django_app.Account": 2})
    assert list(Account.objects.using(db).filter(pk__in=[a.pk, b.pk, c.pk])) == [c]
    assert fd.fenced_delete(both, 7) == (0, {})  # nothing left to delete: no error


def test_unguarded_deletes_are_refused_unless_opted_out(Account: Any, db: str) -> None:
    import asyncio

    rows = [new_row(Account, db) for _ in range(4)]
    mine = Account.objects.using(db).filter(pk__in=[row.pk for row in rows])
    with pytest.raises(fencing.UnfencedWriteError, match=r"delete\(\) without a fence token"):
        rows[0].delete()
    with pytest.raises(fencing.UnfencedWriteError, match=r"QuerySet.delete\(\)"):
        mine.delete()
    with pytest.raises(fencing.UnfencedWriteError):
        asyncio.run(rows[0].adelete())
    with pytest.raises(fencing.UnfencedWriteError):
        asyncio.run(mine.adelete())
    assert not hasattr(Account.objects, "delete")  # as Django's: the queryset's only
    assert mine.count() == 4
    rows[0].delete(unfenced=True)
    with fd.unfenced():
        mine.filter(pk=rows[1].pk).delete()
    assert asyncio.run(fd.afenced_delete(rows[2], 1)) == (1, {"django_app.Account": 1})
    assert asyncio.run(rows[3].adelete(fence_token=1)) == (1, {"django_app.Account": 1})
    assert mine.count() == 0


def test_manage_py_fencing_status_list_and_release(
    django_dbs: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``manage.py fencing`` runs the CLI's status, list and release --force, with the
    issuer's URL from the ``FENCING_URL`` setting when ``--url`` is not given."""
    from django.core.management import CommandError, call_command
    from django.test import override_settings

    url = f"sqlite:///{tmp_path / 'fences.db'}"
    backend = fencing.connect(url)
    token = backend.fence("nightly", ttl=60).acquire()
    with override_settings(FENCING_URL=url):
        call_command("fencing", "status", "nightly")
        shown = capsys.readouterr().out
        assert shown.startswith("nightly: held by ") and f"with token {token:d}," in shown
        call_command("fencing", "list")
        assert "nightly" in capsys.readouterr().out.split()
        with pytest.raises(CommandError) as refused:
            call_command("fencing", "release", "nightly")  # no --force: nothing changed
        assert refused.value.returncode == 2
        assert "without --force" in capsys.readouterr().err
        call_command("fencing", "release", "--force", "nightly")
        capsys.readouterr()
        call_command("fencing", "status", "nightly", "--json")
        assert '"held": false' in capsys.readouterr().out
    assert backend.fence("nightly", ttl=60).acquire() > token


def test_manage_py_fencing_database_operates_the_fences_of_django_s_own_database(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``manage.py fencing ... --database ALIAS`` reads and force-releases the leases of
    ``fencing.django.fence`` in that database (the FENCING_URL setting does not apply);
    ``--url`` with it, or an unknown alias, is a usage error; locks and rate limiters,
    which this issuer has not, are exit 4."""
    from django.core.management import CommandError, call_command
    from django.test import override_settings

    name = f"nightly:{uuid.uuid4().hex[:8]}"
    token = fd.fence(name, ttl=60, using=db).acquire()
    with override_settings(FENCING_URL="redis://127.0.0.1:1/0"):  # never dialled
        call_command("fencing", "status", name, "--database", db)
        shown = capsys.readouterr().out
        assert shown.startswith(f"{name}: held by ") and f"with token {token:d}," in shown
        call_command("fencing", "list", "--prefix", name, "--database", db)
        assert capsys.readouterr().out.split() == [name]
        call_command("fencing", "release", "--force", name, "--database", db)
        assert f"token {token:d}" in capsys.readouterr().out
        assert not fd.issuer(db).status(name).held
        for wrong in (["--url", "sqlite:///x.db"], ["--database", "nowhere"]):
            with pytest.raises(CommandError) as refused:
                call_command("fencing", "status", name, "--database", db, *wrong)
            assert refused.value.returncode == 2
        for unsupported in (["--lock"], ["--limiter", "--per", "1"]):  # not on this issuer
            with pytest.raises(CommandError) as refused:
                call_command("fencing", "status", name, "--database", db, *unsupported)
            assert refused.value.returncode == 4
    assert fd.fence(name, ttl=60, using=db).acquire() > token


def test_manage_py_fencing_shows_django_s_fences_by_default_through_self_stdout(
    django_dbs: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without ``--database`` or ``--url`` (and no ``FENCING_URL`` setting) the command
    operates ``fencing.django.fence``'s fences, on the ``default`` database; what it
    says goes to the command's ``stdout``/``stderr``, so ``call_command`` captures it
    and the process's own streams get nothing."""
    from io import StringIO

    from django.conf import settings
    from django.core.management import CommandError, call_command

    assert not hasattr(settings, "FENCING_URL")
    name = f"default:{uuid.uuid4().hex[:8]}"
    token = fd.fence(name, ttl=60).acquire()
    out, err = StringIO(), StringIO()
    call_command("fencing", "status", name, stdout=out, stderr=err)
    assert out.getvalue().startswith(f"{name}: held by ") and f"with token {token:d}," in (
        out.getvalue()
    )
    out = StringIO()
    call_command("fencing", "list", "--prefix", name, stdout=out)
    assert out.getvalue() == f"{name}\n"  # one line each, no ending added by Django
    with pytest.raises(CommandError) as refused:
        call_command("fencing", "release", name, stdout=out, stderr=err)  # no --force
    assert refused.value.returncode == 2 and "without --force" in err.getvalue()
    out = StringIO()
    call_command("fencing", "release", "--force", name, stdout=out)
    assert f"token {token:d}" in out.getvalue()
    assert capsys.readouterr() == ("", "")
    assert fd.fence(name, ttl=60).acquire() > token
