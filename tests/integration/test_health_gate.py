"""Issue 30 item 1: the health gate before every round (docs/guides/health-gate.md).

A node whose --health-check fails joins the job but counts toward no round: `muster status`
lists it as Excluded with the reason, its own metrics and event log say so, the other node
waits (a fixed-size job) or runs without it (an elastic one); once the check passes again
(the marker file is removed) the node rejoins and the job runs with it. Both rendezvous
backends; a check that hangs past --health-check-timeout counts as failed and says so."""
import json
import os
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import BUILD, MUSTER, fake, muster_env, run_muster, wait_for
from etcd_cluster import ETCD, EtcdCluster
from multinode import Agents, free_port


def sick_while(marker):
    """A --health-check that fails, saying why, while `marker` exists."""
    return f'if [ -e {marker} ]; then echo "marker {marker.name} present"; exit 1; fi'


def status_json(*backend_args):
    r = subprocess.run([str(MUSTER), "status", *backend_args, "--rdzv-id", "test", "--json"],
                       capture_output=True, text=True, timeout=30, env=muster_env())
    return json.loads(r.stdout) if r.returncode == 0 else None


def status_text(*backend_args):
    r = subprocess.run([str(MUSTER), "status", *backend_args, "--rdzv-id", "test"],
                       capture_output=True, text=True, timeout=30, env=muster_env())
    assert r.returncode == 0, r.stderr
    return r.stdout


def excluded_nodes(status):
    return [n for n in (status or {}).get("nodes", []) if n["state"] == "Excluded"]


def events(path, name):
    if not path.exists():
        return []
    out = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in out if e["event"] == name]


