"""``manage.py fencing status|list|release --force``: the ``fencing`` command line's own
operator commands (``fencing.cli.status``, ``listing``, ``release``), the same
arguments, output and exit codes, on the leases of ``fencing.django.fence`` in
Django's database ``--database ALIAS``, or else on the issuer of ``--url``, else of the
project's ``FENCING_URL`` setting (then ``$FENCING_URL``, then the embedded SQLite
file).

A command-line entry point kept where Django looks for commands; the import contracts
(pyproject.toml) let it, and only it, import ``fencing.cli``.
"""

from __future__ import annotations

import argparse
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db.utils import ConnectionDoesNotExist

from fencing.cli import listing, release, status
from fencing.cli._operate import USAGE, Opened

from ..._issuer import issuer


class Command(BaseCommand):
    help = (
        "Inspect and operate fences: status NAME..., list [--prefix P], "
        "release --force NAME (as the `fencing` command line); --database ALIAS for "
        "the fences of fencing.django.fence on that Django database."
    )

    def add_arguments(self, parser: Any) -> None:
        subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
        for module in (status, listing, release):
            module.register(subparsers)
        for command in subparsers.choices.values():
            command.add_argument(
                "--database",
                metavar="ALIAS",
                help="the fences of fencing.django.fence on this Django database "
                "(its fencing_leases table) instead of an issuer's URL",
            )

    def handle(self, *args: Any, **options: Any) -> None:
        namespace = argparse.Namespace(**options)
        alias = options["database"]
        if alias is not None:
            if namespace.url is not None:
                raise CommandError("--database and --url exclude each other", returncode=USAGE)
            try:
                namespace.backend = Opened(issuer(alias), f"Django's database {alias!r}")
            except (ConnectionDoesNotExist, ValueError) as exc:
                raise CommandError(str(exc), returncode=USAGE) from exc
        elif namespace.url is None:
            namespace.url = getattr(settings, "FENCING_URL", None)
        code: int = options["func"](namespace)
        if code:
            # the command said why on stderr already
            raise CommandError(f"fencing {options['command']} failed", returncode=code)
