"""Why a ``FencedMixin`` flush costs more than a plain one: an isolated micro-benchmark.

``python benchmarks/micro_sql.py``: not part of ``run.py``. In-memory SQLite (no I/O, so
only Python is timed), one row updated per transaction through the ORM:

- plain: a model without fencing (fencing.sql's listeners removed meanwhile);
- FencedMixin: as shipped (``fence_token`` has ``server_default=text("0")``);
- FencedMixin, client default: the same model with ``fence_token`` redeclared with
  ``default=0`` instead of a server default.

SQLAlchemy treats a ``version_id_col`` with a server default as server-generated
(``Mapper._version_id_has_server_side_value``), so every flush adds
``return_defaults(fence_token)``: a new UPDATE object each time (a fresh cache key),
which defeated the guard's first, per-statement rewrite memo. The script prints each
variant's median and how often the guard traversed a statement to rewrite it.

Imports SQLAlchemy, fencing.sql and the benchmark harness.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from fencing.sql import FencedMixin, _guard
from guards import _fencing_sql_unloaded, orm_update
from harness import timed


class Base(DeclarativeBase):
    pass


class PlainRow(Base):
    __tablename__ = "plain_rows"
    id: Mapped[int] = mapped_column(primary_key=True)
    value: Mapped[int]
    fence_token: Mapped[int] = mapped_column(sa.BigInteger)


class FencedRow(FencedMixin, Base):
    __tablename__ = "fenced_rows"
    id: Mapped[int] = mapped_column(primary_key=True)
    value: Mapped[int]


class ClientDefaultRow(FencedMixin, Base):
    __tablename__ = "client_default_rows"
    id: Mapped[int] = mapped_column(primary_key=True)
    value: Mapped[int]
    fence_token: Mapped[int] = mapped_column(
        sa.BigInteger, nullable=False, default=0, sort_order=1000
    )


def main() -> None:
    engine = sa.create_engine("sqlite://")
    Base.metadata.create_all(engine)
    with engine.begin() as conn:
        for model in (PlainRow, FencedRow, ClientDefaultRow):
            conn.execute(sa.insert(model), [{"id": 1, "value": 0, "fence_token": 0}])
    tokens = itertools.count(1)

    def orm(model: Any, fenced: bool) -> Callable[[], None]:
        return orm_update(engine, tokens, model, fenced)

    # Count the statement rewrites (the replacement_traverse), whatever the memo.
    rewrites = [0]
    traverse = "_rewrite_criteria" if hasattr(_guard, "_rewrite_criteria") else "_rewrite"
    original = getattr(_guard, traverse)

    def counting(*args: Any) -> Any:
        rewrites[0] += 1
        return original(*args)

    setattr(_guard, traverse, counting)
    runs = {
        "plain ORM (fencing.sql unloaded)": timed(orm(PlainRow, False)),
        "FencedMixin (server_default, as shipped)": timed(orm(FencedRow, True)),
        "FencedMixin with default=0 (client side)": timed(orm(ClientDefaultRow, True)),
    }
    samples: dict[str, list[int]] = {name: [] for name in runs}
    counts = dict.fromkeys(runs, 0)
    for _ in range(10):
        for name, batch in runs.items():
            before = rewrites[0]
            if name.startswith("plain"):
                with _fencing_sql_unloaded():
                    samples[name] += batch(200)
            else:
                samples[name] += batch(200)
            counts[name] += rewrites[0] - before
    floor = statistics.median(samples["plain ORM (fencing.sql unloaded)"])
    for name, values in samples.items():
        median = statistics.median(values)
        print(
            f"{name:<44} {median / 1e3:7.1f} us  {median / floor:5.2f}x"
            f"  guard rewrites: {counts[name]} / {len(values)} flushes"
        )
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", record)
    for model in (FencedRow, ClientDefaultRow):
        orm(model, True)()
        print(f"{model.__name__} UPDATE: {next(s for s in statements if 'UPDATE' in s)!r}")
        statements.clear()
    sa.event.remove(engine, "before_cursor_execute", record)


if __name__ == "__main__":
    main()
