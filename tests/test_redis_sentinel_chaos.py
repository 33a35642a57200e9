"""``fencing chaos --failover``, short: workers write through SIGSTOP pauses while the
primary is killed and a replica that missed writes is promoted by Sentinel.

Fenced, the independent checker finds nothing; the unfenced control (guards off) and
the INCR-only control (Redisson-style tokens) show violations, so the run can fail.
"""

from __future__ import annotations

from pathlib import Path

from chaos_process import failover_proof

from fencing.cli.chaos.runner import ChaosConfig


def test_failover_chaos(tmp_path: Path) -> None:
    # 3 s: the failover begins at 0.75 s, once a lease has been taken from the primary
    # alone; the replica serves about 2.5 s later (Sentinel's down-after and election), and
    # each run goes on until a lease has been taken from it, where the INCR-only control
    # hands a token out again (every run: no run is made twice)
    proof, lines = failover_proof(
        ChaosConfig(workers=3, duration=3, ttl=0.2, workdir=tmp_path, seed=5)
    )
    print("\n".join(lines))
    fenced = proof.outcomes["fenced"]
    assert fenced.failover_at is not None and fenced.promoted_after is not None
    assert fenced.report.ok, fenced.report.summary()
    assert fenced.report.stale_accepted == 0 and fenced.report.token_violations == 0
    assert fenced.report.accepted > 0 and fenced.report.unavailable > 0  # wrote through it
    unfenced = proof.outcomes["unfenced control"].report
    assert not unfenced.ok and unfenced.lost_updates + unfenced.stale_accepted > 0
    incr = proof.outcomes["INCR-only control"].report
    assert incr.token_violations > 0, incr.summary()  # a token handed out again
    assert proof.ok and "proof holds" in lines[-1]


def test_cli_flag() -> None:
    """``fencing chaos --failover`` reaches the failover proof (the run itself is above)."""
    from fencing.cli import build_parser
    from fencing.cli.chaos import command

    args = build_parser().parse_args(["chaos", "--failover", "--workers", "3"])
    assert args.failover is True and args.func is command.run
    assert build_parser().parse_args(["chaos"]).failover is False
