"""The chaos run: real worker processes, SIGSTOP pauses, a Redis restart, and a checker.

- ``resources``: the guarded resources a worker read-modify-writes (FileStore, a SQL row
  on SQLite and PostgreSQL, a callable guarded by a FileMark), fenced or not.
- ``worker``: one process's loop: acquire, read-modify-write each resource, release;
  every attempt and its outcome appended to the worker's own log file.
- ``runner``: starts the workers and the servers, freezes and resumes workers, restarts
  Redis once, collects the logs and the final states, and asks the checker.
- ``checker``: replays the logs and final states and checks the invariants. It shares
  no code with the guards (it imports nothing from ``fencing``).

``fencing chaos`` (``command``) runs it from the command line.
"""
