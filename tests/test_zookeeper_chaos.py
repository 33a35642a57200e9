"""``fencing chaos --url zookeeper://...``, as a user runs it: worker processes frozen at
random (SIGSTOP, up to 3x the ttl) past their ZooKeeper sessions. Fenced, no stale write
is accepted and the frozen holders' late writes are refused; the unfenced control, on
the same server, loses updates.

Both runs go at once, in processes of their own (the chaos run forks its workers, which
must not inherit this process's kazoo threads), to keep the suite short.
"""

from __future__ import annotations

import re
import subprocess
import sys

from fencing.testing.servers import ZooKeeperServer


def chaos(url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fencing.cli", "chaos", "--url", url, "--workers", "4",
         "--duration", "5", "--ttl", "0.5", "--postgres", "none", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def count(label: str, output: str) -> int:
    found = re.search(rf"{label}: (\d+)", output)
    assert found is not None, f"no {label!r} in {output}"
    return int(found.group(1))


def test_chaos_on_zookeeper_accepts_no_stale_write_and_the_control_loses_updates(
    zookeeper_server: ZooKeeperServer,
) -> None:
    # sessions of 0.6 s: pauses of up to 1.5 s outlive many of them
    url = f"{zookeeper_server.url}?session_timeout=0.6&timeout=2"
    fenced = chaos(url, "--seed", "3")
    controls = [chaos(url, "--unfenced", "--seed", "5")]
    out, _ = fenced.communicate(timeout=180)
    print(out)
    for attempt in range(3):  # pauses are random: a control run may lose nothing
        control, _ = controls[-1].communicate(timeout=180)
        if count("lost updates", control) > 0 or attempt == 2:
            break
        controls.append(chaos(url, "--unfenced", "--seed", str(6 + attempt)))
    print(control)
    assert fenced.returncode == 0, out
    assert count("stale writes accepted", out) == 0 and count("violations", out) == 0, out
    assert count("lost updates", out) == 0 and count("leases acquired", out) > 0, out
    assert count("rejected as stale", out) > 0, "no frozen holder outlived its session"
    assert controls[-1].returncode == 1, control
    assert count("lost updates", control) > 0, control
