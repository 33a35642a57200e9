"""``fencing demo --plot FILE``: the demo's timeline as a picture, after Kleppmann's figure.

Three lanes (client 1, client 2, storage) on one time axis: each client's lease as a
bar labelled with its token, client 1's SIGSTOP pause as a hatched block, and every
write as an arrow to the storage lane, green when accepted, red when refused (or, in
the unfenced run, when it overwrote a newer write).

Imports matplotlib (the ``plot`` extra) and the demo's result type.
"""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; never a window

import matplotlib.pyplot as plt
from matplotlib.patches import Patch

from .run import DemoEvent, DemoResult

LANES = {"client 1": 3.0, "client 2": 2.0, "storage": 1.0}
GREEN, RED, BLUE, GREY = "#2e7d32", "#c62828", "#1565c0", "#757575"


def _first(result: DemoResult, who: str, kind: str) -> DemoEvent | None:
    return next((e for e in result.events if e.who == who and e.kind == kind), None)


def plot_timeline(result: DemoResult, path: str) -> None:
    """Draw ``result`` to ``path`` (the format follows the suffix: .png or .svg)."""
    start = min(e.at for e in result.events)
    end = max(e.at for e in result.events) - start

    def t(event: DemoEvent) -> float:
        return event.at - start

    fig, ax = plt.subplots(figsize=(11, 4.6), dpi=120)
    for name, y in LANES.items():
        ax.axhline(y, color="#bdbdbd", linewidth=1, zorder=0)
        ax.text(-0.03 * end, y, name, ha="right", va="center", fontsize=11, weight="bold")

    for who in ("client 1", "client 2"):
        acquired = _first(result, who, "acquire")
        if acquired is None:
            continue
        released = _first(result, who, "release")
        if released is None or "lost" in released.text:
            lease_end, lost = t(acquired) + result.ttl, True
        else:
            lease_end, lost = t(released), False
        y = LANES[who]
        ax.barh(y + 0.22, lease_end - t(acquired), left=t(acquired), height=0.16, color=BLUE,
                alpha=0.85)  # fmt: skip
        ax.text(t(acquired), y + 0.42, f"lease, token {acquired.token}", fontsize=10,
                color=BLUE)  # fmt: skip
        if lost:
            ax.text(lease_end, y + 0.42, "lease expired", fontsize=9, color=GREY, ha="center")

    paused, resumed = _first(result, "demo", "pause"), _first(result, "demo", "resume")
    if paused is not None and resumed is not None:
        y = LANES["client 1"]
        ax.barh(y - 0.05, t(resumed) - t(paused), left=t(paused), height=0.22, color="#ffcdd2",
                hatch="///", edgecolor=RED, linewidth=0.5)  # fmt: skip
        ax.text((t(paused) + t(resumed)) / 2, y - 0.32, "frozen by SIGSTOP (a GC pause)",
                ha="center", fontsize=10, color=RED)  # fmt: skip

    _writes(ax, result, t)
    ax.set_xlim(-0.02 * end, end * 1.04)
    ax.set_ylim(0.35, 3.75)
    ax.set_yticks([])
    ax.set_xlabel("seconds since the start (one clock for every process)")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    mode = "fenced" if result.fenced else "UNFENCED"
    verdict = (
        "the stale write is refused by the storage"
        if result.fenced
        else "the stale write overwrites the newer one: a lost update"
    )
    ax.set_title(f"fencing demo ({mode}): {verdict}", fontsize=12)
    ax.legend(
        handles=[
            Patch(color=BLUE, label="lease held"),
            Patch(facecolor="#ffcdd2", edgecolor=RED, hatch="///", label="process frozen"),
            Patch(color=GREEN, label="write accepted"),
            Patch(color=RED, label="write refused / lost update"),
        ],
        loc="lower right",
        fontsize=9,
        frameon=False,
        ncol=4,
        bbox_to_anchor=(1.0, -0.32),
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _writes(ax: Any, result: DemoResult, t: Any) -> None:
    storage = LANES["storage"]
    for event in result.events:
        if not event.kind.startswith("write"):
            continue
        ok = event.kind == "write-ok"
        color = GREEN if ok else RED
        x, y = t(event), LANES[event.who]
        ax.annotate("", xy=(x, storage + 0.05), xytext=(x, y - 0.08),
                    arrowprops={"arrowstyle": "-|>", "color": color, "linewidth": 2})  # fmt: skip
        label = {
            "write-ok": f"write, token {event.token}: ok",
            "write-rejected": f"write, token {event.token}: REFUSED (stale)",
            "write-lost": f"write, token {event.token}: applied, LOST UPDATE",
        }[event.kind]
        ax.text(x, storage - 0.2 - (0.2 if event.who == "client 1" else 0.0), label,
                ha="center", fontsize=10, color=color, weight="bold")  # fmt: skip
