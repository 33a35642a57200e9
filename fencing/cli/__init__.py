"""The ``fencing`` command line: ``fencing demo``, ``fencing chaos``, ``fencing migrate``, and
for operators ``fencing status``, ``fencing list`` and ``fencing release --force``.

Each subcommand lives in its own module exposing ``register(subparsers)``, which adds
its parser and sets ``func`` (returning the exit code). This module only dispatches, and
turns a missing driver into a line naming the extra that brings it (exit status 1).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .. import __version__
from .._base.errors import MissingExtra
from .._base.lazy import needs_extra

#: Modules that each register one subcommand, in the order shown by --help.
SUBCOMMANDS = (
    "fencing.cli.demo.command",
    "fencing.cli.chaos.command",
    "fencing.cli.migrate",
    "fencing.cli.status",
    "fencing.cli.listing",
    "fencing.cli.release",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fencing", description="Fence tokens: stale lock holders stopped at the resource."
    )
    parser.add_argument("--version", action="version", version=f"fencing {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        try:
            importlib.import_module(module).register(subparsers)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with needs_extra(f"fencing {args.command}"):
            code: int = args.func(args)
    except MissingExtra as error:  # a driver is missing: say which extra brings it
        print(error, file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
