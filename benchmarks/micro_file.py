"""Where ``FileStore.write`` spends its time beyond a plain write + fsync + rename.

``python benchmarks/micro_file.py [--dir DIR]``: an isolated micro-benchmark, not part of
``run.py``. Each step adds one thing ``FileStore.write`` does to the plain replacement
of a 4 KiB file, interleaved in rounds, so the cost of each step is the difference
between two neighbouring rows:

1. write a temp file, fsync it, rename it over the target (the target's floor);
2. + fsync the directory after the rename (makes the rename itself durable);
3. + take an exclusive flock on a sidecar lock file (opened and closed each time);
4. + read the current token from the record's header before writing;
5. ``FileStore.write`` itself.

Imports fencing and the benchmark harness.
"""

from __future__ import annotations

import argparse
import fcntl
import itertools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from fencing import FileStore
from harness import Variant, fmt_ns, pin, run_rounds, timed

DATA = os.urandom(4096)


def steps(base: Path) -> list[tuple[str, Callable[[], None]]]:
    def writer(name: str, sync_dir: bool, lock: bool, read: bool) -> Callable[[], None]:
        path = base / name
        tmp = base / f".{name}.tmp"
        sidecar = base / f".{name}.lock"

        def write() -> None:
            fd = os.open(sidecar, os.O_RDWR | os.O_CREAT) if lock else -1
            try:
                if lock:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                if read:
                    try:
                        with open(path, "rb") as f:
                            f.read(28)
                    except FileNotFoundError:
                        pass
                with open(tmp, "wb") as f:
                    f.write(DATA)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
                if sync_dir:
                    dfd = os.open(base, os.O_RDONLY)
                    try:
                        os.fsync(dfd)
                    finally:
                        os.close(dfd)
            finally:
                if lock:
                    os.close(fd)

        return write

    store = FileStore(base / "store")
    tokens = itertools.count(1)
    return [
        ("1 write+fsync+rename", writer("a", False, False, False)),
        ("2 + fsync(dir)", writer("b", True, False, False)),
        ("3 + flock(sidecar)", writer("c", True, True, False)),
        ("4 + read header", writer("d", True, True, True)),
        ("5 FileStore.write", lambda: store.write(DATA, next(tokens))),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--cpu", default="none")
    args = parser.parse_args()
    print(pin(None if args.cpu == "none" else int(args.cpu)))
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="fencing-micro-") as tmp:
        variants = [Variant(name, timed(fn)) for name, fn in steps(Path(tmp))]
        stats = run_rounds(variants, rounds=args.rounds, per_round=20, warmup=10)
        floor = stats[variants[0].name].median
        print(f"4 KiB records in {tmp}")
        for v in variants:
            s = stats[v.name]
            print(
                f"{v.name:<26} median {fmt_ns(s.median):>9}  p99 {fmt_ns(s.p99):>9}"
                f"  {s.median / floor:5.2f}x"
            )


if __name__ == "__main__":
    main()
