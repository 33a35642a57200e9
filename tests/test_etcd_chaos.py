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


def control(url: str, seed: int) -> subprocess.Popen[str]:
    """An unfenced run with 2 workers: one of them is frozen at a time, and it is the
    holder half the time, so most runs lose an update (with 4, about half do)."""
    return chaos("--url", url, "--unfenced", "--seed", str(seed), workers=2)


def test_chaos_on_etcd_accepts_no_stale_write_and_the_control_loses_updates(
    etcd_cluster: EtcdCluster,
) -> None:
    fenced = chaos("--issuer", "etcd", "--seed", "3")
    controls = [control(etcd_cluster.url, seed) for seed in (1, 2, 4)]
    out, _ = fenced.communicate(timeout=120)
    print(out)
    assert fenced.returncode == 0, out
    assert "etcd leader killed at" in out and "etcd member restarted at" in out
    assert "stale writes accepted: 0" in out and "violations: 0" in out
    assert "lost updates: 0 " in out and "leases acquired: 0 " not in out
    outputs = [run.communicate(timeout=120)[0] for run in controls]
    for seed in (5, 10, 13):  # pauses are random: every control run may have lost nothing
        if any("lost updates: 0 " not in output for output in outputs):
            break
        outputs.append(control(etcd_cluster.url, seed).communicate(timeout=120)[0])
    print("\n".join(outputs))
    assert any("lost updates: 0 " not in output for output in outputs), outputs
