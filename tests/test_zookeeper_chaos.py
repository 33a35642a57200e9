"""``fencing chaos --url zookeeper://...``, as a user runs it: worker processes frozen at
random (SIGSTOP, up to 3x the ttl) past their ZooKeeper sessions, on the 3-server
ensemble whose leader is killed (SIGKILL) during the run. Fenced, no stale write is
accepted, tokens keep increasing across the new leader, and frozen holders' late writes
are refused; the unfenced control, on the standalone server, loses updates.

Both runs go at once, in processes of their own (the chaos run forks its workers, which
must not inherit this process's kazoo threads), to keep the suite short.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

from fencing.testing.servers import ZooKeeperEnsemble, ZooKeeperServer

#: Sessions of 0.4 s (the servers' shortest): pauses of up to 3 s (3x the 1 s ttl)
#: outlive most of them.
OPTIONS = "?session_timeout=0.4&timeout=2"


def chaos(url: str, *args: str, workers: int = 4) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fencing.cli", "chaos", "--url", url + OPTIONS,
         "--workers", str(workers),
         "--duration", "6", "--ttl", "1", "--postgres", "none", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def count(label: str, output: str) -> int:
    found = re.search(rf"{label}: (\d+)", output)
    assert found is not None, f"no {label!r} in {output}"
    return int(found.group(1))


def test_chaos_on_zookeeper_accepts_no_stale_write_and_the_control_loses_updates(
    zookeeper_ensemble: ZooKeeperEnsemble, zookeeper_server: ZooKeeperServer
) -> None:
    """A fenced run on the ensemble, its leader killed (SIGKILL) half-way, then healed;
    the unfenced control on the standalone server. Each run has its staged pause (a
    holder frozen between its read and its write, past its session, resumed once a newer
    holder wrote): refused fenced, a lost update unfenced."""
    with (
        chaos(zookeeper_server.url, "--unfenced", "--seed", "5") as control,
        chaos(zookeeper_ensemble.url, "--seed", "4", workers=2) as run,
    ):
        try:
            time.sleep(3)
            killed = zookeeper_ensemble.kill_leader()
            out, _ = run.communicate(timeout=180)
        finally:
            zookeeper_ensemble.heal()
        lost, _ = control.communicate(timeout=180)
    print(f"leader {killed.myid} killed half-way\n{out}\n{lost}")
    assert run.returncode == 0, out
    assert count("stale writes accepted", out) == 0 and count("violations", out) == 0, out
    assert count("lost updates", out) == 0 and count("leases acquired", out) > 0, out
    assert "frozen between its read and its write" in out, out
    assert count("rejected as stale", out) > 0, out
    assert control.returncode == 1, lost
    assert "frozen between its read and its write" in lost, lost
    assert count("lost updates", lost) > 0, lost
