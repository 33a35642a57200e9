"""``fencing demo``: Kleppmann's pause scenario with real processes and ``SIGSTOP``.

- ``command``: the ``fencing demo`` subcommand (arguments, output, exit code).
- ``run``: the scenario itself: two client processes, one frozen past its lease.
- ``models``: the SQL row both clients write (a ``FencedMixin`` model).
- ``plot``: draws the timeline (needs matplotlib, ``fencing[plot]``).
"""
