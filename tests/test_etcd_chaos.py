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
        [sys.executable, "-m", "fencing.cli", "chaos", "--workers", "4", "--duration", "6",
         "--ttl", "1", "--postgres", "none", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def test_chaos_on_etcd_accepts_no_stale_write_and_the_control_loses_updates(
    etcd_cluster: EtcdCluster,
) -> None:
    fenced = chaos("--issuer", "etcd", "--seed", "3")
    controls = [chaos("--url", etcd_cluster.url, "--unfenced", "--seed", "5")]
    out, _ = fenced.communicate(timeout=120)
    print(out)
    for attempt in range(3):  # pauses are random: a control run may lose nothing
        control, _ = controls[-1].communicate(timeout=120)
        if "lost updates: 0 " not in control or attempt == 2:
            break
        controls.append(chaos("--url", etcd_cluster.url, "--unfenced", "--seed", str(6 + attempt)))
    print(control)
    assert fenced.returncode == 0, out
    assert "etcd leader killed at" in out and "etcd member restarted at" in out
    assert "stale writes accepted: 0" in out and "violations: 0" in out
    assert "lost updates: 0 " in out and "accepted: 0 " not in out
    assert controls[-1].returncode == 1, control
    assert "lost updates: 0 " not in control, control
