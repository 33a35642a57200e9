"""``fencing chaos --issuer redlock``, as a user runs it: worker processes frozen at random
past their leases while the three Redlock masters are restarted empty, one at a time.
Fenced, nothing stale gets in and no token repeats or goes back; unfenced, on the same
kind of run, the staged pause loses an update.

Both runs go at once, each in its own process with its own nodes, to keep the suite short.
"""

from __future__ import annotations

import subprocess
import sys


def chaos(*args: str, workers: int = 4) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fencing.cli", "chaos", "--issuer", "redlock",
         "--workers", str(workers), "--duration", "4", "--ttl", "0.5", "--postgres", "none",
         *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def test_chaos_on_redlock_accepts_no_stale_write_and_the_control_loses_updates() -> None:
    with (
        chaos("--seed", "3") as fenced,
        chaos("--unfenced", "--seed", "1", workers=3) as control,
    ):
        out, _ = fenced.communicate(timeout=180)
        lost, _ = control.communicate(timeout=180)
    print(out, lost, sep="\n")
    assert fenced.returncode == 0, out
    for node in (1, 2, 3):
        assert f"redlock node {node} restarted empty at" in out
    assert "stale writes accepted: 0" in out and "violations: 0" in out
    assert "tokens repeated or decreasing: 0" in out
    assert "lost updates: 0 " in out and "leases acquired: 0 " not in out
    assert "frozen between its read and its write" in out and "rejected as stale: 0 " not in out
    assert "frozen between its read and its write" in lost, lost
    assert "lost updates: 0 " not in lost, lost
