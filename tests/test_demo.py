"""``fencing demo``: real processes, a real SIGSTOP, and the stale write refused."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fencing.testing.servers import RedisServer

#: The other runs use a shorter lease than the default (1 s) that the first run shows:
#: the same timeline, half a second sooner (client 2 waits for the lease, however late).
SHORT = ("--ttl", "0.5")


def demo(*args: str, state: Path) -> tuple[int, str]:
    """Run ``fencing demo`` as a user would, with its embedded database under ``state``."""
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    env.pop("FENCING_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "fencing.cli", "demo", *args],
        capture_output=True,
        text=True,
        timeout=120,  # past the demo's own deadlines (60 s): its error says what it saw
        env=env,
        check=False,
    )
    return result.returncode, result.stdout + result.stderr


def tokens(output: str) -> tuple[int, int]:
    """The tokens clients 1 and 2 acquired; the second must be the higher."""
    found = [
        int(re.search(rf"client {n}  acquires the lease: token (\d+)", output).group(1))  # type: ignore[union-attr]
        for n in (1, 2)
    ]
    assert found[0] < found[1], output
    return found[0], found[1]


def test_demo_without_arguments_needs_no_server(tmp_path: Path) -> None:
    code, output = demo(state=tmp_path)
    print(output)
    assert code == 0, output
    assert f"issued by sqlite:///{tmp_path}/fencing/fencing.db" in output
    lines = output.splitlines()
    first, second = tokens(output)
    order = [
        f"client 1  acquires the lease: token {first}",
        "demo      SIGSTOP client 1",
        "demo      client 1's lease expires",
        f"client 2  acquires the lease: token {second}",
        f"client 2  writes with token {second}: accepted",
        "demo      SIGCONT client 1",
        f"client 1  writes with token {first}: REJECTED, token {second} was already accepted",
    ]
    positions = [next(i for i, line in enumerate(lines) if step in line) for step in order]
    assert positions == sorted(positions)
    assert (
        f"the row holds: 'created; client 2 wrote with token {second}' (fence_token {second})"
        in output
    )
    assert "fencing worked" in output


def test_demo_unfenced_shows_the_lost_update(tmp_path: Path) -> None:
    """Also ``--plot`` to an SVG file (the PNG is test_demo_on_redis's: a plot is
    drawn by any run, so each format rides on a run made anyway)."""
    picture = tmp_path / "timeline.svg"
    code, output = demo("--unfenced", "--plot", str(picture), *SHORT, state=tmp_path)
    assert code == 0, output
    assert f"timeline picture written to {picture}" in output
    data = picture.read_bytes()
    assert b"<svg" in data and b"SIGSTOP" in data and b"LOST UPDATE" in data
    first, second = tokens(output)
    assert f"client 1  writes with token {first}: accepted OVER token {second}" in output
    assert "<-- LOST UPDATE" in output
    assert (
        f"the row holds: 'created; client 1 wrote with token {first}' (fence_token {first})"
        in output
    )


def test_demo_on_redis(redis_server: RedisServer, tmp_path: Path) -> None:
    """Also ``--plot`` to a PNG file."""
    picture = tmp_path / "timeline.png"
    code, output = demo("--url", redis_server.url, "--plot", str(picture), *SHORT, state=tmp_path)
    assert code == 0, output
    assert f"issued by {redis_server.url}" in output
    assert "REJECTED" in output and "fencing worked" in output
    assert not (tmp_path / "fencing").exists()  # the embedded default was not touched
    assert f"timeline picture written to {picture}" in output
    data = picture.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 10_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--plot", "timeline.txt"], "must end in .png or .svg"),
        (["--ttl", "0"], "--ttl must be between"),
        (["--url", "ftp://nowhere"], "unknown fencing URL scheme"),
    ],
)
def test_demo_refuses_bad_arguments(tmp_path: Path, args: list[str], message: str) -> None:
    code, output = demo(*args, state=tmp_path)
    assert code != 0 and message in output


def test_demo_over_http(tmp_path: Path) -> None:
    """The same pause across a real HTTP call: the service refuses client 1's write."""
    code, output = demo("--http", *SHORT, state=tmp_path)
    assert code == 0, output
    first, second = tokens(output)
    assert "storage: one item of an HTTP service (PUT /note, uvicorn); fenced" in output
    assert (
        f"client 1  writes with token {first}: REJECTED, token {second} was already accepted"
        in output
    )
    assert (
        f"the service holds: 'created; client 2 wrote with token {second}' "
        f"(fence_token {second})" in output
    )


