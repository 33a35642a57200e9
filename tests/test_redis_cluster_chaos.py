"""``fencing chaos --failover --cluster``, short: workers write through SIGSTOP pauses
while the master serving the fence's slot is killed and its replica, which missed
writes, is promoted (``CLUSTER FAILOVER TAKEOVER``).

Fenced, the independent checker finds nothing; the unfenced control (guards off) and
the INCR-only control (Redisson-style tokens, its two keys in the fence's slot) show
violations, so the run can fail.
"""

from __future__ import annotations

from pathlib import Path

from chaos_process import failover_proof

from fencing.cli.chaos.runner import ChaosConfig


def test_cluster_failover_chaos(tmp_path: Path) -> None:
    # 3 s: the failover begins at 0.75 s, once a lease has been taken from the master alone;
    # each run goes on past 3 s until one has been taken from the promoted replica, where
    # the INCR-only control hands a token out again (every run: no run is made twice)
    config = ChaosConfig(workers=3, duration=3, ttl=0.2, workdir=tmp_path, seed=5, cluster=True)
    proof, lines = failover_proof(config)
    print("\n".join(lines))
    assert any("on a Redis Cluster" in line for line in lines)
    fenced = proof.outcomes["fenced"]
    assert fenced.failover_at is not None and fenced.promoted_after is not None
    assert fenced.report.ok, fenced.report.summary()
    assert fenced.report.stale_accepted == 0 and fenced.report.token_violations == 0
    assert fenced.report.accepted > 0
    unfenced = proof.outcomes["unfenced control"].report
    assert not unfenced.ok and unfenced.lost_updates + unfenced.stale_accepted > 0
    incr = proof.outcomes["INCR-only control"].report
    assert incr.token_violations > 0, incr.summary()  # a token handed out again
    assert proof.ok and "proof holds" in lines[-1]


def test_cli_flag() -> None:
    """``fencing chaos --failover --cluster`` reaches the Cluster failover proof; alone,
    ``--cluster`` is refused (the run itself is above)."""
    from fencing.cli import build_parser
    from fencing.cli.chaos import command

    args = build_parser().parse_args(["chaos", "--failover", "--cluster", "--workers", "3"])
    assert args.failover is True and args.cluster is True and args.func is command.run
    assert build_parser().parse_args(["chaos", "--failover"]).cluster is False
    assert command.run(build_parser().parse_args(["chaos", "--cluster"])) == 2
