"""The independent checker of the chaos run: replays the logs and the final states.

It shares no code with the guards and imports nothing from ``fencing``: it sees only
JSON records and each resource's final ``{"ops": [[worker, seq, token], ...], "token"}``.
Times are ``time.monotonic`` values from one system-wide clock.

Violations (each makes the run fail; the invariants are those of docs/design.md):

- a token issued twice, or a token not larger than one whose acquire finished before
  this acquire started (invariant 1);
- a stale write accepted: accepted with a token below one whose write was accepted
  before this write began (invariant 2);
- a rejected write found in the final state, or an unknown op;
- the surviving operations of a resource not in non-decreasing token order, or the
  stored mark below the highest surviving token;
- a lost update: an accepted write missing from the final state, whoever removed it: a
  later write with a lower token (a stale overwrite), or a write made from a read taken
  before this write landed (an unfenced read). Every fenced resource fences its read too
  (see ``resources``), so neither may happen to any of them.

Imports the standard library only.
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Report:
    attempts: int = 0
    accepted: int = 0
    rejected: int = 0
    errors: int = 0
    acquisitions: int = 0
    unavailable: int = 0
    lost_updates: int = 0
    stale_accepted: int = 0
    token_violations: int = 0  # tokens issued twice or not increasing
    violations: list[str] = field(default_factory=list)
    per_resource: dict[str, Counter[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        lines = [
            f"attempts: {self.attempts}  accepted: {self.accepted}  "
            f"rejected as stale: {self.rejected}  errors: {self.errors}",
            f"leases acquired: {self.acquisitions}  issuer unavailable: {self.unavailable}",
            f"lost updates: {self.lost_updates}  stale writes accepted: {self.stale_accepted}"
            f"  tokens repeated or decreasing: {self.token_violations}",
        ]
        for name, counts in sorted(self.per_resource.items()):
            parts = "  ".join(f"{key}: {value}" for key, value in sorted(counts.items()))
            lines.append(f"  {name}: {parts}")
        lines.append(f"violations: {len(self.violations)}")
        lines.extend(f"  - {v}" for v in self.violations[:20])
        return "\n".join(lines)


def read_logs(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """All records; a torn last line (a worker killed mid-write) is skipped."""
    records = []
    for path in paths:
        for line in path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def check(records: list[dict[str, Any]], finals: dict[str, dict[str, Any]]) -> Report:
    report = Report()
    acquires = [r for r in records if r["kind"] == "acquire"]
    writes = [r for r in records if r["kind"] == "write"]
    report.acquisitions = len(acquires)
    report.unavailable = sum(r["kind"] == "unavailable" for r in records)
    _check_tokens(acquires, report)
    for name in sorted({w["resource"] for w in writes} | set(finals)):
        mine = [w for w in writes if w["resource"] == name]
        _check_resource(name, mine, finals.get(name, {"ops": [], "token": None}), report)
    return report


def _check_tokens(acquires: list[dict[str, Any]], report: Report) -> None:
    counts = Counter(a["token"] for a in acquires)
    for token, n in counts.items():
        if n > 1:
            report.token_violations += 1
            report.violations.append(f"token {token} was issued {n} times")
    for a, best in _highest_finished_before(acquires, "t0"):
        if best >= a["token"]:
            report.token_violations += 1
            report.violations.append(
                f"token {a['token']} issued after token {best} had been: not increasing"
            )


def _highest_finished_before(
    events: list[dict[str, Any]], start: str
) -> Iterator[tuple[dict[str, Any], int]]:
    """Each event with the highest token among the events that ended (``t1``) before it
    began (its ``start`` field); events that began before any ended are left out."""
    by_end = sorted(events, key=lambda e: e["t1"])
    ends = [e["t1"] for e in by_end]
    best = list(itertools.accumulate((e["token"] for e in by_end), max))
    for event in events:
        i = bisect.bisect_left(ends, event[start])
        if i:
            yield event, best[i - 1]


def _check_resource(
    name: str, writes: list[dict[str, Any]], final: dict[str, Any], report: Report
) -> None:
    counts: Counter[str] = Counter()
    outcome = {(w["worker"], w["seq"]): w for w in writes}
    accepted = [w for w in writes if w["outcome"] == "accepted"]
    counts["attempts"] = len(writes)
    counts["accepted"] = len(accepted)
    counts["rejected"] = sum(w["outcome"] == "rejected" for w in writes)
    counts["errors"] = len(writes) - counts["accepted"] - counts["rejected"]

    # stale writes accepted, from the log alone
    for w, best in _highest_finished_before(accepted, "tw"):
        if best > w["token"]:
            counts["stale accepted"] += 1
            report.violations.append(
                f"{name}: write with token {w['token']} accepted after token {best}'s"
            )

    # the final state
    ops = [tuple(op) for op in final["ops"]]
    present = {(op[0], op[1]) for op in ops}
    tokens = [op[2] for op in ops]
    for op in ops:
        logged = outcome.get((op[0], op[1]))
        if logged is not None and logged["outcome"] == "rejected":
            report.violations.append(f"{name}: rejected write {op} is in the final state")
    if tokens != sorted(tokens):
        counts["out of order"] += 1
        report.violations.append(f"{name}: surviving writes are not in token order")
    if final.get("token") is not None and tokens and final["token"] < max(tokens):
        report.violations.append(f"{name}: stored mark {final['token']} < {max(tokens)}")

    # accepted writes missing from the final state: every one is a lost update
    made = {(op[0], op[1]): outcome.get((op[0], op[1])) for op in ops}
    for w in accepted:
        if (w["worker"], w["seq"]) in present:
            continue
        overwritten_by_lower = any(
            op[2] < w["token"] and (m := made[(op[0], op[1])]) is not None and m["tw"] > w["t1"]
            for op in ops
        )
        how = (
            "overwritten by a later write with a lower token"
            if overwritten_by_lower
            else "overwritten by a write made from an older read"
        )
        counts["lost"] += 1
        report.violations.append(f"{name}: lost update: write with token {w['token']} {how}")

    report.per_resource[name] = counts
    report.attempts += counts["attempts"]
    report.accepted += counts["accepted"]
    report.rejected += counts["rejected"]
    report.errors += counts["errors"]
    report.lost_updates += counts["lost"]
    report.stale_accepted += counts["stale accepted"]
