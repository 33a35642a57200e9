"""The chaos run: real processes, SIGSTOP pauses up to 3x the TTL, a Redis restart.

Fenced, the independent checker finds no violation; unfenced, it finds lost updates.
The checker itself is tested on hand-made logs, so a checker that sees nothing fails.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from chaos_process import chaos

from fencing.cli.chaos import checker
from fencing.cli.chaos.runner import ChaosConfig


def test_fenced_run_keeps_every_invariant(pg_url: str, tmp_path: Path) -> None:
    outcome, lines = chaos(
        ChaosConfig(workers=4, duration=5, ttl=0.2, postgres_url=pg_url, workdir=tmp_path, seed=4)
    )
    print("\n".join(lines))
    report = outcome.report
    assert report.ok, report.summary()
    assert report.lost_updates == 0 and report.stale_accepted == 0
    assert set(report.per_resource) == {
        "file-store",
        "sql-row-sqlite",
        "sql-row-postgresql",
        "callable-guard",
    }
    assert all(counts["accepted"] > 0 for counts in report.per_resource.values())
    assert outcome.pauses > 0 and outcome.longest_pause > 0.2  # some pause outlived a lease
    assert outcome.redis_restarted_at is not None
    assert report.rejected > 0  # paused holders woke up and were refused
    assert outcome.staged is not None, "the staged pause was never overtaken"
    assert report.per_resource["sql-row-sqlite"]["rejected"] > 0  # the staged one, at least


def test_unfenced_run_loses_updates(tmp_path: Path) -> None:
    """Without the guards the same run loses updates, every run: the staged pause (the
    first holder frozen between its read and its write) overwrites a newer holder's write."""
    outcome, lines = chaos(
        ChaosConfig(workers=4, duration=4, ttl=0.2, fenced=False, workdir=tmp_path)
    )
    print("\n".join(lines))
    assert outcome.staged is not None, "the staged pause was never overtaken"
    assert outcome.report.per_resource["sql-row-sqlite"]["lost"] > 0
    assert not outcome.report.ok and outcome.report.rejected == 0


def record(**fields: object) -> dict[str, object]:
    return {"kind": "write", "resource": "r", "outcome": "accepted", **fields}


def test_checker_sees_a_stale_overwrite() -> None:
    """Kleppmann's timeline as log lines: token 34 accepted, then token 33 overwrites it."""
    records = [
        {"kind": "acquire", "token": 33, "t0": 0.0, "t1": 0.1},
        {"kind": "acquire", "token": 34, "t0": 1.0, "t1": 1.1},
        record(worker=2, seq=1, token=34, t0=1.1, tw=1.2, t1=1.3),
        record(worker=1, seq=1, token=33, t0=0.1, tw=1.5, t1=1.6),
    ]
    report = checker.check(records, {"r": {"ops": [[1, 1, 33]], "token": None}})
    assert report.lost_updates == 1 and report.stale_accepted == 1 and not report.ok
    clean = checker.check(
        [*records[:3], {**records[3], "outcome": "rejected"}],
        {"r": {"ops": [[2, 1, 34]], "token": 34}},
    )
    assert clean.ok and clean.rejected == 1, clean.summary()


def test_checker_sees_an_update_lost_to_an_older_read() -> None:
    """The unfenced-read timeline: A (token 4) read, paused; B (token 5) read the same old
    data; A's write landed (4 >= 3), then B's replaced it. No stale write was accepted,
    but A's update is gone: a lost update, a violation for every resource."""
    records = [
        {"kind": "acquire", "token": 4, "t0": 0.0, "t1": 0.1},
        {"kind": "acquire", "token": 5, "t0": 1.0, "t1": 1.1},
        record(worker=1, seq=1, token=4, t0=0.1, tw=1.3, t1=1.4),
        record(worker=2, seq=1, token=5, t0=1.1, tw=1.5, t1=1.6),
    ]
    report = checker.check(records, {"r": {"ops": [[2, 1, 5]], "token": 5}})
    assert report.lost_updates == 1 and report.stale_accepted == 0 and not report.ok
    assert any("older read" in v for v in report.violations), report.summary()
    # with the read fenced (FileStore.update), B reads A's write and keeps it
    fixed = checker.check(records, {"r": {"ops": [[1, 1, 4], [2, 1, 5]], "token": 5}})
    assert fixed.ok and fixed.lost_updates == 0, fixed.summary()


def test_checker_sees_repeated_and_decreasing_tokens() -> None:
    records = [
        {"kind": "acquire", "token": 5, "t0": 0.0, "t1": 0.1},
        {"kind": "acquire", "token": 5, "t0": 0.2, "t1": 0.3},
        {"kind": "acquire", "token": 4, "t0": 0.4, "t1": 0.5},
    ]
    report = checker.check(records, {})
    assert any("issued 2 times" in v for v in report.violations)
    assert any("token 4 issued after token 5" in v for v in report.violations)


def test_checker_sees_a_rejected_write_applied() -> None:
    records = [record(worker=1, seq=1, token=3, t0=0, tw=0, t1=1, outcome="rejected")]
    report = checker.check(records, {"r": {"ops": [[1, 1, 3]], "token": 3}})
    assert any("rejected write" in v for v in report.violations)


def test_checker_shares_no_code_with_the_guards() -> None:
    source = Path(checker.__file__).read_text()
    assert "import fencing" not in source and "from fencing" not in source
    assert "from ." not in source and "from .." not in source


def test_cli_chaos_short_run(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fencing.cli", "chaos", "--workers", "3", "--duration", "3",
         "--postgres", "none", "--seed", "7"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "lost updates: 0" in result.stdout and "violations: 0" in result.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "fencing.cli", "chaos", "--workers", "1"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "--workers" in bad.stderr
