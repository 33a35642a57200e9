"""``fencing chaos`` on etcd, as a user runs it: worker processes frozen at random past
their 1 s leases while the cluster's leader is killed and restarted. Fenced, nothing
stale gets in; unfenced (on the session's cluster, through ``--url``), updates are lost.

Both runs go at once in their own processes (the chaos run forks its workers, which must
not inherit this process's gRPC state), to keep the suite short.
"""

from __future__ import annotations

import subprocess
import sys

from fencing.testing.servers import EtcdCluster


def chaos(*args: str, workers: int = 4) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fencing.cli", "chaos", "--workers", str(workers),
         "--duration", "5", "--ttl", "1", "--postgres", "none", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def test_chaos_on_etcd_accepts_no_stale_write_and_the_control_loses_updates(
    etcd_cluster: EtcdCluster,
) -> None:
    """Each run has its staged pause (a holder frozen between its read and its write,
    resumed once a newer holder wrote): refused fenced, a lost update unfenced. The
    control has three workers: once one is frozen by the staged pause, two are left to
    overtake it even while a random pause holds one of them (a run under a second
    suite's load saw a lone other worker take no lease for a minute)."""
    with (
        chaos("--issuer", "etcd", "--seed", "3") as fenced,
        chaos("--url", etcd_cluster.url, "--unfenced", "--seed", "1", workers=3) as control,
    ):
        out, _ = fenced.communicate(timeout=180)
        lost, _ = control.communicate(timeout=180)
    print(out, lost, sep="\n")
    assert fenced.returncode == 0, out
    assert "etcd leader killed at" in out and "etcd member restarted at" in out
    assert "stale writes accepted: 0" in out and "violations: 0" in out
    assert "lost updates: 0 " in out and "leases acquired: 0 " not in out
    assert "frozen between its read and its write" in out and "rejected as stale: 0 " not in out
    assert "frozen between its read and its write" in lost, lost
    assert "lost updates: 0 " not in lost, lost
