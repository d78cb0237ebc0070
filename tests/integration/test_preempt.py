"""Issue 17 item 4: a preemption notice with a checkpoint (docs/guides/preemption.md).

SIGTERM to one agent, a --preempt-file appearing or `muster drain` make the job tell every
agent before anything is stopped; every rank gets SIGUSR1 and a MUSTER_PREEMPTED file, may
finish its step and save, and the job goes on as with a lost node: an elastic job re-forms
without the node, a fixed-size one ends with 143 and its re-run resumes. The step log of
the real torch (gloo) workers shows that no step was lost and none repeated."""
import json
import signal
import subprocess
import sys
import time
from collections import defaultdict

from conftest import MUSTER, REPO, muster_env, run_muster, wait_for
from multinode import Agents, wait_job_exists

SCRIPT = REPO / "tests" / "integration" / "scripts" / "preempt_worker.py"


def ranked(i):
    """Node rank i; node 0 serves the rendezvous (a node that serves it takes the job's
    server with it when it goes: the preempted node is never that one here)."""
    return ["--node-rank", i, "--rdzv-host", "true" if i == 0 else "false"]


def steps_by_attempt(log):
    """{(attempt, world): {rank: [steps...]}} from the workers' step log."""
    out = defaultdict(lambda: defaultdict(list))
    for line in log.read_text().splitlines():
        attempt, world, rank, step = map(int, line.split())
        out[(attempt, world)][rank].append(step)
    return out


def saved_steps(ckpt):
    return {p.name: json.loads(p.read_text())["step"] for p in ckpt.glob("rank*.json")}


def assert_resumed(ckpt, before, after, ranks_before, ranks_after):
    """Every rank of the first run (`before`: {rank: steps}) did steps 0..S, S being the step
    all of them saved, every rank of the second one S+1..S+5: none lost, none repeated."""
    saved = saved_steps(ckpt)
    assert len(saved) == ranks_before and len(set(saved.values())) == 1, saved
    s = next(iter(saved.values()))
    assert sorted(before) == list(range(ranks_before)), dict(before)
    for rank, steps in before.items():
        assert steps == list(range(s + 1)), (rank, steps)
    assert sorted(after) == list(range(ranks_after)), dict(after)
    for rank, steps in after.items():
        assert steps == list(range(s + 1, s + 6)), (rank, steps)
    return s


def assert_elastic_sigterm_outcome(results, log, ckpt):
    """Elastic 1:2 x 2 ranks after SIGTERM to agent B: B exits 143 and A 0, both say why,
    all 4 ranks saved the same step S and the 2 left resumed at S+1 (attempt 0: a membership
    change). Any rendezvous backend. `results`: [(rc, out, err)] of A and B."""
    (rc_a, out_a, err_a), (rc_b, out_b, err_b) = results
    assert rc_b == 143, err_b[-3000:]
    assert "this node is being preempted (agent received SIGTERM)" in err_b, err_b[-3000:]
    assert rc_a == 0, err_a[-3000:]
    assert "is being preempted (agent received SIGTERM)" in err_a, err_a[-3000:]
    by = steps_by_attempt(log)
    assert set(by) == {(0, 4), (0, 2)}, dict(by)
    s = assert_resumed(ckpt, by[(0, 4)], by[(0, 2)], ranks_before=4, ranks_after=2)
    print(f"all 4 ranks saved step {s}; the 2 ranks left resumed at {s + 1}")
    return results


def wait_steps(log, n):
    wait_for(lambda: log.exists() and len(log.read_text().splitlines()) >= n, 60, 0.05,
             f"{n} steps logged")


def torch_env(tmp_path, **extra):
    ckpt, log = tmp_path / "ckpt", tmp_path / "steps.log"
    ckpt.mkdir()
    return ckpt, log, muster_env(CKPT_DIR=ckpt, STEP_LOG=log, **extra)


