"""Issue 28 items 1 and 6: the README's first command (scripts/demo.sh) builds the muster
binary alone and says how long set-up and build took; it prints the two agent commands it
runs, copyable; its two agents share the one port of --rdzv-endpoint, and so do the same
two commands started by hand in either order (node rank 0 serves, decided, not raced).

The demo runs here as a user runs it, with its real set-up (scripts/setup.sh: nothing to
install on a machine the tests run on) and its real job, except that `cmake` on its PATH
only records how it was called: the tests' build (the repo's build/) is already complete,
and configuring it the demo's way would change its flags."""
import os
import re
import shlex
import subprocess

import pytest

from conftest import BUILD, REPO, muster_env, needs_torch, wait_for
from multinode import free_port

pytestmark = [
    needs_torch,
    pytest.mark.skipif(BUILD != REPO / "build", reason=(
        f"SKIPPED LOUDLY: scripts/demo.sh runs build/bin/muster of the repo, and this run "
        f"tests {BUILD}")),
]

RANK_LINE = re.compile(r"rank (\d)/4 \(local \d, restart 0, store ([\d.]+):(\d+)\): "
                       r"all_reduce = 10 OK")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("demo")
    fake_bin, calls = tmp / "bin", tmp / "cmake_calls"
    fake_bin.mkdir()
    (fake_bin / "cmake").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {calls}\n')
    (fake_bin / "cmake").chmod(0o755)
    port = free_port()
    env = muster_env(MUSTER_DEMO_PORT=port)
    env["PATH"] = f"{fake_bin}:{env['PATH']}"
    r = subprocess.run([str(REPO / "scripts" / "demo.sh")], capture_output=True, text=True,
                       timeout=300, env=env, cwd="/")
    return r, port, calls.read_text().splitlines() if calls.exists() else []


def _listening(port):
    """Whether a socket of this network namespace listens on TCP `port`."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def _commands(stdout):
    """The agent command lines the demo printed ("$ ... &"), as argv lists."""
    lines = [line[2:] for line in stdout.splitlines() if line.startswith("$ ")]
    assert lines and lines[0] == "export PYTHON_EXEC=/usr/bin/python3", stdout
    commands = [shlex.split(line) for line in lines[1:]]
    assert len(commands) == 2 and all(c[-1] == "&" for c in commands), stdout
    return [c[:-1] for c in commands]


def test_demo_builds_muster_alone_and_times_set_up_and_build(demo):
    r, _, calls = demo
    assert r.returncode == 0, r.stderr[-3000:]
    builds = [c for c in calls if c.startswith("--build ")]
    assert builds and all(c.endswith(" --target muster") for c in builds), calls
    assert re.search(r"^== set-up took \d+ s, build \(build/bin/muster alone\) \d+ s$",
                     r.stdout, re.M), r.stdout


def test_demo_prints_the_commands_it_runs_and_shares_one_port(demo):
    r, port, _ = demo
    assert r.returncode == 0, r.stderr[-3000:]
    assert "warning" not in r.stderr, r.stderr[-3000:]  # e.g. about the demo's MUSTER_DEMO_PORT
    commands = _commands(r.stdout)
    for node, argv in enumerate(commands):
        assert argv[:2] == ["build/bin/muster", "run"], argv
        flags = dict(zip(argv, argv[1:]))
        assert flags["--node-rank"] == str(node), argv
        assert flags["--rdzv-id"] == "demo", argv
        assert flags["--rdzv-endpoint"] == f"127.0.0.1:{port}", argv
    stores = {m.groups() for m in RANK_LINE.finditer(r.stdout)}
    assert {rank for rank, _, _ in stores} == {"0", "1", "2", "3"}, r.stdout
    assert {(addr, int(p)) for _, addr, p in stores} == {("127.0.0.1", port)}, r.stdout


def test_demo_commands_by_hand_node_rank_1_first_share_one_port(demo, tmp_path):
    """The printed commands, run by hand from the repo: node rank 1 first (on main it bound
    the port and node rank 0's store went to a second port); it waits for node rank 0."""
    r, port, _ = demo
    commands = _commands(r.stdout)
    env = muster_env(PYTHON_EXEC="/usr/bin/python3")
    logs = [tmp_path / f"node{n}.err" for n in (0, 1)]
    outs = [tmp_path / f"node{n}.out" for n in (0, 1)]

    def start(node):
        with open(outs[node], "w") as out, open(logs[node], "w") as err:
            return subprocess.Popen(commands[node], stdout=out, stderr=err, env=env, cwd=REPO)

    second = start(1)
    # Until node rank 1 has decided: it says it joins (or, on main, it took the port).
    wait_for(lambda: "is not served by this agent" in logs[1].read_text()
             or _listening(port), 30, what="node rank 1's start")
    first = start(0)
    for p, log in ((first, logs[0]), (second, logs[1])):
        p.wait(180)
        assert p.returncode == 0, log.read_text()[-3000:]
    text = outs[0].read_text() + outs[1].read_text()
    stores = {m.groups() for m in RANK_LINE.finditer(text)}
    assert {rank for rank, _, _ in stores} == {"0", "1", "2", "3"}, text
    assert {(addr, int(p)) for _, addr, p in stores} == {("127.0.0.1", port)}, text
    assert "node rank 0 serves" in logs[1].read_text(), logs[1].read_text()[-2000:]
