"""The verdicts on issue 5's targets, judged from the run's ratios, and the hand-off plot.

Targets are never timed assertions in tests: they are read off one run's tables, where
every ratio compares two variants measured interleaved in the same process.

Imports the harness, the ``replicas`` family (its target's ratio), and matplotlib (only
when plotting).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import advisory_family
import limits_family as lf
import replicas
from harness import Stats, Table

REDIS_FENCE = "fencing.RedisFence"


def _row(tables: list[Table], family: str, variant: str) -> tuple[Table, Stats] | None:
    for table in tables:
        if table.family == family:
            for stats in table.rows:
                if stats.name == variant and stats.samples:
                    return table, stats
    return None


def _verdict(target: str, value: float, limit: float, higher_is_better: bool) -> dict[str, Any]:
    met = value >= limit if higher_is_better else value <= limit
    return {
        "target": target,
        "value": round(value, 3),
        "limit": f"{'>=' if higher_is_better else '<='} {limit}",
        "met": bool(met) and not math.isnan(value),
    }


def targets(tables: list[Table]) -> list[dict[str, Any]]:
    """Every target whose rows this run measured, with its value and whether it is met."""
    out: list[dict[str, Any]] = []
    acquire = _row(tables, "acquire", REDIS_FENCE)
    if acquire is not None:
        table, fence = acquire
        floor = table.floor_stats(fence.name)
        assert floor is not None
        out.append(
            _verdict(
                "acquire+release: RedisFence speed / fenced-script floor speed (medians)",
                floor.median / fence.median,
                0.9,
                higher_is_better=True,
            )
        )
        peer = _row(tables, "acquire", "redis-py Lock")
        if peer is not None:
            out.append(
                _verdict(
                    "acquire+release: RedisFence median / redis-py Lock median",
                    fence.median / peer[1].median,
                    1.0,
                    higher_is_better=False,
                )
            )
    for name in (REDIS_FENCE, "fencing.FencedLock (r.lock lock_class=)"):
        handoff = _row(tables, "handoff", name)
        if handoff is not None:
            table, stats = handoff
            r50, r99 = table.ratios(stats)
            short = name.split(" ")[0]
            out.append(_verdict(f"hand-off: {short} p50 / direct floor p50", r50, 1.5, False))
            out.append(_verdict(f"hand-off: {short} p99 / direct floor p99", r99, 3.0, False))
    async_handoff = _row(tables, "handoff", "fencing.aio.RedisFence (asyncio)")
    if async_handoff is not None:  # issue 10: against the same floor on redis.asyncio
        r50, _ = async_handoff[0].ratios(async_handoff[1])
        out.append(
            _verdict(
                "hand-off: fencing.aio.RedisFence p50 / asyncio direct floor p50", r50, 1.2, False
            )
        )
    for table in tables:
        if table.family.startswith("guards-sql"):
            dialect = table.family.rsplit("-", 1)[1]
            for stats in table.rows:
                if stats.name.startswith("fencing.sql") and stats.samples:
                    r50, _ = table.ratios(stats)
                    out.append(
                        _verdict(f"SQL {dialect}: {stats.name} / plain (medians)", r50, 1.1, False)
                    )
            scope = _scope_verdict(table, dialect)
            if scope is not None:
                out.append(scope)
    replicated = replicas.added_over_ack(tables)
    if replicated is not None:  # issue 10: min_replicas=1 costs the acknowledgement, no more
        out.append(
            _verdict(
                "min_replicas=1: time added / what WAIT 1 adds to the bare script (medians)",
                replicated,
                1.2,
                False,
            )
        )
    store = _row(tables, "guards-file", "fencing.FileStore.write")
    if store is not None:
        r50, _ = store[0].ratios(store[1])
        out.append(
            _verdict("FileStore.write / plain write+fsync+rename (medians)", r50, 1.2, False)
        )
    out.extend(_advisory_verdicts(tables))
    out.extend(_etcd_verdicts(tables))
    out.extend(_zookeeper_verdicts(tables))
    out.extend(_limits_verdicts(tables))
    return out


def _limits_verdicts(tables: list[Table]) -> list[dict[str, Any]]:
    """Issue 21: ``try_acquire`` within 1.1x of a bare one-script round trip (the TIME-only
    script, and the limiter's own script called bare) and ahead of ``limits`` and
    pyrate-limiter; a semaphore's acquire+release within 1.15x of the fence's (medians)."""
    out = []
    medians = {
        stats.name: stats.median
        for table in tables
        if table.family in ("limiter", "semaphore")
        for stats in table.rows
        if stats.samples
    }
    pairs = [
        (lf.SLIDING, lf.FLOOR, 1.1),
        (lf.FIXED, lf.FLOOR, 1.1),
        (lf.SLIDING, lf.RAW_SLIDING, 1.1),
        (lf.FIXED, lf.RAW_FIXED, 1.1),
        (lf.SLIDING, lf.LIMITS_MOVING, 1.0),
        (lf.FIXED, lf.LIMITS_FIXED, 1.0),
        (lf.SLIDING, lf.PYRATE, 1.0),
        (lf.SEMAPHORE, lf.FENCE, 1.15),
    ]
    for row, base, limit in pairs:
        if row in medians and base in medians:
            ratio = medians[row] / medians[base]
            out.append(_verdict(f"{row} / {base} (medians)", ratio, limit, False))
    return out


ETCD_FENCES = ("fencing.etcd.EtcdFence", "fencing.etcd.aio.EtcdFence")
ETCD_PEER = "aetcd Lock (asyncio)"


def _etcd_verdicts(tables: list[Table]) -> list[dict[str, Any]]:
    """Issue 11: the etcd fences within 1.2x of the bare etcd calls, and ahead of aetcd's
    Lock on hand-off (medians)."""
    out = []
    for name in ETCD_FENCES:
        for family, what in (("etcd-acquire", "acquire+release"), ("etcd-handoff", "hand-off")):
            row = _row(tables, family, name)
            if row is not None:
                ratio = row[0].ratios(row[1])[0]
                out.append(_verdict(f"etcd {what}: {name} / bare floor", ratio, 1.2, False))
        row, peer = _row(tables, "etcd-handoff", name), _row(tables, "etcd-handoff", ETCD_PEER)
        if row is not None and peer is not None:
            ratio = row[1].median / peer[1].median
            out.append(_verdict(f"etcd hand-off: {name} / aetcd Lock", ratio, 1.0, False))
    return out


ZOOKEEPER_FENCES = ("fencing.zookeeper.ZooKeeperFence", "fencing.zookeeper.aio.ZooKeeperFence")
ZOOKEEPER_PEER = "kazoo Lock"


def _zookeeper_verdicts(tables: list[Table]) -> list[dict[str, Any]]:
    """Issue 11: the ZooKeeper fences within 1.2x of bare create/delete of an ephemeral
    znode, and ahead of kazoo's Lock on hand-off (medians)."""
    out = []
    for name in ZOOKEEPER_FENCES:
        for family, what in (
            ("zookeeper-acquire", "acquire+release"),
            ("zookeeper-handoff", "hand-off"),
        ):
            row = _row(tables, family, name)
            if row is not None:
                ratio = row[0].ratios(row[1])[0]
                out.append(_verdict(f"zookeeper {what}: {name} / bare floor", ratio, 1.2, False))
        row = _row(tables, "zookeeper-handoff", name)
        peer = _row(tables, "zookeeper-handoff", ZOOKEEPER_PEER)
        if row is not None and peer is not None:
            ratio = row[1].median / peer[1].median
            out.append(_verdict(f"zookeeper hand-off: {name} / kazoo Lock", ratio, 1.0, False))
    return out


#: The least A/A spread a "within noise" verdict allows: the A/A medians of the runs in
#: docs/performance.md spread over 0.98-1.00x, so one A/A pair can show less than is real.
MIN_NOISE = 0.02
SCOPE_ROW = "plain UPDATE, process with fencing.sql"


def _scope_verdict(table: Table, dialect: str) -> dict[str, Any] | None:
    """Issue 9: a plain UPDATE with fencing.sql loaded is within the A/A noise of one without."""
    loaded = next((s for s in table.rows if s.name.startswith(SCOPE_ROW)), None)
    if loaded is None or not loaded.samples:
        return None
    aa = [s for s in table.rows if s.name.startswith("A/A") and s.samples]
    spread = [abs(table.ratios(s)[0] - 1) for s in aa]
    limit = 1 + max([MIN_NOISE, *spread])
    return _verdict(
        f"SQL {dialect}: plain UPDATE, process with fencing.sql / without (medians, within A/A)",
        table.ratios(loaded)[0],
        round(limit, 3),
        higher_is_better=False,
    )


def noise(tables: list[Table]) -> list[dict[str, Any]]:
    """The A/A rows: a floor's second copy over the floor, i.e. what noise alone does."""
    out = []
    for table in tables:
        for stats in table.rows:
            if stats.name.startswith("A/A") and stats.samples:
                r50, r99 = table.ratios(stats)
                out.append({"family": table.family, "median_x": r50, "p99_x": r99})
    return out


def _noise(aa: list[dict[str, Any]]) -> str:
    return ", ".join(f"{n['family']} {n['median_x']:.2f}x (p99 {n['p99_x']:.2f}x)" for n in aa)


def render_targets(verdicts: list[dict[str, Any]], aa: list[dict[str, Any]]) -> str:
    lines = []
    if aa:
        lines.append("== noise: a floor's 2nd copy over the floor (A/A), per family")
        lines.append(_noise(aa))
    if not verdicts:
        return "\n".join([*lines, "== targets: none measurable in this run"])
    lines.append("== targets (issue 5), from this run's ratios")
    for v in verdicts:
        lines.append(
            f"{'met   ' if v['met'] else 'MISSED'} {v['target']}: {v['value']:.2f} ({v['limit']})"
        )
    return "\n".join(lines)


def targets_markdown(verdicts: list[dict[str, Any]], aa: list[dict[str, Any]]) -> str:
    """The verdicts as docs/performance.md's table of targets, the A/A noise under it."""
    lines = ["| target | this run | limit | met |", "|---|---:|---:|---|"]
    for v in verdicts:
        met = "yes" if v["met"] else "**no**"
        lines.append(f"| {v['target']} | {v['value']:.2f} | {v['limit']} | {met} |")
    if aa:
        lines += ["", f"Noise, a floor's 2nd copy over the floor (A/A), per family: {_noise(aa)}."]
    return "\n".join(lines)


def plot_handoff(tables: list[Table], path: Path, pinning: str) -> Path | None:
    """A CDF of hand-off latencies per variant, log x-axis; None without a hand-off table."""
    table = next((t for t in tables if t.family == "handoff"), None)
    if table is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    for stats in table.rows:
        ms = sorted(s / 1e6 for s in stats.samples)
        if not ms:
            continue
        cdf = [(i + 1) / len(ms) for i in range(len(ms))]
        ax.step(ms, cdf, where="post", label=f"{stats.name} (p50 {stats.median / 1e6:.2f} ms)")
    ax.set_xscale("log")
    ax.set_xlabel("hand-off latency: release -> waiter (another process) holds [ms, log]")
    ax.set_ylabel("fraction of hand-offs")
    ax.set_title(f"fencing: hand-off latency CDF\n{pinning}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _advisory_verdicts(tables: list[Table]) -> list[dict[str, Any]]:
    """Issue 23: lease=advisory within 1.3x of the bare advisory lock, and faster than
    lease=row (medians)."""
    out = []
    row = _row(tables, "advisory", advisory_family.ADVISORY)
    if row is not None:
        table, stats = row
        out.append(
            _verdict(
                "advisory acquire+release: lease=advisory / bare floor (medians)",
                table.ratios(stats)[0],
                1.3,
                False,
            )
        )
        peer = _row(tables, "advisory", advisory_family.ROW)
        if peer is not None:
            out.append(
                _verdict(
                    "advisory acquire+release: lease=advisory / lease=row (medians)",
                    stats.median / peer[1].median,
                    1.0,
                    False,
                )
            )
    return out