def test_sigterm_to_one_agent_every_rank_saves_the_same_step_and_the_job_resumes(tmp_path):
    """Elastic 1:2 nodes x 2 ranks: SIGTERM to node B; all 4 ranks save step S; B exits 143,
    A re-forms alone (attempt 0 again: a membership change) and resumes at S+1."""
    ckpt, log, env = torch_env(tmp_path)
    agents = Agents(2, ["--nnodes", "1:2", "--nproc-per-node", "2", "--preempt-grace", "15s",
                        SCRIPT], per_agent=ranked, env=env)
    wait_steps(log, 4 * 3)
    agents.procs[1].send_signal(signal.SIGTERM)
    (_, out_a, err_a), (_, out_b, err_b) = assert_elastic_sigterm_outcome(agents.wait(60), log,
                                                                          ckpt)
    assert "preempted (agent received SIGTERM), saved step" in out_a + err_a + out_b + err_b


def test_drain_fixed_size_job_ends_143_shows_preempting_and_a_rerun_resumes(tmp_path):
    """2 x 2 ranks, `muster drain --node ID`: the job shows Preempting with the node and reason
    while the ranks save (they wait for SAVE_GATE), every agent exits 143, and the re-run
    resumes."""
    gate = tmp_path / "save-gate"
    ckpt, log, env = torch_env(tmp_path, SAVE_GATE=gate)
    common = ["--nnodes", "2", "--nproc-per-node", "2", SCRIPT]
    agents = Agents(2, common, per_agent=ranked, env=env)
    wait_steps(log, 4 * 2)

    def status():
        r = subprocess.run([str(MUSTER), "status", "--rdzv-endpoint", f"127.0.0.1:{agents.port}",
                            "--rdzv-id", "test", "--json"], capture_output=True, text=True,
                           timeout=20, env=muster_env())
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)
    node = next(n for n in status()["nodes"] if n["group_rank"] == 1)
    r = subprocess.run([str(MUSTER), "drain", "--rdzv-endpoint", f"127.0.0.1:{agents.port}",
                        "--rdzv-id", "test", "--node", node["node_id"], "--reason",
                        "maintenance"], capture_output=True, text=True, timeout=20,
                       env=muster_env())
    assert r.returncode == 0, r.stderr
    assert f"node {node['node_id']}" in r.stdout and "maintenance" in r.stdout
    doc = status()
    assert doc["phase"] == "Preempting", doc["phase"]
    assert doc["preempting"][0]["node_id"] == node["node_id"]
    assert doc["preempting"][0]["reason"] == "maintenance"
    gate.touch()
    for rc, _, err in agents.wait(60):
        assert rc == 143, err[-3000:]
    before = steps_by_attempt(log)
    rerun_log = tmp_path / "rerun.log"
    rerun = Agents(2, common, per_agent=ranked, env={**env, "STEP_LOG": str(rerun_log)})
    for rc, _, err in rerun.wait(90):
        assert rc == 0, err[-3000:]
    after = steps_by_attempt(rerun_log)
    assert set(before) == {(0, 4)} and set(after) == {(0, 4)}, (dict(before), dict(after))
    assert_resumed(ckpt, before[(0, 4)], after[(0, 4)], ranks_before=4, ranks_after=4)


def test_drain_refusals_are_clear(tmp_path):
    """Bad input names the flag (2); an unknown node is the server's refusal (1)."""
    agents = Agents(1, ["--nnodes", "1", "--no-python", "sleep", "30"])
    try:
        wait_job_exists(agents.port, "test")
        base = [str(MUSTER), "drain", "--rdzv-endpoint", f"127.0.0.1:{agents.port}",
                "--rdzv-id", "test"]
        r = subprocess.run(base, capture_output=True, text=True, timeout=20, env=muster_env())
        assert r.returncode == 2 and "--node/--host" in r.stderr, r.stderr
        r = subprocess.run(base + ["--node", "nope"], capture_output=True, text=True, timeout=20,
                           env=muster_env())
        assert r.returncode == 1 and "has no live node nope" in r.stderr, r.stderr
    finally:
        agents.procs[0].send_signal(signal.SIGTERM)
        assert agents.wait(20)[0][0] == 143


