"""The failover chaos run: the same failover three times, fenced and with two controls.

1. fenced: ``fencing``'s issuer behind Sentinel (or on a Redis Cluster), every resource
   guarded;
2. unfenced control: the same issuer, the guards switched off;
3. INCR-only control: the guards on, but tokens from a bare ``INCR`` (``incr``).

In each, workers write through SIGSTOP pauses while the primary (on a Cluster, the
master serving the fence's slot) is killed and a replica that missed the last writes is
promoted. The proof holds when the fenced run has no violation (no stale write accepted,
no token repeated) and both controls have some: the run can fail, and it fails without
what ``fencing`` adds. The figures are printed as a table.

Imports the chaos runner.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from .runner import ChaosConfig, ChaosOutcome, run_chaos

#: (name, guards on, INCR-only tokens) of each run
RUNS = (
    ("fenced", True, False),
    ("unfenced control", False, False),
    ("INCR-only control", True, True),
)


@dataclass
class FailoverProof:
    outcomes: dict[str, ChaosOutcome]

    @property
    def ok(self) -> bool:
        fenced = self.outcomes["fenced"].report
        controls = [o.report for name, o in self.outcomes.items() if name != "fenced"]
        return fenced.ok and all(not report.ok for report in controls)

    def table(self) -> str:
        rows = [
            "run                  accepted  rejected  stale accepted  lost updates  "
            "tokens repeated/decreasing  violations",
        ]
        for name, outcome in self.outcomes.items():
            r = outcome.report
            rows.append(
                f"{name:<20} {r.accepted:>8}  {r.rejected:>8}  {r.stale_accepted:>14}  "
                f"{r.lost_updates:>12}  {r.token_violations:>26}  {len(r.violations):>10}"
            )
        verdict = "holds" if self.ok else "FAILS"
        rows.append(f"proof {verdict}: the fenced run must have no violation, each control some")
        return "\n".join(rows)


def run_failover_proof(config: ChaosConfig, say: Callable[[str], None] = print) -> FailoverProof:
    """``config`` (fenced) run with a failover, then its two controls; the table said.

    Each run is made once: every run has a staged pause (the unfenced control's lost
    update) and a failover that waits for a lease taken from the primary alone and, after
    the promotion, from the replica (the INCR-only control's repeated token)."""
    outcomes: dict[str, ChaosOutcome] = {}
    for name, fenced, incr_only in RUNS:
        workdir = None if config.workdir is None else Path(config.workdir) / name.split()[0]
        run = replace(config, failover=True, fenced=fenced, incr_only=incr_only, workdir=workdir)
        say(f"-- {name}")
        outcomes[name] = run_chaos(run, say=say)
    proof = FailoverProof(outcomes)
    say(proof.table())
    return proof
