"""``manage.py fencing status|list|release --force``: the ``fencing`` command line's own
operator commands (``fencing.cli.status``, ``listing``, ``release``), the same
arguments, output and exit codes, with the issuer's URL defaulting to the project's
``FENCING_URL`` setting (then ``$FENCING_URL``, then the embedded SQLite file).

A command-line entry point kept where Django looks for commands; the import contracts
(pyproject.toml) let it, and only it, import ``fencing.cli``.
"""

from __future__ import annotations

import argparse
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from fencing.cli import listing, release, status


class Command(BaseCommand):
    help = (
        "Inspect and operate fences: status NAME..., list [--prefix P], "
        "release --force NAME (as the `fencing` command line)."
    )

    def add_arguments(self, parser: Any) -> None:
        subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
        for module in (status, listing, release):
            module.register(subparsers)

    def handle(self, *args: Any, **options: Any) -> None:
        namespace = argparse.Namespace(**options)
        if namespace.url is None:
            namespace.url = getattr(settings, "FENCING_URL", None)
        code: int = options["func"](namespace)
        if code:
            # the command said why on stderr already
            raise CommandError(f"fencing {options['command']} failed", returncode=code)