def test_preempt_file_appearing_preempts_a_single_node_job(tmp_path):
    """One node, 2 ranks, --standalone: a file written at --preempt-file (inotify, no polling)
    gives every rank the notice with the file's first line; both save and the agent exits
    143; a re-run resumes."""
    notices = tmp_path / "notices"
    notices.mkdir()
    ckpt, log, env = torch_env(tmp_path)
    args = ["--standalone", "--nproc-per-node", "2", "--preempt-file", notices / "spot",
            SCRIPT]
    agent = subprocess.Popen([str(MUSTER), "run", *map(str, args)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    wait_steps(log, 2 * 3)
    (notices / "spot.tmp").write_text("instance-action: terminate\n")
    (notices / "spot.tmp").rename(notices / "spot")
    out, err = agent.communicate(timeout=60)
    assert agent.returncode == 143, err[-3000:]
    assert "preempted (preempt file: instance-action: terminate)" in err, err[-3000:]
    assert "rank 0: preempted (preempt file: instance-action: terminate)" in out + err
    (notices / "spot").unlink()
    rerun_log = tmp_path / "rerun.log"
    r = run_muster(args, env={**env, "STEP_LOG": str(rerun_log)}, timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    before, after = steps_by_attempt(log), steps_by_attempt(rerun_log)
    assert set(before) == {(0, 2)} and set(after) == {(0, 2)}, (dict(before), dict(after))
    assert_resumed(ckpt, before[(0, 2)], after[(0, 2)], ranks_before=2, ranks_after=2)


# A worker that catches SIGUSR1 and records it, and may ignore the notice and SIGTERM.
STUBBORN = """
import os, signal, sys, time
mark = os.environ["MARK"] + "." + os.environ["LOCAL_RANK"]
def on_usr1(s, f):
    with open(mark, "w") as out:
        out.write(open(os.environ["MUSTER_PREEMPTED"]).read())
signal.signal(signal.SIGUSR1, on_usr1)
if os.environ.get("IGNORE_TERM") == "1":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(mark + ".ready", "w").close()
while True:
    time.sleep(1)
"""


def run_stubborn(tmp_path, grace, shutdown, ignore_term):
    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN)
    mark, status = tmp_path / "mark", tmp_path / "status.json"
    env = muster_env(MARK=mark, IGNORE_TERM="1" if ignore_term else "0",
                     PYTHON_EXEC=sys.executable)
    agent = subprocess.Popen([str(MUSTER), "run", "--nproc-per-node", "2", "--preempt-grace",
                              grace, "--shutdown-timeout", shutdown, "--status-file", status,
                              script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    wait_for(lambda: all((tmp_path / f"mark.{r}.ready").exists() for r in (0, 1)), 20, 0.02,
             "2 workers ready")
    t0 = time.monotonic()
    agent.send_signal(signal.SIGTERM)
    wait_for(lambda: json.loads(status.read_text())["phase"] == "Preempting", 5, 0.01,
             "status file Preempting")
    doc = json.loads(status.read_text())
    assert doc["preempting"]["reason"] == "agent received SIGTERM" and doc["preempting"]["self"]
    out, err = agent.communicate(timeout=30)
    elapsed = time.monotonic() - t0
    assert agent.returncode == 143, err[-3000:]
    for r in (0, 1):  # SIGUSR1 came after the file was written
        assert (tmp_path / f"mark.{r}").read_text() == "agent received SIGTERM\n"
    return elapsed, err


def test_single_node_sigterm_delivers_sigusr1_and_stops_a_deaf_worker_after_the_grace(tmp_path):
    elapsed, err = run_stubborn(tmp_path, "1500ms", "10s", ignore_term=False)
    assert 1.5 <= elapsed < 3.0, f"the grace is 1.5 s, the agent took {elapsed:.3f}s"
    assert "the preempt grace of 1.5s is over" in err or "preempt grace of" in err, err[-2000:]


def test_the_notice_counts_against_the_sigterm_grace(tmp_path):
    """A worker that ignores the notice and SIGTERM is killed --shutdown-timeout after the
    SIGTERM, not after the grace plus the timeout."""
    elapsed, err = run_stubborn(tmp_path, "1s", "2s", ignore_term=True)
    assert 2.0 <= elapsed < 2.9, f"SIGKILL due 2 s after SIGTERM, the agent took {elapsed:.3f}s"
    assert "SIGKILL" in err, err[-2000:]
