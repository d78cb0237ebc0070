"""Issue 17 item 1: `muster stacks` prints the Python stack of every rank on every node,
grouped by identical stack, with no change to the user's script (a sitecustomize hook that
chains to the user's own), and never harms a worker that has no hook."""
import json
import subprocess
import time

from conftest import MUSTER, REPO, fake, muster_env, pid_alive, wait_for
from multinode import Agents, wait_job_exists

SCRIPT = REPO / "tests" / "integration" / "scripts" / "stacks_worker.py"
# The user's own sitecustomize, which muster's hook must run, not shadow.
USER_SITECUSTOMIZE = """import os
open(os.path.join(os.environ["USER_SITE_MARKS"], str(os.getpid())), "w").close()
"""


def stacks(port, *extra):
    started = time.monotonic()
    r = subprocess.run([str(MUSTER), "stacks", "--rdzv-endpoint", f"127.0.0.1:{port}",
                        "--rdzv-id", "test", *extra], capture_output=True, text=True,
                       timeout=30, env=muster_env())
    return r, time.monotonic() - started


def test_stacks_group_the_ranks_in_all_reduce_and_name_the_sleeper(any_torch, tmp_path):
    ready, release, marks, usersite = (tmp_path / d for d in ("ready", "release", "marks", "us"))
    for d in (ready, marks, usersite):
        d.mkdir()
    (usersite / "sitecustomize.py").write_text(USER_SITECUSTOMIZE)
    agents = Agents(2, ["--nnodes", "2", "--nproc-per-node", "2", SCRIPT],
                    env=muster_env(PYTHON_EXEC=any_torch, READY=ready, RELEASE=release,
                                   USER_SITE_MARKS=marks, PYTHONPATH=usersite))
    try:
        pids = wait_for(lambda: len(list(ready.iterdir())) == 4 and
                        {int(p.name): int(p.read_text()) for p in ready.iterdir()},
                        60, 0.05, "4 ranks in place")
        # Each rank ran the user's sitecustomize too.
        assert {int(p.name) for p in marks.iterdir()} >= set(pids.values())

        def grouped():  # ranks 0-2 may still be on their way into all_reduce
            r, took = stacks(agents.port, "--json")
            assert r.returncode == 0, r.stderr
            doc = json.loads(r.stdout)
            return doc["groups"][0]["ranks"] == [0, 1, 2] and (doc, took)
        doc, took = wait_for(grouped, 20, 0.1, "ranks 0-2 grouped in all_reduce")
        print(f"muster stacks --json took {took:.3f}s ({doc['elapsed_s']:.3f}s in the call)")
        assert took < 2.0
        main, odd = doc["groups"][0], doc["groups"][1]
        assert main["frames"][0]["function"] == "all_reduce"
        assert any(f["function"] == "main" and f["file"] == str(SCRIPT) for f in main["frames"])
        assert odd["ranks"] == [3] and odd["frames"][0]["function"] == "stuck_here"
        by_rank = {r["rank"]: r for n in doc["nodes"] for r in n["ranks"]}
        assert {r: by_rank[r]["pid"] for r in by_rank} == pids

        r, took = stacks(agents.port)
        assert r.returncode == 0, r.stderr
        print(r.stdout)
        lines = r.stdout.splitlines()
        assert lines[0].startswith("job test: 4 ranks on 2 nodes, stacks in ")
        assert lines[1].startswith("ranks 0-2: all_reduce <- ")
        assert any(line.startswith("rank 3: stuck_here <- stacks_worker.py:") for line in lines)
        assert took < 2.0

        # Without --rdzv-endpoint: this host's two agents answer over their local sockets.
        r = subprocess.run([str(MUSTER), "stacks", "--rdzv-id", "test", "--json"],
                           capture_output=True, text=True, timeout=30, env=muster_env())
        assert r.returncode == 0, r.stderr
        # Other tests' agents of a job "test" may answer too (pytest -n): ours by pid.
        ours = {f"pid {p.pid}" for p in agents.procs}
        local = [n for n in json.loads(r.stdout)["nodes"] if n["node_id"] in ours]
        assert len(local) == 2
        text = {r["rank"]: r["text"] for n in local for r in n["ranks"]}
        assert sorted(text) == [0, 1, 2, 3]
        assert all("in all_reduce" in text[r] for r in (0, 1, 2)) and "stuck_here" in text[3]
    finally:
        release.touch()
    for rc, _, err in agents.wait(60):
        assert rc == 0, err[-3000:]  # the dumps cost the workers nothing


def test_workers_without_the_hook_are_named_and_left_alone(tmp_path):
    pids = tmp_path / "pids"
    agents = Agents(1, ["--nnodes", "1", "--nproc-per-node", "2",
                        *fake(f"ranks={pids}", "sleep=-1")])
    try:
        wait_job_exists(agents.port, "test")
        wait_for(lambda: pids.exists() and len(pids.read_text().splitlines()) == 2, 20, 0.02,
                 "2 workers")
        worker_pids = [int(line.split()[7]) for line in pids.read_text().splitlines()]
        r, took = stacks(agents.port)
        assert r.returncode == 0, r.stderr
        assert "ranks 0-1: not available: not a Python process" in r.stdout, r.stdout
        assert took < 2.0
        # The signal that would end a process without the hook was never sent.
        assert all(pid_alive(p) for p in worker_pids)
    finally:
        for p in agents.procs:
            p.terminate()
        agents.wait(30)


def test_stacks_usage_errors_exit_2():
    r = subprocess.run([str(MUSTER), "stacks", "--rdzv-endpoint", "127.0.0.1:1"],
                       capture_output=True, text=True, timeout=10, env=muster_env())
    assert r.returncode == 2 and "--rdzv-id" in r.stderr
    r = subprocess.run([str(MUSTER), "stacks", "--rdzv-endpoint", "127.0.0.1:1", "--rdzv-id",
                        "x", "--collect-timeout", "0"], capture_output=True, text=True,
                       timeout=10, env=muster_env())
    assert r.returncode == 2 and "--collect-timeout" in r.stderr
