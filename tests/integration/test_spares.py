"""Issue 30 item 2: hot spares for fixed-size jobs (docs/guides/spares.md).

An agent beyond --nnodes N joins as a spare: it holds no rank, `muster status` and the
server's metrics list it as Spare, its workers do not start. When a rank-holding agent is
SIGKILLed, or its health gate keeps it out after a failed round, the next round runs with the
spare and WORLD_SIZE unchanged; an agent beyond N + --spares is refused. A spare whose
check fails while it waits (--spare-check-interval) is Excluded and not taken. Both
rendezvous backends. Each worker notes
"ROLE WORLD_SIZE GROUP_RANK RESTART_COUNT" (--role names the agent) and exits 0 once `done`
exists, or 1 once `fail` exists in its first attempt."""
import json
import fcntl
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import BUILD, MUSTER, muster_env, wait_for
from etcd_cluster import ETCD, EtcdCluster
from multinode import free_port


def worker(tmp_path):
    log, done, fail = tmp_path / "rounds", tmp_path / "done", tmp_path / "fail"
    script = (f'echo "$ROLE_NAME $WORLD_SIZE $GROUP_RANK $TORCHELASTIC_RESTART_COUNT" >> {log}; '
              f'while [ ! -e {done} ]; do '
              f'if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ -e {fail} ]; then exit 1; fi; '
              'sleep 0.05; done')
    return log, done, fail, ["--no-python", "/bin/sh", "-c", script]


def rounds(log):
    return log.read_text().splitlines() if log.exists() else []


def status_json(backend_args):
    r = subprocess.run([str(MUSTER), "status", *backend_args, "--rdzv-id", "test", "--json"],
                       capture_output=True, text=True, timeout=30, env=muster_env())
    return json.loads(r.stdout) if r.returncode == 0 else None


def states(backend_args):
    s = status_json(backend_args) or {}
    return sorted(n["state"] for n in s.get("nodes", []))


def read_stderr_so_far(proc):
    """What the agent wrote on stderr so far (kept, so a later communicate() sees it all)."""
    fd = proc.stderr.fileno()
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    try:
        chunk = os.read(fd, 1 << 20)
    except BlockingIOError:
        chunk = b""
    proc.seen = getattr(proc, "seen", b"") + chunk
    return proc.seen


def server_metric(port, line):
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    except urllib.error.URLError:
        return False
    return line in text.decode().splitlines()


