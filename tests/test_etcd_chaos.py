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


def chaos(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fencing.cli", "chaos", "--workers", "4", "--duration", "5",
         "--ttl", "1", "--postgres", "none", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def test_chaos_on_etcd_accepts_no_stale_write_and_the_control_loses_updates(
    etcd_cluster: EtcdCluster,
) -> None:
    fenced = chaos("--issuer", "etcd", "--seed", "3")
    control = [chaos("--url", etcd_cluster.url, "--unfenced", "--seed", str(s)) for s in (5, 6)]
    out, _ = fenced.communicate(timeout=120)
    print(out)
    assert fenced.returncode == 0, out
    assert "etcd leader killed at" in out and "etcd member restarted at" in out
    assert "stale writes accepted: 0" in out and "violations: 0" in out
    assert "lost updates: 0 " in out and "leases acquired: 0 " not in out
    outputs = [run.communicate(timeout=120)[0] for run in control]
    for seed in (7, 8):  # pauses are random: both control runs may have lost nothing
        if any("lost updates: 0 " not in output for output in outputs):
            break
        outputs.append(
            chaos("--url", etcd_cluster.url, "--unfenced", "--seed", str(seed)).communicate(
                timeout=120
            )[0]
        )
    print("\n".join(outputs))
    assert any("lost updates: 0 " not in output for output in outputs), outputs
    assert all(
        "violations: 0" not in output for output in outputs if "lost updates: 0 " not in output
    )