def metric(port, line_start):
    """The lines of /metrics on `port` that start so; none while nothing listens yet."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    except urllib.error.URLError:
        return []
    return [line for line in text.decode().splitlines() if line.startswith(line_start)]


def assert_sick_node_held_out_then_rejoins(tmp_path, agents, backend_args, marker, ranks,
                                           event_log, metrics_port):
    """Agent 1 of 2 (fixed size) is sick while `marker` exists: the job does not run, status
    names it and why, its metrics and event log say so; without the marker it rejoins."""
    status = wait_for(lambda: excluded_nodes(status_json(*backend_args)) and
                      status_json(*backend_args), 30, 0.1, "the sick node listed as Excluded")
    [sick] = excluded_nodes(status)
    assert "--health-check exit 1: marker sick present" in sick["excluded"], sick
    assert status["phase"] == "Pending", status
    others = [n for n in status["nodes"] if n is not sick]
    assert [n["state"] for n in others] == ["Waiting"], status["nodes"]
    text = status_text(*backend_args)
    assert "excluded: --health-check exit 1: marker sick present" in text, text
    assert f'muster_agent_phase{{phase="Excluded"}} 1' in metric(metrics_port, "muster_agent_phase"), \
        metric(metrics_port, "muster_agent_phase")
    # It checks again on a backoff (1 s, 2 s, ...) and stays out meanwhile.
    wait_for(lambda: len(events(event_log, "health_check")) >= 2, 10, 0.1, "a re-check")
    assert not ranks.exists(), ranks.read_text()
    checks = events(event_log, "health_check")
    assert not any(e["healthy"] for e in checks), checks
    assert checks[0]["next_check_s"] == 1 and checks[1]["next_check_s"] == 2, checks

    t0 = time.monotonic()
    marker.unlink()
    results = agents.wait(timeout=60)
    for rc, _, err in results:
        assert rc == 0, err[-3000:]
    print(f"marker removed -> job done in {time.monotonic() - t0:.1f}s")
    # Both nodes' workers ran, in one round of two nodes.
    lines = sorted(ranks.read_text().splitlines())
    assert len(lines) == 2 and all(line.split()[3] == "2" for line in lines), lines
    err_sick = results[1][2]
    assert "health gate: the node sits out the rounds: --health-check exit 1" in err_sick, \
        err_sick[-3000:]
    assert "health gate: the node is healthy again" in err_sick, err_sick[-3000:]
    assert events(event_log, "health_check")[-1]["healthy"] is True


def test_grpc_a_sick_node_sits_out_named_in_status_and_rejoins_when_healthy(tmp_path):
    marker, ranks, event_log = tmp_path / "sick", tmp_path / "ranks", tmp_path / "events.jsonl"
    marker.touch()
    metrics_port, server_metrics_port = free_port(), free_port()
    agents = Agents(
        2, ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-conf", "join_timeout=60s",
            *fake(f"ranks={ranks}", "exit=0")],
        per_agent=lambda i: ["--node-rank", i, "--metrics-port", server_metrics_port] if i == 0 else [
            "--node-rank", i, "--health-check", sick_while(marker), "--event-log", event_log,
            "--metrics-port", metrics_port])
    try:
        # The server (node rank 0's agent hosts it) counts the node as Excluded.
        wait_for(lambda: 'muster_server_nodes{state="Excluded"} 1' in
                 metric(server_metrics_port, "muster_server_nodes"), 30, 0.1,
                 "muster_server_nodes{state=\"Excluded\"} 1")
        assert_sick_node_held_out_then_rejoins(
            tmp_path, agents, ["--rdzv-endpoint", f"127.0.0.1:{agents.port}"], marker, ranks,
            event_log, metrics_port)
    finally:
        for p in agents.procs:
            if p.poll() is None:
                p.kill()


@pytest.mark.skipif(not os.path.exists(ETCD),
                    reason="etcd-server is not installed (scripts/setup.sh)")
def test_etcd_a_sick_node_sits_out_named_in_status_and_rejoins_when_healthy(tmp_path):
    marker, ranks, event_log = tmp_path / "sick", tmp_path / "ranks", tmp_path / "events.jsonl"
    marker.touch()
    metrics_port = free_port()
    etcd = EtcdCluster(1)
    procs = []
    try:
        common = ["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints, "--rdzv-id", "test",
                  "--rdzv-conf", "heartbeat_interval=1s,heartbeat_misses=2,join_timeout=60s",
                  "--nnodes", "2", "--nproc-per-node", "1"]
        sick = ["--health-check", sick_while(marker), "--event-log", event_log,
                "--metrics-port", metrics_port]
        for extra in ([], sick):
            procs.append(subprocess.Popen(
                [str(MUSTER), "run", *common, *map(str, extra), *fake(f"ranks={ranks}", "exit=0")],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=muster_env()))
            if not extra:  # the healthy one coordinates: its key is the oldest
                time.sleep(1)

        class EtcdAgents:
            def wait(self, timeout):
                outs = [p.communicate(timeout=timeout) for p in procs]
                return [(p.returncode, *out) for p, out in zip(procs, outs)]

        assert_sick_node_held_out_then_rejoins(
            tmp_path, EtcdAgents(),
            ["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints], marker, ranks,
            event_log, metrics_port)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        etcd.stop()


def test_elastic_job_runs_without_the_sick_node_then_reforms_with_it(tmp_path):
    """nnodes 1:2: the healthy node runs alone; once the other passes its check the job
    re-forms with both (a membership change: no restart counted) and ends there."""
    marker, worlds = tmp_path / "sick", tmp_path / "worlds"
    marker.touch()
    # Each worker notes its world size; a world of 2 is the end, alone it waits.
    worker = (f'echo "$WORLD_SIZE $TORCHELASTIC_RESTART_COUNT" >> {worlds}; '
              '[ "$WORLD_SIZE" = 2 ] && exit 0; exec sleep 60')
    agents = Agents(
        2, ["--nnodes", "1:2", "--nproc-per-node", "1", "--max-restarts", "0",
            "--rdzv-conf", "last_call_timeout=1s,join_timeout=60s",
            "--no-python", "/bin/sh", "-c", worker],
        per_agent=lambda i: ["--node-rank", i] if i == 0 else [
            "--node-rank", i, "--health-check", sick_while(marker)])
    try:
        wait_for(lambda: worlds.exists() and worlds.read_text().split() == ["1", "0"], 30, 0.1,
                 "the healthy node running alone")
        status = status_json("--rdzv-endpoint", f"127.0.0.1:{agents.port}")
        assert status["phase"] == "Running", status
        assert [n["state"] for n in status["nodes"]] == ["Running", "Excluded"], status["nodes"]
        marker.unlink()
        results = agents.wait(timeout=60)
        for rc, _, err in results:
            assert rc == 0, err[-3000:]
        assert sorted(worlds.read_text().splitlines()) == ["1 0", "2 0", "2 0"], \
            worlds.read_text()
        assert "passed its health gate; re-forming with 2 nodes" in results[0][2], \
            results[0][2][-3000:]
    finally:
        for p in agents.procs:
            if p.poll() is None:
                p.kill()


def test_a_check_that_hangs_past_its_deadline_fails_naming_the_flag(tmp_path):
    t0 = time.monotonic()
    r = run_muster(["--health-check", "echo checking; exec sleep 30",
                    "--health-check-timeout", "1s", "--rdzv-conf", "join_timeout=4s",
                    *fake("exit=0")], timeout=60)
    took = time.monotonic() - t0
    assert r.returncode == 138, r.stderr[-3000:]
    assert "--health-check did not finish within 1s (--health-check-timeout): checking" \
        in r.stderr, r.stderr[-3000:]
    assert "excluded: --health-check did not finish within 1s" in r.stderr, r.stderr[-3000:]
    assert took < 20, took  # each check ended at its deadline, not the command's 30 s


def test_a_stale_gpu_process_between_rounds_keeps_the_node_out_until_it_is_gone(tmp_path):
    """The built-in GPU check (muster-probe's inventory, fake driver libraries): attempt 0's
    worker leaves a process on GPU 0 and fails; before the next round the gate finds it and
    the node sits out; once the process is gone the node passes and attempt 1 runs."""
    procs_file, event_log = tmp_path / "gpu_procs", tmp_path / "events.jsonl"
    holder = subprocess.Popen(["sleep", "60"])
    worker = (f'if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then '
              f'echo "0:{holder.pid}:ghost:1024" > {procs_file}; exit 1; fi')
    fakes = BUILD / "tests" / "fakes"
    env = muster_env(MUSTER_LIBCUDA=fakes / "libcuda.so.1",
                     MUSTER_LIBNVML=fakes / "libnvidia-ml.so.1", FAKE_GPU_COUNT=2,
                     FAKE_PROCS_FILE=procs_file)
    p = subprocess.Popen([str(MUSTER), "run", "--nproc-per-node", "1", "--max-restarts", "1",
                          "--event-log", str(event_log), "--no-python", "/bin/sh", "-c", worker],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        stale = f"GPU probe exited 4: GPU 0: in use by live pid {holder.pid} ghost"
        wait_for(lambda: any(stale in e.get("reason", "")
                             for e in events(event_log, "health_check")), 30, 0.1,
                 "the stale GPU process named")
        time.sleep(1.5)  # a re-check or two: still out while it lives
        assert p.poll() is None
        holder.kill()  # and the driver lists it no more
        holder.wait()
        procs_file.write_text("")
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err[-3000:]
        assert f"health gate: the node sits out the rounds: {stale}" in err, err[-3000:]
        checks = events(event_log, "health_check")
        assert [e["healthy"] for e in checks][0] is True and checks[-1]["healthy"] is True, checks
    finally:
        holder.kill()
        if p.poll() is None:
            p.kill()


@pytest.mark.skipif(not os.path.exists(ETCD),
                    reason="etcd-server is not installed (scripts/setup.sh)")
def test_etcd_an_excluded_node_stays_excluded_across_a_coordinator_change(tmp_path):
    """A and B run (nnodes 2:3) while C is sick; A, the coordinator, is killed: the next
    coordinator (B) continues the job from the node keys, C still Excluded with its reason;
    healthy, C joins B's round."""
    marker, worlds, done = tmp_path / "sick", tmp_path / "worlds", tmp_path / "done"
    marker.touch()
    worker = (f'echo "$WORLD_SIZE $GROUP_RANK" >> {worlds}; '
              f'while [ ! -e {done} ]; do sleep 0.1; done')
    etcd = EtcdCluster(1)
    backend = ["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints]
    procs = {}
    try:
        for tag in "ABC":
            extra = ["--health-check", sick_while(marker)] if tag == "C" else []
            procs[tag] = subprocess.Popen(
                [str(MUSTER), "run", *backend, "--rdzv-id", "test", "--rdzv-conf",
                 "heartbeat_interval=1s,heartbeat_misses=2,last_call_timeout=1s,join_timeout=60s",
                 "--nnodes", "2:3", "--nproc-per-node", "1", "--max-restarts", "0", *extra,
                 "--no-python", "/bin/sh", "-c", worker],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=muster_env())
            time.sleep(1)  # key age: A coordinates, B is next
        wait_for(lambda: worlds.exists() and len(worlds.read_text().split("\n")) > 2, 30, 0.1,
                 "A and B running")
        procs["A"].kill()
        procs["A"].wait()

        def excluded_after_takeover():
            s = status_json(*backend)
            return s and any("takes over" in h["reason"] or "coordinator" in h["reason"]
                             for h in s.get("history", [])) and excluded_nodes(s)

        [sick] = wait_for(excluded_after_takeover, 30, 0.2, "C excluded under B")
        assert "--health-check exit 1: marker sick present" in sick["excluded"], sick
        marker.unlink()
        wait_for(lambda: sorted(l.split()[0] for l in worlds.read_text().splitlines()
                                if l.strip())[-2:] == ["2", "2"] and
                 [n["state"] for n in status_json(*backend)["nodes"]] == ["Running", "Running"],
                 60, 0.2, "B and C running together")
        done.touch()
        for tag in "BC":
            out, err = procs[tag].communicate(timeout=60)
            assert procs[tag].returncode == 0, (tag, err[-3000:])
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
        etcd.stop()


def test_dry_run_says_what_the_gate_checks(tmp_path):
    # The gate is findable before a job runs: --dry-run lists its checks (it did not).
    r = run_muster(["--dry-run", "--health-check", "test -e /tmp", "--health-check-timeout",
                    "5s", "--health-min-free-space", "1GiB", *fake("exit=0")], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    gate = next(line for line in r.stdout.splitlines() if line.strip().startswith("health gate"))
    assert "1024 MiB free" in gate and "`test -e /tmp` exits 0 within 5s" in gate, gate
    assert "a waiting spare again every 30s" in gate, gate  # --spare-check-interval
    r = run_muster(["--dry-run", "--health-min-free-space", "0", *fake("exit=0")],
                   cwd=tmp_path)
    gate = next(line for line in r.stdout.splitlines() if line.strip().startswith("health gate"))
    assert "free" not in gate and "exits 0" not in gate, gate
