"""``manage.py fencing status|list|release --force``: the ``fencing`` command line's own
operator commands (``fencing.cli.status``, ``listing``, ``release``), the same
arguments, output and exit codes, on the leases of ``fencing.django.fence``: in
Django's ``default`` database (the one ``fence`` uses), or ``--database ALIAS``; or on
the issuer of ``--url``, else of the project's ``FENCING_URL`` setting when it has one.

The commands print to ``sys.stdout`` and ``sys.stderr``; here those are this command's
``self.stdout`` and ``self.stderr`` while it runs, so ``call_command("fencing", ...,
stdout=buffer)`` captures what it says, as with every Django command.

A command-line entry point kept where Django looks for commands; the import contracts
(pyproject.toml) let it, and only it, import ``fencing.cli``.
"""

from __future__ import annotations

import argparse
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, OutputWrapper
from django.db import DEFAULT_DB_ALIAS
from django.db.utils import ConnectionDoesNotExist

from fencing.cli import listing, release, status
from fencing.cli._operate import USAGE, Opened

from ..._issuer import issuer


class _Stream:
    """A text stream that writes through a command's ``OutputWrapper`` as given:
    ``print`` writes a line and its end in two calls, and the wrapper would add an end
    of its own to the first."""

    def __init__(self, wrapper: OutputWrapper) -> None:
        self._wrapper = wrapper

    def write(self, text: str) -> int:
        self._wrapper.write(text, ending="")
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty...
        return getattr(self._wrapper, name)


class Command(BaseCommand):
    help = (
        "Inspect and operate fences: status NAME..., list [--prefix P], "
        "release --force NAME (as the `fencing` command line), on the fences of "
        "fencing.django.fence in Django's default database, or --database ALIAS; "
        "--url (or the FENCING_URL setting) for another issuer's."
    )

    def add_arguments(self, parser: Any) -> None:
        subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
        for module in (status, listing, release):
            module.register(subparsers)
        for command in subparsers.choices.values():
            command.add_argument(
                "--database",
                metavar="ALIAS",
                help="the fences of fencing.django.fence on this Django database (its "
                f"fencing_leases table; default: {DEFAULT_DB_ALIAS!r}, unless --url or "
                "the FENCING_URL setting names another issuer)",
            )

    def handle(self, *args: Any, **options: Any) -> None:
        namespace = argparse.Namespace(**options)
        alias = options["database"]
        if alias is not None and namespace.url is not None:
            raise CommandError("--database and --url exclude each other", returncode=USAGE)
        if alias is None and namespace.url is None:
            namespace.url = getattr(settings, "FENCING_URL", None)
            if namespace.url is None:
                alias = DEFAULT_DB_ALIAS  # fencing.django.fence's own
        if alias is not None:
            try:
                namespace.backend = Opened(issuer(alias), f"Django's database {alias!r}")
            except (ConnectionDoesNotExist, ValueError) as exc:
                raise CommandError(str(exc), returncode=USAGE) from exc
        with redirect_stdout(_Stream(self.stdout)), redirect_stderr(_Stream(self.stderr)):
            code: int = options["func"](namespace)
        if code:
            # the command said why on stderr already
            raise CommandError(f"fencing {options['command']} failed", returncode=code)
