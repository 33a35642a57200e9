"""Before and after in one session: ``python benchmarks/compare.py REV [--only FAMILY ...]``.

A ratio to a family's floor drifts between runs made hours apart by more than one run's
own A/A noise (the floor moves with the machine; redis-py's ``Lock``, unchanged, has
read 1.22x to 1.38x across full runs). To tell what a change did, this runs ``REV``'s
benchmarks (a git worktree of ``REV``: its code and its benchmark definitions) and
this tree's alternately, ``--rounds`` times each, and prints for every variant both
sides' median ratio to the floor over the rounds (with their range) and the change,
then the A/A rows' range: the yardstick for that change.

Imports nothing of fencing: each run is ``benchmarks/run.py`` in a child process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

#: (family, variant) -> that variant's median ratio to its floor, one entry per round
Ratios = dict[tuple[str, str], list[float]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the commit to compare this tree with")
    parser.add_argument(
        "--only", nargs="+", default=["acquire"], help="families (default: acquire)"
    )
    parser.add_argument("--rounds", type=int, default=4, help="runs of each side (default 4)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    with tempfile.TemporaryDirectory(prefix="fencing-compare-") as scratch:
        before_tree = Path(scratch) / "before"
        git("worktree", "add", "--detach", "--quiet", str(before_tree), args.rev)
        try:
            before, after = run_alternately(before_tree, args.only, args.rounds, Path(scratch))
        finally:
            git("worktree", "remove", "--force", str(before_tree))
    print_comparison(args.rev, before, after)
    return 0


def git(*args: str) -> None:
    subprocess.run(["git", "-C", str(HERE), *args], check=True)


def run_alternately(
    before_tree: Path, families: list[str], rounds: int, scratch: Path
) -> tuple[Ratios, Ratios]:
    """``rounds`` runs of each tree, before and after in turn, on the same machine state."""
    before: Ratios = defaultdict(list)
    after: Ratios = defaultdict(list)
    for i in range(rounds):
        for side, tree, ratios in (("before", before_tree, before), ("after", HERE, after)):
            print(f"round {i + 1}/{rounds}: {side}", file=sys.stderr, flush=True)
            collect(run_once(tree, families, scratch / f"{side}-{i}"), ratios)
    return before, after


def run_once(tree: Path, families: list[str], out: Path) -> Path:
    """One ``benchmarks/run.py`` of ``tree`` importing ``tree``'s fencing; its JSON."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, "benchmarks/run.py", "--only", *families, "--out", str(out)]
    subprocess.run(command, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    (result,) = out.glob("bench-*.json")
    return result


def collect(result: Path, ratios: Ratios) -> None:
    for family in json.loads(result.read_text())["families"]:
        for row in family["rows"]:
            ratios[family["family"], row["variant"]].append(row["median_x_floor"])


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def print_comparison(rev: str, before: Ratios, after: Ratios) -> None:
    """Rows both sides have, in this tree's order; then the A/A rows' range."""
    print(f"median ratio to the floor over the rounds [range]: {rev} -> this tree")
    print(f"{'family':<11} {'variant':<48} {'before':>21} {'after':>21} {'change':>7}")
    for key, values in after.items():
        if key in before:
            change = statistics.median(values) - statistics.median(before[key])
            print(
                f"{key[0]:<11} {key[1][:48]:<48} {spread(before[key]):>21} "
                f"{spread(values):>21} {change:>+7.3f}"
            )
    noise = [
        v
        for (_, variant), vs in (*before.items(), *after.items())
        for v in vs
        if variant.startswith("A/A")
    ]
    if noise:
        print(f"A/A rows, every round of both sides: {min(noise):.3f}-{max(noise):.3f}")


if __name__ == "__main__":
    sys.exit(main())