class Job:
    """Agents of one job, started one by one (`start`), each with its --role."""

    def __init__(self, backend_args, common):
        self.backend_args, self.common, self.procs = backend_args, common, {}

    def start(self, role, *extra, env=None):
        self.procs[role] = subprocess.Popen(
            [str(MUSTER), "run", *self.backend_args, "--rdzv-id", "test", "--role", role,
             *map(str, extra), *map(str, self.common)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or muster_env())

    def wait(self, role, timeout=60):
        out, err = self.procs[role].communicate(timeout=timeout)
        return self.procs[role].returncode, err

    def kill_all(self):
        for role, p in self.procs.items():
            if p.poll() is None:
                p.kill()
            if p.stderr and not p.stderr.closed:
                print(f"--- {role} (exit {p.wait()}) stderr:\n{p.communicate()[1][-2000:]}")


def start_two_and_a_spare(job, log, first=(), second=(), spare=(), spare_env=None):
    job.start("node0", *first)
    if job.backend_args[1] == "etcd":
        time.sleep(1)  # node0 coordinates: its key is the oldest
    job.start("node1", *second)
    wait_for(lambda: len(rounds(log)) == 2, 30, 0.05, "round 1 on node0 and node1")
    job.start("spare", *spare, env=spare_env)
    wait_for(lambda: states(job.backend_args) == ["Running", "Running", "Spare"], 30, 0.1,
             "the third agent listed as Spare")
    assert sorted(rounds(log)) == ["node0 2 0 0", "node1 2 1 0"], rounds(log)


def assert_spare_replaces_a_killed_node(job, log, done):
    job.procs["node1"].send_signal(signal.SIGKILL)
    t0 = time.monotonic()
    wait_for(lambda: len(rounds(log)) == 4, 60, 0.02, "round 2 with the spare")
    print(f"SIGKILL -> the spare's worker running in {time.monotonic() - t0:.2f} s")
    # WORLD_SIZE unchanged, the survivor keeps group rank 0, the spare takes 1, and the loss
    # counted no restart (--max-restarts 0).
    assert sorted(rounds(log)[2:]) == ["node0 2 0 0", "spare 2 1 0"], rounds(log)
    done.touch()
    for role in ("node0", "spare"):
        rc, err = job.wait(role)
        assert rc == 0, f"{role}: {err[-3000:]}"
    assert "spare: round 1 runs with its maximum of 2 nodes" in err, err[-3000:]


def test_grpc_a_spare_takes_a_killed_nodes_place_with_world_size_unchanged(tmp_path):
    log, done, _, cmd = worker(tmp_path)
    port, metrics_port, spare_metrics = free_port(), free_port(), free_port()
    job = Job(["--rdzv-endpoint", f"127.0.0.1:{port}"],
              ["--nnodes", "2", "--spares", "1", "--nproc-per-node", "1", "--max-restarts", "0",
               "--rdzv-conf", "join_timeout=60s", *cmd])
    try:
        # node0's agent hosts the server (node rank 0 serves); the spare gives no node rank.
        start_two_and_a_spare(job, log, first=["--node-rank", "0", "--metrics-port", metrics_port],
                              second=["--node-rank", "1"],
                              spare=["--metrics-port", spare_metrics])
        assert server_metric(metrics_port, 'muster_server_nodes{state="Spare"} 1')
        # The spare's own agent says so too (agent/health/spare_phase.h).
        wait_for(lambda: server_metric(spare_metrics, 'muster_agent_phase{phase="Spare"} 1'),
                 10, 0.05, 'the spare agent\'s muster_agent_phase{phase="Spare"} 1')
        # One more than --spares 1 is refused at its join: a configuration error (exit 2).
        job.start("extra")
        rc, err = job.wait("extra", timeout=30)
        assert rc == 2 and "is one too many: raise --spares" in err, (rc, err[-3000:])
        assert_spare_replaces_a_killed_node(job, log, done)
    finally:
        job.kill_all()


@pytest.mark.skipif(not os.path.exists(ETCD),
                    reason="etcd-server is not installed (scripts/setup.sh)")
def test_etcd_a_spare_takes_a_killed_nodes_place_with_world_size_unchanged(tmp_path):
    log, done, _, cmd = worker(tmp_path)
    etcd = EtcdCluster(1)
    job = Job(["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints],
              ["--nnodes", "2", "--spares", "1", "--nproc-per-node", "1", "--max-restarts", "0",
               "--rdzv-conf", "heartbeat_interval=1s,heartbeat_misses=2,join_timeout=60s", *cmd])
    try:
        start_two_and_a_spare(job, log)
        assert_spare_replaces_a_killed_node(job, log, done)
    finally:
        job.kill_all()
        etcd.stop()


def test_a_spare_takes_the_place_of_a_node_its_health_gate_keeps_out(tmp_path):
    """node1 turns sick, then the round fails (the restart counts as any failure's): its gate
    keeps it out before its stop report, and round 2 runs with the spare."""
    log, done, fail, cmd = worker(tmp_path)
    marker = tmp_path / "sick"
    port = free_port()
    sick = f'if [ -e {marker} ]; then echo "marker present"; exit 1; fi'
    job = Job(["--rdzv-endpoint", f"127.0.0.1:{port}"],
              ["--nnodes", "2", "--spares", "1", "--nproc-per-node", "1", "--max-restarts", "1",
               "--rdzv-conf", "join_timeout=60s", *cmd])
    try:
        start_two_and_a_spare(job, log, first=["--node-rank", "0"],
                              second=["--node-rank", "1", "--health-check", sick])
        marker.touch()
        fail.touch()
        wait_for(lambda: len(rounds(log)) == 4, 60, 0.02, "round 2 with the spare")
        assert sorted(rounds(log)[2:]) == ["node0 2 0 1", "spare 2 1 1"], rounds(log)
        status = wait_for(lambda: (s := status_json(job.backend_args)) and
                          any(n["state"] == "Excluded" for n in s["nodes"]) and s, 30, 0.1,
                          "node1 listed as Excluded")
        [excluded] = [n for n in status["nodes"] if n["state"] == "Excluded"]
        assert "marker present" in excluded["excluded"], excluded
        assert status["restarts_used"] == 1, status  # the failure's restart, none for the swap
        done.touch()
        for role in ("node0", "spare"):
            rc, err = job.wait(role)
            assert rc == 0, f"{role}: {err[-3000:]}"
    finally:
        job.kill_all()


def assert_a_spare_that_turns_sick_is_not_taken(job, log, marker, spare_events):
    """The spare's check fails while it waits (its --health-check runs every
    --spare-check-interval): it is listed Excluded; passing again it is a spare again; sick
    once more when node1 is killed, no round takes it: node0's job times out as a job
    without a spare would end, with 138, and names the sick spare."""
    marker.touch()
    status = wait_for(lambda: (s := status_json(job.backend_args)) and
                      sorted(n["state"] for n in s["nodes"]) == ["Excluded", "Running", "Running"]
                      and s, 30, 0.1, "the spare listed as Excluded while it waits")
    [sick] = [n for n in status["nodes"] if n["state"] == "Excluded"]
    assert "--health-check exit 1: marker present" in sick["excluded"], sick
    wait_for(lambda: b"the spare failed its check while it waited: --health-check exit 1: "
             b"marker present" in read_stderr_so_far(job.procs["spare"]), 10, 0.05,
             "the spare's log naming the failed check")
    marker.unlink()
    wait_for(lambda: states(job.backend_args) == ["Running", "Running", "Spare"], 30, 0.1,
             "the spare listed as Spare again once its check passes")
    def checks():
        return [json.loads(line) for line in spare_events.read_text().splitlines()
                if '"health_check"' in line]
    # The join's check, then the spare's: the one that failed went onto the backoff (1 s).
    assert checks()[0]["healthy"] and not checks()[0].get("spare"), checks()
    [failed] = [c for c in checks() if c.get("spare") and not c["healthy"]]
    assert failed["next_check_s"] == 1, checks()
    # A spare again, it is checked every --spare-check-interval.
    wait_for(lambda: checks()[-1].get("spare") and checks()[-1]["healthy"], 10, 0.05,
             "a passing check of the spare again")
    assert checks()[-1]["next_check_s"] == 0.3, checks()
    marker.touch()
    wait_for(lambda: states(job.backend_args) == ["Excluded", "Running", "Running"], 30, 0.1,
             "the spare listed as Excluded again")
    job.procs["node1"].send_signal(signal.SIGKILL)
    wait_for(lambda: states(job.backend_args) == ["Excluded", "Waiting"], 30, 0.1,
             "node0 waiting for a healthy node, the spare still Excluded")
    rc, err = job.wait("node0")
    assert rc == 138, err[-3000:]
    assert re.search(r"rendezvous timed out after 15 s: 1 of the minimum 2 nodes joined \(.*"
                     r"excluded: --health-check exit 1: marker present", err), err[-3000:]
    assert len(rounds(log)) == 2, rounds(log)  # the sick spare ran no worker
    rc, err = job.wait("spare")
    assert rc == 138, err[-3000:]


def test_grpc_a_spare_whose_check_fails_while_it_waits_is_not_taken(tmp_path):
    log, _, _, cmd = worker(tmp_path)
    marker, spare_events = tmp_path / "sick", tmp_path / "spare-events.jsonl"
    port = free_port()
    job = Job(["--rdzv-endpoint", f"127.0.0.1:{port}"],
              ["--nnodes", "2", "--spares", "1", "--nproc-per-node", "1", "--max-restarts", "0",
               "--rdzv-conf", "join_timeout=15s", *cmd])
    try:
        start_two_and_a_spare(
            job, log, first=["--node-rank", "0"], second=["--node-rank", "1"],
            spare=["--health-check", f'if [ -e {marker} ]; then echo "marker present"; exit 1; fi',
                   "--spare-check-interval", "300ms", "--event-log", spare_events])
        assert_a_spare_that_turns_sick_is_not_taken(job, log, marker, spare_events)
    finally:
        job.kill_all()


@pytest.mark.skipif(not os.path.exists(ETCD),
                    reason="etcd-server is not installed (scripts/setup.sh)")
def test_etcd_a_spare_whose_check_fails_while_it_waits_is_not_taken(tmp_path):
    log, _, _, cmd = worker(tmp_path)
    marker, spare_events = tmp_path / "sick", tmp_path / "spare-events.jsonl"
    etcd = EtcdCluster(1)
    job = Job(["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints],
              ["--nnodes", "2", "--spares", "1", "--nproc-per-node", "1", "--max-restarts", "0",
               "--rdzv-conf", "heartbeat_interval=1s,heartbeat_misses=2,join_timeout=15s", *cmd])
    try:
        start_two_and_a_spare(
            job, log,
            spare=["--health-check", f'if [ -e {marker} ]; then echo "marker present"; exit 1; fi',
                   "--spare-check-interval", "300ms", "--event-log", spare_events])
        assert_a_spare_that_turns_sick_is_not_taken(job, log, marker, spare_events)
    finally:
        job.kill_all()
        etcd.stop()


def test_a_spare_whose_gpu_is_taken_while_it_waits_is_excluded_until_it_is_free(tmp_path):
    """The built-in GPU check (muster-probe's inventory, fake driver libraries) on a spare
    that never ran a round: a process appears on its GPU 0 while it waits; the spare is
    Excluded naming it, and a spare again once the process is gone."""
    log, done, _, cmd = worker(tmp_path)
    procs_file, holder = tmp_path / "gpu_procs", subprocess.Popen(["sleep", "60"])
    fakes = BUILD / "tests" / "fakes"
    spare_env = muster_env(MUSTER_LIBCUDA=fakes / "libcuda.so.1",
                           MUSTER_LIBNVML=fakes / "libnvidia-ml.so.1", FAKE_GPU_COUNT=2,
                           FAKE_PROCS_FILE=procs_file)
    port = free_port()
    job = Job(["--rdzv-endpoint", f"127.0.0.1:{port}"],
              ["--nnodes", "2", "--spares", "1", "--nproc-per-node", "1", "--max-restarts", "0",
               "--rdzv-conf", "join_timeout=60s", *cmd])
    try:
        start_two_and_a_spare(job, log, first=["--node-rank", "0"], second=["--node-rank", "1"],
                              spare=["--spare-check-interval", "300ms"], spare_env=spare_env)
        procs_file.write_text(f"0:{holder.pid}:ghost:1024\n")
        status = wait_for(lambda: (s := status_json(job.backend_args)) and
                          [n for n in s["nodes"] if n["state"] == "Excluded"] and s, 30, 0.1,
                          "the spare listed as Excluded")
        [sick] = [n for n in status["nodes"] if n["state"] == "Excluded"]
        assert f"GPU 0: in use by live pid {holder.pid} ghost" in sick["excluded"], sick
        holder.kill()
        holder.wait()
        procs_file.write_text("")
        wait_for(lambda: states(job.backend_args) == ["Running", "Running", "Spare"], 30, 0.1,
                 "the spare listed as Spare again once the GPU is free")
        done.touch()
        for role in ("node0", "node1", "spare"):
            rc, err = job.wait(role)
            assert rc == 0, f"{role}: {err[-3000:]}"
    finally:
        holder.kill()
        job.kill_all()


def test_a_spares_warm_template_stays_up_while_it_waits_and_its_rank_is_forked(tmp_path):
    """--warm-start: the spare's template starts before its join and is still alive when the
    spare is taken in; its worker is then forked from it (start: warm)."""
    log, done = tmp_path / "rounds", tmp_path / "done"
    events = tmp_path / "spare-events.jsonl"
    train = tmp_path / "train.py"
    train.write_text(
        "import os, pathlib, time\n"
        f"with open({str(log)!r}, 'a') as f:\n"
        "    f.write(f\"{os.environ['ROLE_NAME']} {os.environ['WORLD_SIZE']} "
        "{os.environ['GROUP_RANK']} {os.environ['TORCHELASTIC_RESTART_COUNT']}\\n\")\n"
        f"while not pathlib.Path({str(done)!r}).exists():\n"
        "    time.sleep(0.05)\n")
    port = free_port()
    job = Job(["--rdzv-endpoint", f"127.0.0.1:{port}"],
              ["--nnodes", "2", "--spares", "1", "--nproc-per-node", "1", "--max-restarts", "0",
               "--warm-start", "--preload", "json", "--rdzv-conf", "join_timeout=60s", train])
    try:
        job.start("node0", "--node-rank", "0")
        job.start("node1", "--node-rank", "1")
        wait_for(lambda: len(rounds(log)) == 2, 60, 0.05, "round 1 on node0 and node1")
        job.start("spare", "--event-log", events)
        wait_for(lambda: states(job.backend_args) == ["Running", "Running", "Spare"], 30, 0.1,
                 "the third agent listed as Spare")
        time.sleep(1)  # waiting a while as a spare
        template = int(wait_for(lambda: re.search(rb"template pid (\d+)",
                                                  read_stderr_so_far(job.procs["spare"])),
                                10, 0.05, "the spare's template pid").group(1))
        assert os.path.exists(f"/proc/{template}"), "the spare's template died while it waited"
        job.procs["node1"].send_signal(signal.SIGKILL)
        wait_for(lambda: len(rounds(log)) == 4, 60, 0.02, "round 2 with the spare")
        assert sorted(rounds(log)[2:]) == ["node0 2 0 0", "spare 2 1 0"], rounds(log)
        started = wait_for(lambda: [json.loads(line) for line in events.read_text().splitlines()
                                    if '"worker_started"' in line], 10, 0.05, "worker_started")
        assert [e.get("start") for e in started] == ["warm"], started
        spare_events = [json.loads(line) for line in events.read_text().splitlines()
                        if '"event": "spare"' in line or '"event":"spare"' in line]
        assert len(spare_events) == 1 and spare_events[0]["round"] == 0, spare_events
        done.touch()
        for role in ("node0", "spare"):
            rc, err = job.wait(role)
            assert rc == 0, f"{role}: {err[-3000:]}"
    finally:
        job.kill_all()


def test_dry_run_shows_the_spares():
    r = subprocess.run([str(MUSTER), "run", "--dry-run", "--nnodes", "2", "--spares", "1",
                        "--rdzv-endpoint", "127.0.0.1:29999", "--no-python", "true"],
                       capture_output=True, text=True, timeout=30, env=muster_env())
    assert r.returncode == 0, r.stderr
    assert "spares                  up to 1: agents beyond --nnodes wait as hot spares" \
        in r.stdout, r.stdout
    r = subprocess.run([str(MUSTER), "run", "--spares", "-1", "--no-python", "true"],
                       capture_output=True, text=True, timeout=30, env=muster_env())
    assert r.returncode == 2 and "--spares" in r.stderr, r.stderr