def test_demo_over_http_unfenced_shows_the_lost_update(tmp_path: Path) -> None:
    code, output = demo("--http", "--unfenced", *SHORT, state=tmp_path)
    assert code == 0, output
    first, _ = tokens(output)
    assert "<-- LOST UPDATE" in output
    assert (
        f"the service holds: 'created; client 1 wrote with token {first}' (fence_token {first})"
        in output
    )


def test_demo_election_refuses_the_frozen_leaders_write(tmp_path: Path) -> None:
    """Three candidates on the embedded default; the leader frozen past its term."""
    code, output = demo("--election", *SHORT, state=tmp_path)
    assert code == 0, output
    assert f"issued by sqlite:///{tmp_path}/fencing/fencing.db" in output
    old = int(re.search(r"candidate 1  is elected leader: term (\d+)", output).group(1))  # type: ignore[union-attr]
    # the new leader is the one of the others that wrote: the first elected (a later one,
    # elected only if that one's term ran out on a loaded machine, resigns unwritten)
    found = re.search(r"(candidate [23])  writes its last run with term (\d+): accepted", output)
    assert found is not None, output
    new_leader, new = found.group(1), int(found.group(2))
    assert new > old
    lines = output.splitlines()
    # each sequence's lines come in causal order from one printer or through one another's
    # effects; lines of the demo and of the candidates may interleave either way (the demo
    # prints "SIGSTOP" after sending it, while the others run on)
    for order in (
        [
            f"candidate 1  is elected leader: term {old}",
            f"{new_leader}  is elected leader: term {new}",
            f"{new_leader}  writes its last run with term {new}: accepted",
            f"candidate 1  writes its last run with term {old}: REJECTED, term {new} was already",
        ],
        ["demo         SIGSTOP candidate 1", "demo         SIGCONT candidate 1"],
    ):
        at = [next(i for i, line in enumerate(lines) if step in line) for step in order]
        assert at == sorted(at), output
    # another process asks leader() once one of the others is elected, in any order with
    # that one's own lines (two processes print them). Never candidate 1's old term; the
    # new leader's if it was elected first and kept its term. On a loaded machine a renewer
    # may stall past its term: then nobody leads for a moment, or (on_lost says so) another
    elected = next(i for i, line in enumerate(lines) if re.search("candidate [23]  is elec", line))
    asked = "election.leader() from another process: "
    shown = next(line for line in lines[elected:] if asked in line).split(asked)[1]
    assert re.fullmatch(r"nobody|candidate-[23], term \d+", shown), output
    first = f"{new_leader}  is elected" in lines[elected]
    kept = f"{new_leader}  on_lost: its term {new} is over" not in output
    current = f"{new_leader.replace(' ', '-')}, term {new}"
    assert shown in (current, "nobody") or not (first and kept), output
    assert f"candidate 1  on_lost: its term {old} is over" in output
    assert f"the row holds: 'last run by {new_leader} in term {new}' (fence_token {new})" in output
    assert "fencing worked" in output


def test_demo_election_takes_only_url_and_ttl(tmp_path: Path) -> None:
    code, output = demo("--election", "--unfenced", state=tmp_path)
    assert code == 2 and "--election takes only --url and --ttl" in output
